"""End to end over real sockets: a simulated Twilio call against `python run_bot.py` in its own process.

Real Whisper base (from PyPI), real Silero VAD, the real structured LLM stage against a fake
vLLM server, a stand-in Supertonic model, and a fake Twilio REST API for the hang-up.
STT runs in English here: Whisper base cannot read espeak's Korean reliably, and these tests are
about the call path, not Korean recognition.

Held lower down: the model's goodbye ends the call once it is said (tests/stages/test_dialog_llm.py),
Twilio's hang-up request (tests/aftercall/test_after_call.py), a call hung up through Twilio's API at its end
(tests/call/test_faults.py: the idle caller), a warm transfer to the desk (tests/aftercall/test_after_call_phone.py).
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets

from bot.testing.call_steps import wait_for
from bot.testing.phone import PhoneLine, offline_bot_overrides, open_call, phone_bot
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

AUTH_TOKEN = "test-auth-token-0123456789"
ACCOUNT_SID = "AC" + "1" * 32
LINE = PhoneLine(AUTH_TOKEN, ACCOUNT_SID)
PUBLIC_HOST, PUBLIC_URL = LINE.public_host, LINE.webhook_url
HELLO = FIXTURES / "en_hello.wav"
DESK = "+8221200000"

LONG_REPLY = {
    "reply": "네, 안내해 드릴게요. 첫째, 대형 폐기물은 미리 신고하셔야 합니다. 둘째, 수수료를 내셔야 합니다. "
    "셋째, 정해진 날 아침에 내놓으시면 됩니다. 넷째, 문의는 구청으로 하시면 됩니다. 마지막 문장입니다.",
    "intent": "ask_info", "category": "waste", "location": None, "time": None, "flow": "continue",
}  # fmt: skip


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm, twilio_api):
    tmp = tmp_path_factory.mktemp("bot")
    with phone_bot(LINE, [
        *offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
        f"twilio.api_base_url='{twilio_api.base_url}'",
        f"call.transfer_number='{DESK}'",
        'line.hours=["24/7"]', "line.breaks=[]",  # the desk answers whenever this runs
    ], log_path=tmp / "bot.log") as proc:
        yield proc


async def wait_for_greeting(call: TwilioCallSimulator) -> None:
    await call.wait_for_media(timeout=15)
    await call.wait_for_silence_from_bot(gap=0.6, timeout=30)


async def test_signed_webhook_gets_twiml_and_unsigned_gets_403(bot):
    params = voice_webhook_params(new_sid("CA"), account_sid=ACCOUNT_SID)
    ok = await post_voice_webhook(bot.base_url, PUBLIC_URL, params, AUTH_TOKEN)
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("application/xml")
    url, stream_params = parse_twiml_stream(ok.text)
    assert url == f"wss://{PUBLIC_HOST}/twilio/media" and len(stream_params["token"]) >= 20
    unsigned = await post_voice_webhook(bot.base_url, PUBLIC_URL, params, None)
    assert unsigned.status_code == 403
    wrong_key = await post_voice_webhook(bot.base_url, PUBLIC_URL, params, "another-token")
    assert wrong_key.status_code == 403
    # Signed over a different URL than the one Twilio called: also refused.
    wrong_url = await post_voice_webhook(bot.base_url, "https://evil.example/twilio/voice", params, AUTH_TOKEN)
    assert wrong_url.status_code == 403


async def _refused(bot, **kwargs) -> int | None:
    call = TwilioCallSimulator(bot.ws_url, **kwargs)
    async with call:
        code = await call.wait_closed(timeout=10)
    assert not call.media_times, "a refused stream must not get audio"
    return code


async def test_stream_without_a_valid_token_is_refused(bot):
    assert await _refused(bot, call_sid=new_sid("CA"), custom_parameters={}) == 1008
    assert await _refused(bot, call_sid=new_sid("CA"), custom_parameters={"token": "forged"}) == 1008
    # A real token, presented by another call.
    resp = await post_voice_webhook(bot.base_url, PUBLIC_URL, voice_webhook_params(new_sid("CA"), account_sid=ACCOUNT_SID),
                                    AUTH_TOKEN)
    _, params = parse_twiml_stream(resp.text)
    assert await _refused(bot, call_sid=new_sid("CA"), custom_parameters=params) == 1008
    assert "token was issued for another call" in bot.log()


async def test_token_is_single_use_and_format_is_checked(bot):
    call_sid = new_sid("CA")
    resp = await post_voice_webhook(bot.base_url, PUBLIC_URL, voice_webhook_params(call_sid, account_sid=ACCOUNT_SID),
                                    AUTH_TOKEN)
    _, params = parse_twiml_stream(resp.text)
    wrong_format = {"encoding": "audio/x-mulaw", "sampleRate": 16000, "channels": 1}
    assert await _refused(bot, call_sid=call_sid, custom_parameters=params, media_format=wrong_format) == 1008
    # The token was used up by that attempt.
    assert await _refused(bot, call_sid=call_sid, custom_parameters=params) == 1008
    assert "unsupported mediaFormat sampleRate=16000" in bot.log()


async def test_malformed_first_message_is_refused_with_a_reason(bot):
    async with websockets.connect(bot.ws_url) as ws:
        await ws.send("this is not json")
        await ws.send("{]")
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd.code == 1008
    assert "malformed JSON message" in bot.log()


def _said(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def _whole(fake_llm) -> list[dict]:
    """The model calls made on a whole utterance (a speculative one on "hello?" alone is not)."""
    return [r for r in list(fake_llm.requests) if len(_said(r)[-1].split()) >= 3]


async def test_call_greets_answers_a_spoken_turn_and_stop_ends_it(bot, fake_llm):
    fake_llm.reset()
    started = time.time()
    call = await open_call(bot, LINE)
    async with call:
        await wait_for_greeting(call)
        assert bot.healthz()["active_calls"] == 1
        greeting_audio = call.media_audio()
        assert len(greeting_audio) > 8000  # > 0.5 s at 8 kHz, 16-bit
        for _ in range(2):
            await call.send_wav(HELLO)
            await call.wait_for_media(timeout=20, after=time.monotonic())
            await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
        # One answered model call per turn, and each utterance (two VAD segments: "hello," / "how are
        # you today") lands whole in its own turn: the tail of turn 1 must not leak into turn 2. Whether
        # "hello," alone was transcribed before the caller went on is the machine's speed: then a
        # speculative call started on it and was withdrawn (the turn record counts it as cancelled).
        whole = [_said(r) for r in _whole(fake_llm)]
        withdrawn = [_said(r) for r in fake_llm.requests if len(_said(r)[-1].split()) < 3]
        assert len(whole) == 2, [_said(r) for r in fake_llm.requests]
        turn1, turn2 = whole
        assert len(turn1) == 1 and "hello" in turn1[0].lower()
        assert turn2[0] == turn1[0] and len(turn2) == 2
        assert "hello" in turn2[1].lower() and len(turn2[1].split()) <= 6
        assert len(call.media_audio()) > len(greeting_audio) + 8000
        # The bot was silent when the caller spoke: no clear was sent.
        assert call.clears == []
        assert await call.stop() is True
    for _ in range(40):
        if bot.healthz()["active_calls"] == 0:
            break
        await asyncio.sleep(0.25)
    assert bot.healthz()["active_calls"] == 0

    def llm_turns() -> list[dict]:
        return [t for t in bot.turns(since=started - 1) if t["call_id"] == call.call_sid and t["route"] == "llm"]

    # The call's end is written after it leaves the count of active calls: its turns show once it is.
    turns = await wait_for(llm_turns, timeout=10, what="the call's turn records")
    assert len(turns) == 2 and all(t["llm_calls"] == 1 for t in turns), [(t["llm_calls"], t["transcript"]) for t in turns]
    assert all(w[-1].lower().startswith("hello") for w in withdrawn), withdrawn
    log = bot.log()
    assert "| voice_to_voice |" in log and "TTS providers" in log


async def test_talking_over_the_bot_clears_once_and_drops_the_unspoken_reply(bot, fake_llm):
    fake_llm.reset()
    fake_llm.script(LONG_REPLY, heard="how")  # the whole utterance's call, not a speculative one
    call = await open_call(bot, LINE)
    async with call:
        await wait_for_greeting(call)
        await call.send_wav(HELLO)
        started = await call.wait_for_media(timeout=20, after=time.monotonic())
        await asyncio.sleep(3.0)  # the first sentence has played; the rest is still playing
        await call.send_wav(HELLO)  # barge in
        _, clear = await call.wait_for_event("clear", timeout=10)
        clear_at = call.clears[0]
        await asyncio.sleep(1.0)
        # Within a frame or two of the clear the bot's audio stopped, until the barge-in's own answer (its
        # model call comes after STT; on a loaded machine the words themselves made the barge-in, and the
        # answer followed the clear within 0.8 s).
        answer_from = next((t for t in fake_llm.request_times if t > started), clear_at + 1.0)
        late = [t for t in call.audible_media_times if clear_at + 0.2 < t < min(clear_at + 1.0, answer_from)]
        assert late == [], f"bot kept talking {len(late)} frames after clear"
        # The barge-in is a turn of its own: wait for it to reach the model (STT's time is the machine's).
        await wait_for(lambda: len(_whole(fake_llm)) >= 2, timeout=60, what="the barge-in's model call")
        await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
        assert len(call.clears) == 1
        assert clear["streamSid"] == call.stream_sid
        assert len(_whole(fake_llm)) == 2
        assistant = [m["content"] for m in _whole(fake_llm)[1]["messages"] if m["role"] == "assistant"]
        spoken = " ".join(assistant)
        assert "네, 안내해 드릴게요." in spoken
        assert "마지막 문장입니다." not in spoken
        await call.stop()
    assert started > 0


async def test_health_and_metrics(bot):
    health = bot.healthz()
    assert health["status"] == "ok" and "active_calls" in health
    metrics = httpx.get(f"{bot.admin_url}/metrics", timeout=5).text
    assert "voice_active_calls" in metrics and "voice_event_loop_lag_ms" in metrics
    json.dumps(health)


async def test_concurrent_calls_are_independent_and_leave_nothing_behind(bot, fake_llm):
    fake_llm.reset()
    baseline = bot.healthz()["asyncio_tasks"]
    first, second = await open_call(bot, LINE), await open_call(bot, LINE)
    async with first, second:
        await asyncio.gather(wait_for_greeting(first), wait_for_greeting(second))
        assert bot.healthz()["active_calls"] == 2
        # The first caller hangs up while the second is mid-turn.
        speak = asyncio.create_task(second.send_wav(HELLO))
        assert await first.stop() is True
        await speak
        await second.wait_for_media(timeout=20, after=time.monotonic())
        await second.wait_for_silence_from_bot(gap=0.6, timeout=30)
        assert len(_whole(fake_llm)) == 1  # the second call's turn was answered
        assert second.clears == []
        await second.stop()
    for _ in range(40):
        health = bot.healthz()
        if health["active_calls"] == 0 and health["asyncio_tasks"] <= baseline:
            break
        await asyncio.sleep(0.25)
    assert health["active_calls"] == 0
    assert health["asyncio_tasks"] <= baseline, f"{health['asyncio_tasks'] - baseline} tasks leaked"
