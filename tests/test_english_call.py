"""Issue 24 end to end: an English-speaking caller on a line with stt.language = "auto".

A simulated Twilio call with espeak-ng's English (real Whisper base, real VAD, the fake vLLM, the
stand-in TTS): the first turn switches the call to English, the model is asked for English, the
read-back and the reception number are English, and the ticket records the language. The calls
in the other phone tests run on a forced language and stay as they were.
"""

from __future__ import annotations

import time

import pytest

from bot.languages.en.normalize import read_digits_en
from bot.store.db import Store
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

pytestmark = pytest.mark.slow  # a real bot process over real sockets

AUTH_TOKEN = "test-auth-token-english"
ACCOUNT_SID = "AC" + "4" * 32
PUBLIC_HOST = "voice.example.org"
CALLER = "+821055501234"
REPORT = FIXTURES / "en_report.wav"  # "hello, I would like to report a problem"
HELLO = FIXTURES / "en_hello.wav"  # "hello, how are you today"


def model_turn(reply, **kw):
    base = {"reply": reply, "intent": "report_problem", "category": "street_lights", "location": None, "time": None,
            "flow": "continue"}
    return base | kw


async def say(call: TwilioCallSimulator, wav) -> None:
    await call.send_wav(wav)
    await call.wait_for_media(timeout=30, after=time.monotonic())
    await call.wait_for_silence_from_bot(gap=0.8, timeout=40)


async def test_an_english_caller_is_answered_in_english_and_gets_an_english_reception_number(
        tmp_path, whisper_dir, standin_tts_dir):
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake_llm:
        overrides = offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp_path / "records")
        overrides = [o for o in overrides if not o.startswith("stt.language")]
        bot = BotProcess([*overrides, "stt.language='auto'", "line.languages=['ko','en']",
                          f"server.public_host='{PUBLIC_HOST}'"],
                         env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None},
                         log_path=tmp_path / "bot.log")
        store = Store(f"sqlite:///{tmp_path / 'records' / 'calls.db'}")
        try:
            bot.wait_ready()
            fake_llm.reset()  # after the startup check's own request
            sid = new_sid("CA")
            params = voice_webhook_params(sid, account_sid=ACCOUNT_SID) | {"From": CALLER}
            resp = await post_voice_webhook(bot.base_url, f"https://{PUBLIC_HOST}/twilio/voice", params, AUTH_TOKEN)
            assert resp.status_code == 200, resp.text
            _, stream_params = parse_twiml_stream(resp.text)
            call = TwilioCallSimulator(bot.ws_url, call_sid=sid, custom_parameters=stream_params,
                                       account_sid=ACCOUNT_SID)
            async with call:
                await call.wait_for_media(timeout=20)
                await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
                fake_llm.script(model_turn("Sorry to hear that. Where is it?"))
                await say(call, REPORT)
                fake_llm.script(model_turn("Thank you.", location="Main Street 12"))
                await say(call, HELLO)
                t = time.monotonic()
                await call.send_dtmf("1")  # yes: file it
                await call.wait_for_media(timeout=30, after=t)
                await call.wait_for_silence_from_bot(gap=0.8, timeout=40)
                await call.stop()

            # The model was asked for English on both turns; the schema is the same.
            assert fake_llm.calls == 2
            for request in fake_llm.requests:
                system = " ".join(m["content"] for m in request["messages"] if m["role"] == "system")
                assert "The caller speaks English" in system
            said = [m["content"] for m in fake_llm.requests[0]["messages"] if m["role"] == "user"][-1]
            assert "report a problem" in said.lower()  # decoded in English from the first turn

            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                row = next((c for c in store.list_calls() if c["call_sid"] == sid), None)
                if row and row["ended_at"]:
                    break
                time.sleep(0.2)
            turns = [t for t in row["turns"] if t["route"] != "greeting"]
            print("english call:", [(t["route"], t["language"], t["language_p"], t["transcript"], t["reply"])
                                    for t in turns])
            assert [t["route"] for t in turns] == ["llm", "llm", "rule"], turns
            first = turns[0]
            assert first["language"] == "en" and first["language_p"] >= 0.8, first  # switched on turn 1
            assert all(t["language"] == "en" for t in turns)
            assert turns[1]["reply"].endswith("A street light complaint at Main Street 12. Shall I file it?")
            (ticket,) = store.list_tickets()
            number = ticket["reception_no"]
            assert ticket["language"] == "en" and ticket["location"] == "Main Street 12"
            assert turns[2]["reply"].startswith(f"Your complaint is filed. Your reception number is {read_digits_en(number)}.")
            assert "switched to en" not in bot.log()  # the log says it the pipeline's way
            assert "call language -> en" in bot.log()
        finally:
            bot.stop()
            store.close()
