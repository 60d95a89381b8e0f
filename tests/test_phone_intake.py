"""A complaint by phone, end to end, on SQLite and on a real PostgreSQL server.

Call 1: report → slots over two turns → read-back → yes (key 1) → the reception number is
spoken and stored. Call 2: the caller keys the number in and hears its status. Then the desk's CLI shows the
ticket. Kill test: the server is SIGKILLed after two turns; on restart both turns are there and
the call is marked aborted.

Real Whisper base (in English, as in the other phone tests: base cannot read espeak's Korean
reliably through μ-law, and a misheard "수고하셨습니다" would end the call), real VAD, the fake
vLLM for the model's turns, the stand-in TTS. A spoken yes is the same rule (tests/test_intake.py).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from bot.languages.ko.normalize import read_digits
from bot.store.db import Store
from bot.testing.fake_llm import FakeLLM
from bot.testing.process import ROOT, BotProcess
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


def model_turn(reply, **kw):
    base = {"reply": reply, "intent": "report_problem", "category": "street_lights", "location": None, "time": None,
            "flow": "continue"}
    base.update(kw)
    return base


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


async def say(call: TwilioCallSimulator, wav) -> None:
    """Speak, then wait until the bot has answered and gone quiet."""
    await call.send_wav(wav)
    await call.wait_for_media(timeout=30, after=time.monotonic())
    await call.wait_for_silence_from_bot(gap=0.8, timeout=40)


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


async def wait_for(predicate, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def call_row(store: Store, call_sid: str) -> dict | None:
    return next((c for c in store.list_calls() if c["call_sid"] == call_sid), None)


def said_turns(call: dict) -> list[dict]:
    return [t for t in call["turns"] if t.get("route") != "greeting"]


async def test_report_hear_a_number_call_again_key_it_in_hear_the_status(
        tmp_path, whisper_dir, standin_tts_dir, fake_llm, db_url):
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

        # Call again and key the number in: the status comes from the database, no model call.
        calls_before = fake_llm.calls
        call2 = await open_call(bot)
        async with call2:
            await call2.wait_for_media(timeout=20)
            await call2.wait_for_silence_from_bot(gap=0.6, timeout=30)
            t = time.monotonic()
            for digit in number + "#":
                await call2.send_dtmf(digit)
            await call2.wait_for_media(timeout=20, after=t)
            await call2.wait_for_silence_from_bot(gap=0.8, timeout=30)
            await call2.stop()
        assert fake_llm.calls == calls_before
        row2 = await wait_for(lambda: (c := call_row(store, call2.call_sid)) and c["ended_at"] and c, what="call 2")
        (keyed,) = said_turns(row2)
        assert keyed["transcript"] == f"[keypad] {number}#" and keyed["route"] == "rule"
        assert keyed["reply"] == f"접수번호 {read_digits(number)}, 가로등·보안등 민원은 현재 접수 상태입니다."
    finally:
        bot.stop()
        store.close()

    # The desk sees it with the CLI, and closes it.
    def cli(*args) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args, "--set", f"records.url='{db_url}'"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)

    listed = cli("tickets", "--status", "open")
    assert listed.returncode == 0 and f"| {number} | open | street_lights | 중앙로 12번길 |" in listed.stdout
    done = cli("ticket", number, "--status", "done")
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "done"
    assert f"| {number} |" not in cli("tickets", "--status", "open").stdout
    calls = cli("calls")
    assert calls.returncode == 0 and "2 call(s)" in calls.stdout and CALLER not in calls.stdout
    export = [json.loads(line) for line in cli("calls", "--json").stdout.splitlines()]
    assert {c["call_sid"] for c in export} == {call.call_sid, call2.call_sid} and export[0]["caller"] == CALLER


async def test_sigkill_mid_call_loses_no_turn_and_the_call_is_marked_aborted(
        tmp_path, whisper_dir, standin_tts_dir, fake_llm, db_url):
    bot = start_bot(tmp_path, whisper_dir, standin_tts_dir, fake_llm, db_url, worker="kill-test")
    fake_llm.reset()
    store = Store(db_url)
    try:
        call = await open_call(bot)
        async with call:
            await report(call, fake_llm, "시청 앞")
            bot.kill()  # mid-call: no shutdown, no flush
            await call.wait_closed(timeout=10)
        row = call_row(store, call.call_sid)
        assert row is not None and row["ended_at"] is None  # nobody closed it
        # Every turn answered before the kill is there. Usually two; under load Whisper may cut an
        # utterance into more segments, each a turn of its own (and a model call).
        turns = said_turns(row)
        answered = [t for t in turns if t["reply"]]
        assert len(answered) >= 2 and all(t["transcript"] for t in answered), answered
        assert len([t for t in answered if t["route"] == "llm"]) == fake_llm.calls, answered
        assert any(t["reply"].endswith("시청 앞, 이 내용으로 접수할까요?") for t in answered), answered
        bot = start_bot(tmp_path, whisper_dir, standin_tts_dir, fake_llm, db_url, worker="kill-test")
        row = call_row(store, call.call_sid)
        assert row["end_reason"] == "aborted" and row["ended_at"] is not None
        assert [t["reply"] for t in said_turns(row)] == [t["reply"] for t in turns]
    finally:
        bot.stop()
        store.close()
