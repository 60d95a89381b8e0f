"""The line's capacity under abuse, in process: every way into a call takes one of the same slots.

The server is the product's app (``create_app``) with the QA page on; Pipecat's SmallWebRTC
signalling and aiortc answer real SDP offers (made by an aiortc peer that never connects, as an
attacker's would). Only each QA call's pipeline is a stub (transport in, transport out): what is
tested is who gets a slot, not what the bot says.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker

from bot.app.server import create_app
from bot.call.request import CallRequest
from bot.config import Secrets, load_config
from bot.testing.twilio_sim import new_sid, sign_twilio_request, voice_webhook_params
from bot.tools.abuse import qa_offer_sdp

AUTH = "capacity-test-token"
QA_TOKEN = "qa-capacity-token"
URL = "https://voice.example.org/twilio/voice"
BEARER = {"Authorization": f"Bearer {QA_TOKEN}"}  # what the page sends
QA = {"X-QA-Token": QA_TOKEN}  # what scripts send (and what the page sent before)


@pytest.fixture(scope="module")
def sdp() -> str:
    return asyncio.run(qa_offer_sdp())


@pytest.fixture
def stub_calls(monkeypatch):
    """The app's ``call_builder`` (a spy): QA calls run a pipeline of the WebRTC transport alone (no models)."""
    built: list[str] = []
    requests: list[CallRequest] = []

    def build_call(request: CallRequest):
        built.append(request.call_id)
        requests.append(request)
        worker = PipelineWorker(Pipeline([request.transport.input(), request.transport.output()]))
        recorder = SimpleNamespace(close=lambda: None, records=[], call_id=request.call_id)
        return SimpleNamespace(worker=worker, recorder=recorder, end_reason=None,
                               dialog=SimpleNamespace(transfer_requested=False, transfer_to=None, ended=False))

    monkeypatch.setattr(sys.modules[__name__], "CALL_BUILDER", build_call)
    monkeypatch.setattr(sys.modules[__name__], "BUILT", requests)
    return built


CALL_BUILDER = None  # the spy of ``stub_calls``, given to ``create_app`` as every call's builder
BUILT: list[CallRequest] = []


def _app(*overrides: str):
    db = Path(tempfile.mkdtemp(prefix="capacity-")) / "calls.db"
    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=true",
                                    f"records.url='sqlite:///{db}'", *overrides])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    return create_app(config, Secrets("AC" + "0" * 32, AUTH, "EMPTY", qa_access_token=QA_TOKEN), models,
                      call_builder=CALL_BUILDER)


def _dial(client: TestClient) -> str:
    params = voice_webhook_params(new_sid("CA"))
    resp = client.post("/twilio/voice", data=params, headers={"X-Twilio-Signature": sign_twilio_request(URL, params,
                                                                                                        AUTH)})
    return "stream" if "<Stream" in resp.text else "busy" if "<Say" in resp.text else f"HTTP {resp.status_code}"


def _wait(get, ok, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_offers_with_invented_pc_ids_are_new_calls_within_the_qa_cap_and_leave_the_phone_its_line(sdp, stub_calls):
    # Seen before: 10 offers with pc_id "bogus-i" all answered, 10 calls against a limit of 8, the phone busy.
    app = _app("server.max_calls=3", "server.qa_max_calls=2", "server.qa_connect_timeout_secs=30")
    with TestClient(app) as client, TestClient(app.state.admin_app) as admin:
        codes = [client.post("/api/offer", json={"sdp": sdp, "type": "offer", "pc_id": f"bogus-{i}"},
                             headers=QA).status_code for i in range(10)]
        assert sorted(codes) == [200] * 2 + [503] * 8
        health = admin.get("/healthz").json()
        assert health["active_calls"] == 2 and len(stub_calls) == 2
        # The QA page's cap is below the line's: a citizen still gets the third slot, the next one is busy.
        assert [_dial(client), _dial(client)] == ["stream", "busy"]
        # ... and the phone's reservation counts against the QA page too.
        assert client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA).status_code == 503
        metrics = admin.get("/metrics").text
        assert 'voice_calls_rejected_total{reason="qa:qa_max_calls"} 8.0' in metrics


def test_a_qa_offer_is_built_by_the_apps_call_builder_as_a_browser_call(sdp, stub_calls):
    # Seen before: QA calls called build_call themselves, past the app's call_builder (the bench's stock
    # baseline and the test lab's faults never reached the QA page).
    app = _app("server.qa_connect_timeout_secs=30")
    with TestClient(app) as client, TestClient(app.state.admin_app) as admin:
        assert client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA).status_code == 200
        assert _wait(lambda: len(BUILT), lambda n: n == 1, timeout=5) == 1
        request = BUILT[0]
        assert request.qa and (request.in_rate, request.out_rate) == (16000, 24000)
        assert type(request.transport).__name__ == "SmallWebRTCTransport" and len(request.observers) == 1
        assert request.records is not None and request.resume is None
        assert admin.get("/healthz").json()["active_calls"] == 1


