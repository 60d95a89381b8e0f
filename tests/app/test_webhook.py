"""The Twilio webhook in process (no models needed): signature, busy, malformed requests."""

import tempfile
from pathlib import Path
from types import SimpleNamespace

from fastapi.testclient import TestClient

from bot.app.server import create_app
from bot.config import Secrets, load_config
from bot.testing.twilio_sim import parse_twiml_stream, sign_twilio_request, voice_webhook_params

TOKEN = "webhook-test-token"
URL = "https://voice.example.org/twilio/voice"


def _client(*overrides: str) -> TestClient:
    db = Path(tempfile.mkdtemp(prefix="webhook-")) / "calls.db"  # never the checkout's records/
    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=false",
                                    f"records.url='sqlite:///{db}'", *overrides])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    return TestClient(create_app(config, Secrets("AC" + "0" * 32, TOKEN, "EMPTY"), models))


def _post(client: TestClient, params: dict, signature: str | None):
    headers = {"X-Twilio-Signature": signature} if signature else {}
    return client.post("/twilio/voice", data=params, headers=headers)


def test_each_signed_webhook_gets_its_own_one_time_token():
    client = _client()
    tokens = set()
    for _ in range(3):
        params = voice_webhook_params()
        resp = _post(client, params, sign_twilio_request(URL, params, TOKEN))
        assert resp.status_code == 200
        tokens.add(parse_twiml_stream(resp.text)[1]["token"])
    assert len(tokens) == 3


def test_tampered_form_fields_break_the_signature():
    client = _client()
    params = voice_webhook_params()
    signature = sign_twilio_request(URL, params, TOKEN)
    assert _post(client, {**params, "From": "+821000000000"}, signature).status_code == 403


def test_no_free_call_slot_answers_busy():
    client = _client("server.max_calls=0")
    params = voice_webhook_params()
    resp = _post(client, params, sign_twilio_request(URL, params, TOKEN))
    # Spoken by Twilio in Korean (bot/data/replies.toml `busy`), then hung up.
    assert resp.status_code == 200 and '<Say language="ko-KR">' in resp.text and "<Hangup />" in resp.text


def test_signature_check_off_accepts_unsigned_webhooks_and_says_so():
    client = _client("twilio.validate_signature=false")
    resp = _post(client, voice_webhook_params(), None)
    assert resp.status_code == 200
    from bot.ops.hatches import escape_hatches

    hatches = escape_hatches(load_config(overrides=["twilio.validate_signature=false"]))
    assert any("signatures are NOT checked" in h for h in hatches)


def test_a_signed_webhook_without_callsid_is_a_bad_request():
    client = _client()
    params = {k: v for k, v in voice_webhook_params().items() if k != "CallSid"}
    assert _post(client, params, sign_twilio_request(URL, params, TOKEN)).status_code == 400
