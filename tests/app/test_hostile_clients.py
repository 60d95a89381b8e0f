"""Hostile and broken clients, in process: the media-stream serializer and the webhook.

The same faults through real sockets against a real bot process are rows of the fault suite
(tests/call/test_faults.py: "hostile client", "webhook abuse", "slow loris"); these tests pin down each
kind of bad input quickly.
"""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from loguru import logger
from pipecat.frames.frames import InputAudioRawFrame, StartFrame

from bot.app.server import create_app
from bot.config import Secrets, load_config
from bot.line.callgate import WEBHOOK_MAX_BYTES
from bot.testing.twilio_sim import new_sid, sign_twilio_request, voice_webhook_params
from bot.tools.faults import HOSTILE_KINDS, hostile_messages
from bot.transports.twilio import MAX_MESSAGE_CHARS, PhoneSerializer

TOKEN = "hostile-test-token"
URL = "https://voice.example.org/twilio/voice"
SILENCE = base64.b64encode(b"\xff" * 160).decode()


@pytest.fixture
def warnings():
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    yield lines
    logger.remove(sink)


async def _serializer() -> PhoneSerializer:
    ser = PhoneSerializer("MZ" + "1" * 32, call_sid="CA" + "2" * 32,
                          params=PhoneSerializer.InputParams(auto_hang_up=False))
    await ser.setup(StartFrame(audio_in_sample_rate=16000, audio_out_sample_rate=8000))
    return ser


def _media(ser: PhoneSerializer, seq: int, payload: str = SILENCE, **extra) -> str:
    return json.dumps({"event": "media", "sequenceNumber": str(seq), "streamSid": ser._stream_sid,
                       "media": {"track": "inbound", "chunk": str(seq), "timestamp": "0", "payload": payload}, **extra})


async def test_a_hundred_malformed_messages_are_ignored_counted_and_logged_once_per_kind(warnings):
    ser = await _serializer()
    assert isinstance(await ser.deserialize(_media(ser, 5)), InputAudioRawFrame)
    fake_call = SimpleNamespace(stream_sid=ser._stream_sid, call_sid=ser._call_sid)
    bad = hostile_messages(fake_call)
    for i in range(100):
        assert await ser.deserialize(bad[i % len(bad)]) is None
    assert set(ser.ignored) == set(HOSTILE_KINDS) and sum(ser.ignored.values()) == 100
    logged = [w for w in warnings if "on the media stream" in w]
    assert len(logged) == len(HOSTILE_KINDS)
    # The call's audio still flows after the flood.
    assert isinstance(await ser.deserialize(_media(ser, 6)), InputAudioRawFrame)


@pytest.mark.parametrize("message, kind", [
    ("x" * (MAX_MESSAGE_CHARS + 1), "oversized message"),
    ('"just a string"', "JSON that is not an object"),
    (json.dumps({"event": "media", "sequenceNumber": "seven", "media": {"payload": SILENCE}}), "bad sequenceNumber"),
    (json.dumps({"event": "media", "sequenceNumber": "9", "media": "nope"}), "media without a payload"),
    (json.dumps({"event": "media", "sequenceNumber": "9", "streamSid": "MZother", "media": {"payload": SILENCE}}),
     "media for another streamSid"),
    (json.dumps({"event": "dtmf", "dtmf": "5"}), "bad dtmf"),
    (json.dumps({"event": 42}), "unknown event"),
])
async def test_each_kind_of_bad_message_is_dropped_without_raising(message, kind):
    ser = await _serializer()
    assert await ser.deserialize(message) is None
    assert dict(ser.ignored) == {kind: 1}


async def test_valid_messages_still_work():
    ser = await _serializer()
    assert await ser.deserialize(json.dumps({"event": "mark", "mark": {"name": "x"}})) is None
    assert await ser.deserialize(json.dumps({"event": "connected"})) is None
    frame = await ser.deserialize(json.dumps({"event": "dtmf", "dtmf": {"digit": "5"}}))
    assert frame is not None and str(frame.button.value) == "5"
    assert not ser.ignored


# --------------------------------------------------------------------------------- the webhook


def _app(*overrides: str):
    db = Path(tempfile.mkdtemp(prefix="hostile-")) / "calls.db"
    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=false",
                                    f"records.url='sqlite:///{db}'", *overrides])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    return create_app(config, Secrets("AC" + "0" * 32, TOKEN, "EMPTY"), models)


def _signed(client: TestClient, params: dict, url: str = URL):
    return client.post("/twilio/voice", data=params, headers={"X-Twilio-Signature": sign_twilio_request(url, params,
                                                                                                        TOKEN)})


def test_webhook_abuse_is_refused_and_reserves_nothing():
    app = _app()
    with TestClient(app) as client, TestClient(app.state.admin_app) as admin:
        params = voice_webhook_params(new_sid("CA"))
        assert _signed(client, params).status_code == 200
        assert _signed(client, params).status_code == 403  # the same signed request again
        assert _signed(client, voice_webhook_params(new_sid("CA")), "https://evil.example/twilio/voice").status_code == 403
        no_sid = {k: v for k, v in voice_webhook_params().items() if k != "CallSid"}
        assert _signed(client, no_sid).status_code == 400
        huge = {**voice_webhook_params(new_sid("CA")), "Junk": "x" * (WEBHOOK_MAX_BYTES + 1)}
        assert _signed(client, huge).status_code == 400
        # The same without a Content-Length (chunked): the cap holds while reading.
        body = "&".join(f"{k}={v}" for k, v in huge.items()).encode()
        resp = client.post("/twilio/voice", content=iter([body[i:i + 4096] for i in range(0, len(body), 4096)]),
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert resp.status_code == 400
        health = admin.get("/healthz").json()
        assert health["reserved_calls"] == 1 and health["active_calls"] == 0  # only the genuine one
        metrics = admin.get("/metrics").text
        assert 'voice_calls_rejected_total{reason="replayed"} 1.0' in metrics
        assert 'voice_calls_rejected_total{reason="bad_request"} 3.0' in metrics


def test_webhooks_answered_but_not_yet_streaming_hold_their_call_slots():
    app = _app("server.max_calls=2")
    with TestClient(app) as client, TestClient(app.state.admin_app) as admin:
        answers = [_signed(client, voice_webhook_params(new_sid("CA"))).text for _ in range(4)]
        assert [("<Stream" in a, "<Say" in a and "<Hangup" in a) for a in answers] == [
            (True, False), (True, False), (False, True), (False, True)]
        assert 'voice_calls_rejected_total{reason="max_calls"} 2.0' in admin.get("/metrics").text


async def test_webhooks_arriving_at_the_same_moment_cannot_take_more_slots_than_max_calls():
    import asyncio

    import httpx

    app = _app("server.max_calls=2")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot") as client:
        async def dial() -> str:
            params = voice_webhook_params(new_sid("CA"))
            resp = await client.post("/twilio/voice", data=params,
                                     headers={"X-Twilio-Signature": sign_twilio_request(URL, params, TOKEN)})
            return "stream" if "<Stream" in resp.text else "busy" if "<Say" in resp.text else resp.text
        answers = await asyncio.gather(*(dial() for _ in range(6)))
    assert sorted(answers) == ["busy"] * 4 + ["stream"] * 2
