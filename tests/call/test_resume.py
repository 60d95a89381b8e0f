"""Issue 46 end to end: a call whose media stream breaks mid-intake resumes and goes on where it stopped.

One lab worker (``bot.testing.lab_server``: the product server, the fixed-delay STT with each stream's
words scripted), the fake vLLM, the stand-in TTS, no Twilio REST credentials (the bot's own end closes
the stream). The caller is ``TwilioCall``: Twilio's side of a whole call, which asks the ``<Connect>``'s
signed action when a stream closes and runs the TwiML it gets.

A complaint is reported over two turns (category, then location: the read-back); the socket then
breaks (a network reset). Twilio asks the action, which answers a new stream; the worker rebuilds the
call from the records: the caller hears "연결이 잠시 끊겼습니다. 이어서 도와드리겠습니다." within 3 s
of the break (the action's round trip included), says yes to the read-back of the slots said before
the break, hears the reception number; the model's next request carries the words said before the
break. The caller says goodbye: the bot's end closes the stream and the action answers ``<Hangup/>``,
not a third stream. The records: one call, two segments, the turns numbered on, one ticket.

The kill -9 and the rolling restart with two workers behind nginx: ``run_bot.py faults`` (docs/faults.md).
"""

from __future__ import annotations

import json
import time

import pytest

from bot.store.db import Store
from bot.store.segments import list_segments
from bot.testing.call_steps import call_row, model_turn, say, wait_for
from bot.testing.fake_llm import FakeLLM
from bot.testing.phone import FAST_VOICE
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import TwilioCall
from tests.conftest import FIXTURES, offline_bot_overrides

pytestmark = pytest.mark.slow  # a real bot process over real sockets: not in the quick subset

AUTH_TOKEN = "test-auth-token-resume"
PUBLIC_HOST = "voice.example.org"
HEARD = "가로등이 고장났어요"
SPOKEN = FIXTURES / "ko_majayo.wav"  # one speech segment: each scripted utterance takes one text
RESUMED = "연결이 잠시 끊겼습니다. 이어서 도와드리겠습니다."


@pytest.fixture(scope="module")
def fake_llm():
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake:
        yield fake


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm):
    tmp = tmp_path_factory.mktemp("resume")
    proc = BotProcess(
        [*offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
         f"server.public_host='{PUBLIC_HOST}'", "call.idle_prompt_secs=0", FAST_VOICE],
        env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None, "STREAM_TOKEN_KEY": "r" * 32},
        log_path=tmp / "bot.log",
        entry=("-m", "bot.testing.lab_server", "--stt-text", HEARD, "--stt-delay-ms", "200"),
    )
    try:
        proc.wait_ready()
        proc.records_url = f"sqlite:///{tmp / 'records' / 'calls.db'}"
        yield proc
    finally:
        proc.stop()


async def test_a_stream_broken_mid_intake_resumes_the_same_intake_and_the_bots_end_hangs_up(bot, fake_llm):
    fake_llm.reset()
    call = TwilioCall(bot.base_url, public_host=PUBLIC_HOST, auth_token=AUTH_TOKEN,
                      first_stream_parameters={"stt_script": json.dumps([HEARD, "중앙로 12번길이에요"],
                                                                        ensure_ascii=False)},
                      stream_parameters={"stt_script": json.dumps(["네", "하나 더 있어요", "끊을게요"],
                                                                  ensure_ascii=False)})
    store = Store(bot.records_url)
    try:
        async with call:
            first = call.stream
            await first.wait_for_media(timeout=20)
            await first.wait_for_silence_from_bot(gap=0.6, timeout=30)
            fake_llm.script(model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?"))
            await say(first, SPOKEN)
            fake_llm.script(model_turn("알겠습니다.", location="중앙로 12번길"))
            await say(first, SPOKEN)  # the read-back: 가로등 고장, 중앙로 12번길, 맞습니까?
            before = fake_llm.calls

            broke = time.monotonic()
            await call.drop_stream()
            second = await call.wait_next_stream(0, timeout=10)
            heard_at = await second.wait_for_media(timeout=10)
            assert heard_at - broke < 3.0, f"the resume sentence came {heard_at - broke:.2f} s after the break"
            (gap,) = call.gaps()
            assert gap["silence"] is not None and gap["silence"] < 3.0, gap
            await second.wait_for_silence_from_bot(gap=0.6, timeout=20)

            await say(second, SPOKEN)  # "네": yes to the read-back said before the break
            assert fake_llm.calls == before, "the yes to a pending read-back takes no model call"
            fake_llm.script(model_turn("네, 말씀하세요.", category="none", intent="other"))
            await say(second, SPOKEN)  # "하나 더 있어요": the model, with the call's words so far
            context = json.dumps(fake_llm.requests[-1], ensure_ascii=False)
            assert HEARD in context and "중앙로 12번길이에요" in context
            fake_llm.script(model_turn("감사합니다. 안녕히 계세요.", intent="other", category="none", flow="end"))
            await second.send_wav(SPOKEN)  # "끊을게요": the bot says goodbye and ends the call
            assert await call.wait_ended(30) == "hangup"
        assert len(call.legs) == 2, "the bot's own end is not resumed"

        (ticket,) = store.list_tickets()
        assert ticket["category"] == "street_lights" and ticket["location"] == "중앙로 12번길"
        row = await wait_for(lambda: (c := call_row(store, call.call_sid)) and c["ended_at"] and c,
                             what="the call's record")
        assert [c["call_sid"] for c in store.list_calls()].count(call.call_sid) == 1
        segments = list_segments(store, call.call_sid)
        assert [(s["idx"], s["bot_ended"]) for s in segments] == [(0, False), (1, True)]
        assert segments[0]["end_reason"] == "stream_closed" and segments[1]["end_reason"] == "completed"
        assert all(s["worker"] and s["started_at"] and s["ended_at"] and s["action_at"] for s in segments)
        indices = [t["index"] for t in row["turns"]]
        assert indices == sorted(set(indices)), "the resumed stream numbers its turns on"
        resumed = next(t for t in row["turns"] if t.get("route") == "resumed")
        assert RESUMED in (resumed.get("reply") or "") and "resumed" in resumed.get("heard", [])
        assert row["end_reason"] == "completed"
    finally:
        store.close()
