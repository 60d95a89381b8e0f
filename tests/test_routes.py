"""Every route the server registers, and who may call it: a new route cannot be added open by accident.

Two listeners: the public one (Twilio reaches it, and so can anyone) and the operations one
(``server.admin_host:admin_port``, inside the cluster). Each route of each is listed here with its
guard; the test fails on a route missing from the list, and checks each guard from the outside.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.websockets import WebSocketDisconnect

from bot.config import Secrets, load_config
from bot.server import create_app
from bot.testing.twilio_sim import new_sid, sign_twilio_request, voice_webhook_params

TWILIO = "twilio signature"
STREAM = "one-time stream token"
QA = "QA token"
RECORDS = "records token"
PUBLIC = "public, no citizen's data"
OPERATIONS = "operations listener only"

PUBLIC_ROUTES = {
    ("POST", "/twilio/voice"): TWILIO,
    ("POST", "/twilio/whisper"): TWILIO,  # what the desk hears first on a warm transfer
    ("POST", "/twilio/callback/answer"): TWILIO,  # a placed callback answered (bot/callbacks.py)
    ("POST", "/twilio/callback/amd"): TWILIO,  # its answering-machine detection
    ("POST", "/twilio/callback/status"): TWILIO,  # its end: done, or tried again
    ("WS", "/twilio/media"): STREAM,
    ("GET", "/"): PUBLIC,  # the QA page's HTML
    ("MOUNT", "/qa/static"): PUBLIC,  # its script and styles
    ("POST", "/api/offer"): QA,
    ("PATCH", "/api/offer"): QA,
    ("GET", "/healthz"): PUBLIC,  # ok / draining, nothing else
    ("GET", "/api/turns"): RECORDS,
}
OPERATIONS_ROUTES = {
    ("GET", "/healthz"): OPERATIONS,
    ("GET", "/readyz"): OPERATIONS,
    ("GET", "/metrics"): OPERATIONS,
    ("GET", "/api/loop_lag"): OPERATIONS,
}
AUTH = "route-test-twilio-token"


def _app(records_token: str | None = "records-secret", qa_token: str | None = "qa-secret"):
    db = Path(tempfile.mkdtemp(prefix="routes-")) / "calls.db"
    config = load_config(overrides=["server.public_host='voice.example.org'", f"records.url='sqlite:///{db}'"])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    secrets = Secrets("AC" + "0" * 32, AUTH, "EMPTY", qa_access_token=qa_token, records_api_token=records_token)
    return create_app(config, secrets, models)


def _inventory(app) -> set[tuple[str, str]]:
    found = set()
    for route in app.routes:
        if isinstance(route, Mount):
            found.add(("MOUNT", route.path))
        elif isinstance(route, WebSocketRoute):
            found.add(("WS", route.path))
        elif isinstance(route, Route):
            found |= {(m, route.path) for m in route.methods or () if m != "HEAD"}
    return found


def test_every_route_of_both_listeners_is_in_the_inventory_with_its_guard():
    app = _app()
    assert _inventory(app) == set(PUBLIC_ROUTES), "a route was added or removed: give it a guard here"
    assert _inventory(app.state.admin_app) == set(OPERATIONS_ROUTES)


def test_nothing_operational_or_personal_answers_anonymously_on_the_public_listener():
    with TestClient(_app()) as client:
        for path in ("/metrics", "/readyz", "/api/loop_lag", "/docs", "/openapi.json"):
            assert client.get(path).status_code == 404, path
        health = client.get("/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "records-secret"}])
def test_turn_records_need_the_records_token(headers):
    with TestClient(_app()) as client:
        resp = client.get("/api/turns", headers=headers)
        assert resp.status_code == 401 and resp.headers["WWW-Authenticate"] == "Bearer"
        assert "turns" not in resp.text
        ok = client.get("/api/turns", headers={"Authorization": "Bearer records-secret"})
        assert ok.status_code == 200 and ok.json()["turns"] == []


def test_without_a_records_token_configured_the_records_route_is_off_not_open():
    with TestClient(_app(records_token=None)) as client:
        assert client.get("/api/turns").status_code == 404
        assert client.get("/api/turns", headers={"Authorization": "Bearer "}).status_code == 404


def test_the_twilio_and_qa_routes_refuse_anonymous_callers():
    with TestClient(_app()) as client:
        params = voice_webhook_params(new_sid("CA"))
        assert client.post("/twilio/voice", data=params).status_code == 403
        signed = sign_twilio_request("https://voice.example.org/twilio/voice", params, AUTH)
        assert client.post("/twilio/voice", data=params, headers={"X-Twilio-Signature": signed}).status_code == 200
        whisper = {"AccountSid": "AC" + "0" * 32, "CallSid": new_sid("CA"), "ParentCallSid": new_sid("CA")}
        url = f"/twilio/whisper?call={whisper['ParentCallSid']}"
        assert client.post(url, data=whisper).status_code == 403
        signed = sign_twilio_request(f"https://voice.example.org{url}", whisper, AUTH)
        ok = client.post(url, data=whisper, headers={"X-Twilio-Signature": signed})
        assert ok.status_code == 200 and "<Say" in ok.text
        for route in ("answer", "amd", "status"):  # a placed callback's webhooks (bot/callbacks.py)
            url = f"/twilio/callback/{route}?id=1"
            assert client.post(url, data=whisper).status_code == 403
            signed = sign_twilio_request(f"https://voice.example.org{url}", whisper, AUTH)
            # Signed, but no callback was placed with this CallSid: still refused.
            assert client.post(url, data=whisper, headers={"X-Twilio-Signature": signed}).status_code == 404
        assert client.post("/api/offer", json={"sdp": "v=0", "type": "offer"}).status_code == 401
        assert client.patch("/api/offer", json={"pc_id": "x"}).status_code == 401
        with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/twilio/media") as ws:
            ws.send_json({"event": "start", "start": {"callSid": new_sid("CA"), "streamSid": new_sid("MZ"),
                                                      "customParameters": {}, "mediaFormat": {
                                                          "encoding": "audio/x-mulaw", "sampleRate": 8000,
                                                          "channels": 1}}, "streamSid": new_sid("MZ")})
            ws.receive_text()
        assert closed.value.code == 1008


def test_the_operations_listener_has_the_figures():
    app = _app()
    with TestClient(app), TestClient(app.state.admin_app) as admin:
        assert "voice_calls_rejected_total" in admin.get("/metrics").text
        assert {"active_calls", "rss_bytes", "worker"} <= set(admin.get("/healthz").json())