def test_the_qa_cap_never_reaches_max_calls(sdp, stub_calls):
    app = _app("server.max_calls=2", "server.qa_max_calls=5", "server.qa_connect_timeout_secs=30")
    with TestClient(app) as client:
        codes = [client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA).status_code
                 for _ in range(3)]
        assert sorted(codes) == [200, 503, 503]
        assert _dial(client) == "stream"


def test_an_offer_that_never_connects_frees_its_slot_after_the_configured_timeout(sdp, stub_calls):
    # Seen before: the slots stayed taken about 60 s (Pipecat's own connection timeout). The timeout leaves
    # room for the two offers on a loaded machine (at 1 s, two offers beside stress-ng took longer than it).
    app = _app("server.max_calls=3", "server.qa_max_calls=2", "server.qa_connect_timeout_secs=5.0")
    with TestClient(app) as client, TestClient(app.state.admin_app) as admin:
        t0 = time.monotonic()
        assert client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA).status_code == 200
        assert client.post("/api/offer", json={"sdp": sdp, "type": "offer", "pc_id": "bogus"},
                           headers=QA).status_code == 200
        assert admin.get("/healthz").json()["active_calls"] == 2
        health = _wait(lambda: admin.get("/healthz").json(), lambda h: h["active_calls"] == 0, timeout=25)
        assert health["active_calls"] == 0 and health["reserved_calls"] == 0, health
        assert 5.0 <= time.monotonic() - t0 < 25  # after the configured timeout, well before Pipecat's 60 s
        # The slots are free again.
        assert client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA).status_code == 200


def test_a_renegotiation_keeps_its_calls_slot_and_a_restart_is_refused(sdp, stub_calls):
    app = _app("server.max_calls=2", "server.qa_max_calls=1", "server.qa_connect_timeout_secs=30")
    with TestClient(app) as client, TestClient(app.state.admin_app) as admin:
        first = client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA)
        assert first.status_code == 200
        pc_id = first.json()["pc_id"]
        again = client.post("/api/offer", json={"sdp": sdp, "type": "offer", "pc_id": pc_id}, headers=QA)
        assert again.status_code == 200 and again.json()["pc_id"] == pc_id
        assert admin.get("/healthz").json()["active_calls"] == 1 and len(stub_calls) == 1
        restart = client.post("/api/offer", json={"sdp": sdp, "type": "offer", "pc_id": pc_id, "restart_pc": True},
                              headers=QA)
        assert restart.status_code == 400
        # A new call is still refused: the QA cap is 1, and the renegotiated call holds it.
        assert client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA).status_code == 503


def test_qa_offers_during_the_drain_are_refused(sdp, stub_calls):
    app = _app("server.qa_connect_timeout_secs=30")
    with TestClient(app) as client:
        asyncio.run(app.state.drain())  # no calls: the gate is draining at once
        resp = client.post("/api/offer", json={"sdp": sdp, "type": "offer"}, headers=QA)
        assert resp.status_code == 503 and resp.json()["reason"] == "draining"


# --------------------------------------------------------------------------------- the QA page itself


def test_the_qa_page_has_the_desks_security_headers_and_no_token_in_its_url(sdp, stub_calls):
    # Seen before: no CSP or X-Frame-Options, and the token in ?token= (browser history, proxy logs).
    from bot.desk.headers import CSP

    with TestClient(_app("server.qa_connect_timeout_secs=30")) as client:
        for path in ("/", "/qa/static/qa.js", "/qa/static/qa.css"):
            resp = client.get(path)
            assert resp.status_code == 200, path
            h = resp.headers
            assert h["content-security-policy"].startswith(CSP), path  # the desk's policy, and more
            assert "frame-ancestors 'none'" in h["content-security-policy"]
            assert h["x-frame-options"] == "DENY" and h["referrer-policy"] == "no-referrer", path
            assert h["x-content-type-options"] == "nosniff", path
        page = client.get("/").text
        assert 'id="token"' in page and 'type="password"' in page
        js = client.get("/qa/static/qa.js").text
        assert "location.search" not in js and "Authorization" in js
        # An old bookmark with the token: sent back to the bare page.
        old = client.get(f"/?token={QA_TOKEN}", follow_redirects=False)
        assert old.status_code == 303 and old.headers["location"] == "/"
        # The token in the URL opens nothing; in a header it does.
        body = {"sdp": sdp, "type": "offer"}
        assert client.post(f"/api/offer?token={QA_TOKEN}", json=body).status_code == 401
        assert client.post("/api/offer", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.post("/api/offer", json=body, headers=BEARER).status_code == 200
        assert client.post("/api/offer", json=body, headers={"X-QA-Token": QA_TOKEN}).status_code == 200
