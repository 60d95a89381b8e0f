"""A complaint by phone, end to end: an English-speaking caller on a ko/en line, on a real PostgreSQL server.

The call (issue 24 on a line with stt.language = "auto"): report → slots over two turns → read-back
→ yes (key 1) → the reception number is spoken and stored. The first turn switches the call to
English: the model is asked for English, the read-back and the reception number are English, and
the ticket records the language. Then the desk's commands (``bot/tools/desk.py``, on the same
database) list the ticket, close it and list the call.

Real Whisper base (espeak-ng's English: base cannot read espeak's Korean reliably through μ-law),
real VAD, the fake vLLM for the model's turns, the stand-in TTS.

Held lower down: the same dialog in Korean on SQLite and PostgreSQL in-process, a spoken yes and
keying a reception number in for its status included (tests/dialog/test_intake.py); a Korean read-back
and a spoken yes over the phone (tests/aftercall/test_after_call_phone.py); a worker killed mid-call keeps
its turns and its calls are marked aborted on restart (tests/app/test_scaleout.py, tests/store/test_store.py);
the commands' output (tests/tools/test_cli.py).
"""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest

from bot.languages.en.normalize import read_digits_en
from bot.store.db import Store
from bot.testing.call_steps import call_row, model_turn, say, wait_for
from bot.testing.fake_llm import FakeLLM
from bot.testing.phone import FAST_VOICE, PhoneLine, offline_bot_overrides, open_call, start_phone_bot
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import TwilioCallSimulator
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

LINE = PhoneLine(auth_token="test-auth-token-intake", account_sid="AC" + "2" * 32)
CALLER = "+821098765432"
REPORT = FIXTURES / "en_report.wav"  # "hello, I would like to report a problem"
HELLO = FIXTURES / "en_hello.wav"  # "hello, how are you today": not a shortcut, the model answers


@pytest.fixture(scope="module")
def fake_llm():
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake:
        yield fake


def start_bot(tmp, whisper_dir, standin_tts_dir, fake_llm, url: str, worker: str = "intake-test") -> BotProcess:
    overrides = offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records")
    overrides = [o for o in overrides if not o.startswith(("records.url", "stt.language"))]
    return start_phone_bot(
        LINE, [*overrides, "stt.language='auto'", "line.languages=['ko','en']", f"records.url='{url}'",
               f"records.worker='{worker}'", FAST_VOICE],
        env={"TWILIO_ACCOUNT_SID": None},
        log_path=tmp / f"bot-{time.monotonic_ns()}.log",
    )


async def report(call: TwilioCallSimulator, fake_llm: FakeLLM, location: str) -> int:
    """Greeting, then two spoken turns: the model gets category, then location. Returns the read-back's audio bytes."""
    await call.wait_for_media(timeout=20)
    await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
    # ``heard``: the whole utterance's call takes the script, not a speculative one on "Hello?" alone.
    fake_llm.script(model_turn("Sorry to hear that. Where is it?"), heard="report")
    await say(call, REPORT)
    fake_llm.script(model_turn("Thank you.", location=location), heard="how")
    before = len(call.media_audio())
    await say(call, HELLO)
    return len(call.media_audio()) - before


def said_turns(call: dict) -> list[dict]:
    return [t for t in call["turns"] if t.get("route") != "greeting"]


async def test_an_english_caller_reports_hears_an_english_number_and_the_desk_sees_the_ticket(
        tmp_path, whisper_dir, standin_tts_dir, fake_llm, postgres):
    db_url = postgres.create_database(f"intake_{uuid.uuid4().hex[:10]}")
    bot = start_bot(tmp_path, whisper_dir, standin_tts_dir, fake_llm, db_url)
    fake_llm.reset()  # after the startup check's own request
    store = Store(db_url)
    try:
        call = await open_call(bot, LINE, caller=CALLER)
        async with call:
            readback_audio = await report(call, fake_llm, "Main Street 12")
            before = len(call.media_audio())
            t = time.monotonic()
            await call.send_dtmf("1")  # yes: file it
            await call.wait_for_media(timeout=30, after=t)
            await call.wait_for_silence_from_bot(gap=0.8, timeout=40)
            number_audio = len(call.media_audio()) - before
            await call.stop()
        assert fake_llm.calls == 2, "the yes and the ticket took no model call"
        assert readback_audio > 8000 and number_audio > 16000  # both were heard (8 kHz, 16-bit)
        # The model was asked for English on both turns; the caller's words were decoded in English.
        for request in fake_llm.requests:
            system = " ".join(m["content"] for m in request["messages"] if m["role"] == "system")
            assert "The caller speaks English" in system
        first_said = [m["content"] for m in fake_llm.requests[0]["messages"] if m["role"] == "user"][-1]
        assert "report a problem" in first_said.lower()

        row = await wait_for(lambda: (c := call_row(store, call.call_sid)) and c["ended_at"] and c, what="call row")
        assert row["caller"] == CALLER and row["end_reason"] == "caller_hangup" and row["worker"] == "intake-test"
        turns = said_turns(row)
        print("english call:", [(t["route"], t["language"], t["language_p"], t["transcript"], t["reply"])
                                for t in turns])
        assert [t["route"] for t in turns] == ["llm", "llm", "rule"], turns
        assert [t["llm_calls"] for t in turns] == [1, 1, 0]
        assert turns[0]["language"] == "en" and turns[0]["language_p"] >= 0.8, turns[0]  # switched on turn 1
        assert all(t["language"] == "en" for t in turns)
        assert turns[1]["reply"].endswith("A street light complaint at Main Street 12. Shall I file it?")
        assert turns[2]["transcript"] == "[keypad] 1"
        (ticket,) = store.list_tickets()
        number = ticket["reception_no"]
        assert turns[2]["reply"].startswith(f"Your complaint is filed. Your reception number is {read_digits_en(number)}.")
        assert ticket["call_sid"] == call.call_sid and ticket["location"] == "Main Street 12"
        assert ticket["language"] == "en" and "report" in ticket["excerpt"].lower()
        log = bot.log()
        assert "call language -> en" in log and "switched to en" not in log  # said the pipeline's way
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

    assert f"| {number} | open | street_lights | Main Street 12 |" in cli(list_tickets, "open")
    assert json.loads(cli(update_ticket, number, "done"))["status"] == "done"
    assert f"| {number} |" not in cli(list_tickets, "open")
    calls = cli(list_calls, None, False)
    assert "1 call(s)" in calls and CALLER not in calls
    export = [json.loads(line) for line in cli(list_calls, None, True).splitlines()]
    assert [c["call_sid"] for c in export] == [call.call_sid] and export[0]["caller"] == CALLER
