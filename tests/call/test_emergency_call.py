"""An emergency on the phone, end to end: the lab server (the product's serve path with a fixed-delay STT
that hears the caller say "불이 났어요"), a simulated Twilio call, a fake vLLM and a fake Twilio REST API.

The bot names 119 within the turn, makes no model call, records and counts the escalation, and
(configured) hands the call to the emergency number with TwiML <Dial>. The recording notice plays once.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from bot.testing.phone import FAST_VOICE
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import (
    CallClosed,
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)
from tests.conftest import FIXTURES, offline_bot_overrides

pytestmark = pytest.mark.slow  # a real bot process over real sockets

AUTH_TOKEN = "test-auth-token-0123456789"
ACCOUNT_SID = "AC" + "1" * 32
PUBLIC_HOST = "voice.example.org"
FIRE_LINE = "+82311190000"  # the fire service's direct line, as a city would configure it
SAID = "여보세요 여기 불이 났어요 빨리 와 주세요"
NOTICE = "민원 처리를 위해 통화 내용이 녹음되고 기록됩니다."


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm, twilio_api):
    tmp = tmp_path_factory.mktemp("bot")
    proc = BotProcess(
        [
            *offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
            f"server.public_host='{PUBLIC_HOST}'",
            f"twilio.api_base_url='{twilio_api.base_url}'",
            f"call.emergency_transfer={{ fire = '{FIRE_LINE}' }}",
            f"call.recording_notice='{NOTICE}'",
            "recording.enabled=true", f"recording.dir='{tmp / 'recordings'}'",  # the notice must be true
            FAST_VOICE,
        ],
        env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT_SID},
        log_path=tmp / "bot.log",
        entry=("-m", "bot.testing.lab_server", "--stt-text", SAID, "--stt-delay-ms", "200"),
    )
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


async def test_a_fire_is_told_119_with_no_model_call_and_handed_to_the_fire_line(bot, fake_llm, twilio_api):
    fake_llm.reset()
    call_sid = new_sid("CA")
    resp = await post_voice_webhook(bot.base_url, f"https://{PUBLIC_HOST}/twilio/voice",
                                    voice_webhook_params(call_sid, account_sid=ACCOUNT_SID), AUTH_TOKEN)
    url, params = parse_twiml_stream(resp.text)
    call = TwilioCallSimulator(bot.ws_url, call_sid=call_sid, custom_parameters=params, account_sid=ACCOUNT_SID)
    async with call:
        await call.wait_for_media(timeout=15)
        await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
        try:
            await call.send_wav(FIXTURES / "en_hello.wav")
        except CallClosed:
            pass  # the clip's first words were enough: the call was handed over while it went on
        await call.wait_closed(timeout=30)
    assert fake_llm.calls == 0
    updates = [h for h in twilio_api.hangups if call_sid in h["path"]]
    assert len(updates) == 1, updates
    assert f"<Dial>{FIRE_LINE}</Dial>" in updates[0]["form"]["Twiml"]
    for _ in range(40):  # the server finishes the call just after the stream closes
        turns = [t for t in bot.turns() if t["call_id"] == call_sid]
        if turns:
            break
        await asyncio.sleep(0.25)
    # The AI notice, then the recording notice: once, right after the greeting, from canned audio (issue 47).
    assert turns[0]["route"] == "greeting" and turns[0]["heard"][:3] == ["greeting", "ai_notice", "recording_notice"]
    assert turns[0]["ai_notice"], turns[0]
    assert sum(h == "recording_notice" for t in turns for h in t["heard"]) == 1
    urgent = [t for t in turns if t["route"] == "emergency"]
    # One turn; two where a loaded machine ended the turn in the clip's pause (the caller's next
    # words then came before the answer played, and it came again in the next turn's).
    assert 1 <= len(urgent) <= 2 and all(t["escalation"] == "119" and t["llm_calls"] == 0 for t in urgent), turns
    assert any(h.startswith("emergency:fire") for t in urgent for h in t["heard"]), urgent
    assert "119" in urgent[0]["reply"]
    assert "EMERGENCY turn: answered with the number 119" in bot.log()
    assert re.search(r"startup heap frozen: [1-9]\d{4,} objects", bot.log())  # before the first call (bot/app/serve.py)
    metrics = httpx.get(f"{bot.admin_url}/metrics", timeout=5).text
    assert f'voice_escalations_total{{number="119"}} {float(len(urgent))}' in metrics
    # The start timed itself on the product's engines (the first start here: the baseline).
    timing = httpx.get(f"{bot.admin_url}/readyz", timeout=5).json()["self_timing"]
    assert timing["ok"] and timing["figures_ms"]["stt_ms"] > 0 and timing["last_good_ms"] is None
    assert "voice_startup_slow 0.0" in metrics and "startup self-timing:" in bot.log()
