"""A complaint by phone, end to end, on a real PostgreSQL server.

The call: report → slots over two turns → read-back → yes (key 1) → the reception number is
spoken and stored. Then the desk's commands (``bot/tools/desk.py``, on the same database) list
the ticket, close it and list the call.

Real Whisper base (in English, as in the other phone tests: base cannot read espeak's Korean
reliably through μ-law, and a misheard "수고하셨습니다" would end the call), real VAD, the fake
vLLM for the model's turns, the stand-in TTS. A spoken yes is the same rule (tests/test_intake.py).

Held lower down: the same dialog on SQLite and PostgreSQL in-process, keying a reception number in
for its status included (tests/test_intake.py); a worker killed mid-call keeps its turns and its
calls are marked aborted on restart (tests/test_scaleout.py, tests/test_store.py); the commands'
output (tests/test_cli.py).
"""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest

from bot.languages.ko.normalize import read_digits
from bot.store.db import Store
from bot.testing.call_steps import call_row, model_turn, say, wait_for
from bot.testing.fake_llm import FakeLLM
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)
from tests.conftest import FIXTURES, offline_bot_overrides

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

AUTH_TOKEN = "test-auth-token-intake"
ACCOUNT_SID = "AC" + "2" * 32
PUBLIC_HOST = "voice.example.org"
PUBLIC_URL = f"https://{PUBLIC_HOST}/twilio/voice"
CALLER = "+821098765432"
REPORT = FIXTURES / "en_hello.wav"  # "hello, how are you today": not a shortcut, the model answers


@pytest.fixture(scope="module")
def fake_llm():
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake:
        yield fake


def start_bot(tmp, whisper_dir, standin_tts_dir, fake_llm, url: str, worker: str = "intake-test") -> BotProcess:
    overrides = offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records")
    overrides = [o for o in overrides if not o.startswith("records.url")]
    proc = BotProcess(
        [*overrides, f"records.url='{url}'", f"records.worker='{worker}'",
         f"server.public_host='{PUBLIC_HOST}'"],
        env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None},
        log_path=tmp / f"bot-{time.monotonic_ns()}.log",
    )
    proc.wait_ready()
    return proc


async def open_call(bot: BotProcess) -> TwilioCallSimulator:
    call_sid = new_sid("CA")
    params = voice_webhook_params(call_sid, account_sid=ACCOUNT_SID)
    params["From"] = CALLER
    resp = await post_voice_webhook(bot.base_url, PUBLIC_URL, params, AUTH_TOKEN)
    assert resp.status_code == 200, resp.text
    _, stream_params = parse_twiml_stream(resp.text)
    assert CALLER not in resp.text  # the caller's number stays on the server
    return TwilioCallSimulator(bot.ws_url, call_sid=call_sid, custom_parameters=stream_params, account_sid=ACCOUNT_SID)


async def report(call: TwilioCallSimulator, fake_llm: FakeLLM, location: str) -> int:
    """Greeting, then two spoken turns: the model gets category, then location. Returns the read-back's audio bytes."""
    await call.wait_for_media(timeout=20)
    await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
    fake_llm.script(model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?"))
    await say(call, REPORT)
    fake_llm.script(model_turn("알겠습니다.", location=location))
    before = len(call.media_audio())
    await say(call, REPORT)
    return len(call.media_audio()) - before


def said_turns(call: dict) -> list[dict]:
    return [t for t in call["turns"] if t.get("route") != "greeting"]


async def test_report_hear_a_number_call_again_key_it_in_hear_the_status(
        tmp_path, whisper_dir, standin_tts_dir, fake_llm, postgres):
    db_url = postgres.create_database(f"intake_{uuid.uuid4().hex[:10]}")
    bot = start_bot(tmp_path, whisper_dir, standin_tts_dir, fake_llm, db_url)
    fake_llm.reset()  # after the startup check's own request
    store = Store(db_url)
    try:
        call = await open_call(bot)
        async with call:
            readback_audio = await report(call, fake_llm, "중앙로 12번길")
            before = len(call.media_audio())
            t = time.monotonic()
            await call.send_dtmf("1")  # yes
            await call.wait_for_media(timeout=30, after=t)
            await call.wait_for_silence_from_bot(gap=0.8, timeout=40)
            number_audio = len(call.media_audio()) - before
            await call.stop()
        assert fake_llm.calls == 2, "the yes and the ticket took no model call"
        assert readback_audio > 8000 and number_audio > 16000  # both were heard (8 kHz, 16-bit)
        row = await wait_for(lambda: (c := call_row(store, call.call_sid)) and c["ended_at"] and c, what="call row")
        assert row["caller"] == CALLER and row["end_reason"] == "caller_hangup" and row["worker"] == "intake-test"
        turns = said_turns(row)
        assert [t["route"] for t in turns] == ["llm", "llm", "rule"], turns
        assert [t["llm_calls"] for t in turns] == [1, 1, 0]
        assert turns[1]["reply"].endswith("가로등·보안등, 중앙로 12번길, 이 내용으로 접수할까요?")
        assert turns[2]["transcript"] == "[keypad] 1"
        (ticket,) = store.list_tickets()
        number = ticket["reception_no"]
        assert read_digits(number) in turns[2]["reply"]
        assert ticket["call_sid"] == call.call_sid and ticket["location"] == "중앙로 12번길"
        assert "hello" in ticket["excerpt"].lower()

    finally:
        bot.stop()
        store.close()

    # The desk sees it with its commands, and closes it.
    from bot.config import load_config
    from bot.tools.desk import list_calls, list_tickets, update_ticket

    config = load_config(overrides=[f"records.url='{db_url}'"])

    def cli(command, *args) -> str:
        out = io.StringIO()
        assert command(config, *args, out) == 0
        return out.getvalue()

    assert f"| {number} | open | street_lights | 중앙로 12번길 |" in cli(list_tickets, "open")
    assert json.loads(cli(update_ticket, number, "done"))["status"] == "done"
    assert f"| {number} |" not in cli(list_tickets, "open")
    calls = cli(list_calls, None, False)
    assert "1 call(s)" in calls and CALLER not in calls
    export = [json.loads(line) for line in cli(list_calls, None, True).splitlines()]
    assert [c["call_sid"] for c in export] == [call.call_sid] and export[0]["caller"] == CALLER
