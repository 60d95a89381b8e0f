"""Every route the server registers, and who may call it: a new route cannot be added open by accident.

Two listeners: the public one (Twilio reaches it, and so can anyone) and the operations one
(``server.admin_host:admin_port``, inside the cluster). Each route of each is listed here with its
guard; the test fails on a route missing from the list, and checks each guard from the outside.
The app is built with every optional part on (the desk with its key, the records API, the QA page),
and the walk goes into every router FastAPI included and every mount; a route of a kind it does not
know fails the test.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocketDisconnect

from bot.app.server import create_app
from bot.config import Secrets, load_config
from bot.testing.twilio_sim import new_sid, sign_twilio_request, voice_webhook_params

DESK_LOGIN = "desk login (session cookie; the API also a bearer token)"
DESK_OPEN = "desk login page and stylesheet"
DESK_ROUTES = {  # bot/desk/routes.py (desk.listener = "public", the default)
    ("GET", "/desk/login"): DESK_OPEN,
    ("POST", "/desk/login"): DESK_OPEN,  # CSRF token of the form, login limits
    ("GET", "/desk/static/desk.css"): DESK_OPEN,
    ("POST", "/desk/logout"): DESK_LOGIN,
    ("GET", "/desk"): DESK_LOGIN,
    ("GET", "/desk/"): DESK_LOGIN,
    ("GET", "/desk/tickets"): DESK_LOGIN,
    ("POST", "/desk/tickets"): DESK_LOGIN,
    ("GET", "/desk/tickets/{reception_no}"): DESK_LOGIN,
    ("POST", "/desk/tickets/{reception_no}/status"): DESK_LOGIN,
    ("GET", "/desk/calls"): DESK_LOGIN,
    ("GET", "/desk/calls/{call_sid}"): DESK_LOGIN,  # bot/desk/recordings.py: a call and its recording's player
    ("GET", "/desk/calls/{call_sid}/recording"): DESK_LOGIN,  # the audio (a department: its own tickets' calls)
    ("POST", "/desk/calls/{call_sid}/recording/download"): DESK_LOGIN,  # the file, with a reason and CSRF token
    ("GET", "/desk/audit"): DESK_LOGIN,  # the access audit's monthly review: admin only
    ("POST", "/desk/tickets/{reception_no}/hold"): DESK_LOGIN,  # legal hold: admin only
    ("GET", "/desk/health"): DESK_LOGIN,
    ("GET", "/desk/service"): DESK_LOGIN,  # bot/desk/service.py: how the line serves, per day (counts only)
    ("GET", "/desk/api/service.csv"): DESK_LOGIN,  # the same as CSV (a session or a bearer token)
    ("GET", "/desk/staff"): DESK_LOGIN,
    ("POST", "/desk/staff"): DESK_LOGIN,
    ("POST", "/desk/staff/{username}/active"): DESK_LOGIN,
    ("GET", "/desk/api/tickets"): DESK_LOGIN,
    ("GET", "/desk/api/tickets/{reception_no}"): DESK_LOGIN,
}
DESK_KEY = "route-test-desk-key-" + "k" * 32
TWILIO = "twilio signature"
STREAM = "one-time stream token"
QA = "QA token"
RECORDS = "records token"
PUBLIC = "public, no citizen's data"
OPERATIONS = "operations listener only"

PUBLIC_ROUTES = {
    ("POST", "/twilio/voice"): TWILIO,
    ("POST", "/twilio/whisper"): TWILIO,  # what the desk hears first on a warm transfer
    ("POST", "/twilio/stream-ended"): TWILIO,  # a <Connect>'s action (issue 46): also our signature in its URL
    ("POST", "/twilio/callback/answer"): TWILIO,  # a placed callback answered (bot/aftercall/callbacks.py)
    ("POST", "/twilio/callback/amd"): TWILIO,  # its answering-machine detection
    ("POST", "/twilio/callback/status"): TWILIO,  # its end: done, or tried again
    ("WS", "/twilio/media"): STREAM,
    ("GET", "/"): PUBLIC,  # the QA page's HTML
    ("MOUNT", "/qa/static"): PUBLIC,  # its script and styles
    ("POST", "/api/offer"): QA,
    ("PATCH", "/api/offer"): QA,
    ("GET", "/healthz"): PUBLIC,  # ok / draining, nothing else
    ("GET", "/api/turns"): RECORDS,
    **DESK_ROUTES,
}
OPERATIONS_ROUTES = {
    ("GET", "/healthz"): OPERATIONS,
    ("GET", "/readyz"): OPERATIONS,
    ("GET", "/metrics"): OPERATIONS,
    ("GET", "/api/loop_lag"): OPERATIONS,
}
AUTH = "route-test-twilio-token"


def _app(records_token: str | None = "records-secret", qa_token: str | None = "qa-secret",
         desk_key: str | None = DESK_KEY, overrides: tuple[str, ...] = (), db: Path | None = None):
    db = db or Path(tempfile.mkdtemp(prefix="routes-")) / "calls.db"
    config = load_config(overrides=["server.public_host='voice.example.org'", f"records.url='sqlite:///{db}'",
                                    *overrides])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    secrets = Secrets("AC" + "0" * 32, AUTH, "EMPTY", qa_access_token=qa_token, records_api_token=records_token,
                      desk_secret_key=desk_key)
    return create_app(config, secrets, models)


class UnknownRoute(AssertionError):
    """A route of a kind the inventory cannot classify: teach ``inventory`` about it and give it a guard."""


def inventory(routes: list[BaseRoute], prefix: str = "") -> set[tuple[str, str]]:
    """(method, path) of every route, into FastAPI's included routers and Starlette's mounted routers."""
    found: set[tuple[str, str]] = set()
    for route in routes:
        if hasattr(route, "original_router") and hasattr(route, "include_context"):  # FastAPI's include_router
            found |= inventory(route.original_router.routes, prefix + route.include_context.prefix)
        elif isinstance(route, Mount) and isinstance(route.app, StaticFiles):
            found.add(("MOUNT", prefix + route.path))
        elif isinstance(route, Mount) and getattr(route.app, "routes", None) is not None:
            found |= inventory(route.app.routes, prefix + route.path)
        elif isinstance(route, WebSocketRoute) or type(route).__name__ == "APIWebSocketRoute":
            found.add(("WS", prefix + route.path))
        elif isinstance(route, Route):  # APIRoute is one
            if not route.methods:
                raise UnknownRoute(f"{prefix}{route.path}: a route without methods")
            found |= {(m, prefix + route.path) for m in route.methods if m != "HEAD"}
        else:
            raise UnknownRoute(f"{type(route).__name__} at {prefix}{getattr(route, 'path', '?')}")
    return found


def test_every_route_of_both_listeners_is_in_the_inventory_with_its_guard():
    app = _app()
    assert inventory(app.routes) == set(PUBLIC_ROUTES), "a route was added or removed: give it a guard here"
    assert inventory(app.state.admin_app.routes) == set(OPERATIONS_ROUTES)


def test_the_desk_on_the_operations_listener_moves_its_routes_there():
    app = _app(overrides=("desk.listener='operations'",))
    assert inventory(app.routes) == set(PUBLIC_ROUTES) - set(DESK_ROUTES)
    assert inventory(app.state.admin_app.routes) == set(OPERATIONS_ROUTES) | set(DESK_ROUTES)


def test_the_inventory_finds_a_route_added_through_an_included_router_and_fails_on_an_unknown_kind():
    from fastapi import APIRouter

    app = _app()
    extra = APIRouter(prefix="/extra")

    @extra.get("/open")
    def open_route():
        return {}

    nested = APIRouter()
    nested.include_router(extra, prefix="/v1")
    app.include_router(nested)
    assert ("GET", "/v1/extra/open") in inventory(app.routes) - set(PUBLIC_ROUTES)

    class Odd(BaseRoute):
        path = "/odd"

    with pytest.raises(UnknownRoute, match="Odd at /odd"):
        inventory([*app.routes, Odd()])


def test_every_desk_route_but_the_login_page_and_stylesheet_refuses_anonymous_callers():
    with TestClient(_app(), follow_redirects=False) as client:
        for (method, path), guard in DESK_ROUTES.items():
            url = path.format(reception_no="20260001", username="kim", call_sid="CA" + "0" * 32)
            resp = client.request(method, url)
            if guard == DESK_OPEN:
                assert resp.status_code in (200, 403), (method, url)  # the login post: 403 without its CSRF token
            elif "/api/" in url:
                assert resp.status_code == 401, (method, url)
            else:
                assert resp.status_code == 303 and resp.headers["location"] == "/desk/login", (method, url)


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


def test_turn_records_come_masked_and_a_bad_since_is_a_400_with_the_reason(tmp_path):
    """Seen before: /api/turns gave 010-1234-5678 in full (the desk masks it), and since in milliseconds
    was a 500 (ValueError: year 33658 is out of range)."""
    from bot.store.db import Store

    db = tmp_path / "calls.db"
    app = _app(db=db)
    store = Store(f"sqlite:///{db}")
    sid = "CA" + "b" * 32
    store.start_call(sid, caller="+821012345678", worker="w1", qa=False, started_at=dt.datetime.now(dt.UTC))
    said = "연락처 010-1234-5678, 집은 (02)123-4567, 공일공 일이삼사 오육칠팔이에요 주민번호 900101-1234567"
    store.save_turn(sid, {"call_id": sid, "index": 1, "route": "llm", "transcript": said, "reply": "+82 10-2222-3333 맞으신가요?",
                          "slots": {"location": "중앙로 12 010-9999-8888", "category": "street_lights"},
                          "turn_end": time.time()})
    store.end_call(sid, reason="caller_hangup", ended_at=dt.datetime.now(dt.UTC))
    store.close()
    auth = {"Authorization": "Bearer records-secret"}
    with TestClient(app) as client:
        resp = client.get("/api/turns", headers=auth)
        assert resp.status_code == 200
        (turn,) = resp.json()["turns"]
        text = resp.text
        for number in ("1234-5678", "123-4567", "일이삼사 오육칠팔", "1234567", "2222-3333", "9999-8888"):
            assert number not in text, number
        assert turn["call_id"] == sid and turn["slots"]["category"] == "street_lights"  # the bench's keys stay
        assert "010-****-**78" in turn["transcript"] and "900101-1******" in turn["transcript"]
        for since, why in ((time.time() * 1000, "milliseconds"), (-1, "seconds since the epoch"),
                           ("nan", "seconds since the epoch"), ("inf", "seconds since the epoch"),
                           (1e300, "milliseconds")):
            bad = client.get("/api/turns", params={"since": since}, headers=auth)
            assert bad.status_code == 400 and why in bad.json()["error"], (since, bad.text)
        assert client.get("/api/turns", params={"since": time.time() - 60}, headers=auth).json()["turns"]


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
        url = "/twilio/stream-ended?seg=0&sig=x"  # a stream's end (issue 46): Twilio's signature, then ours
        assert client.post(url, data=whisper).status_code == 403
        signed = sign_twilio_request(f"https://voice.example.org{url}", whisper, AUTH)
        assert client.post(url, data=whisper, headers={"X-Twilio-Signature": signed}).status_code == 403
        for route in ("answer", "amd", "status"):  # a placed callback's webhooks (bot/aftercall/callbacks.py)
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


def test_the_operations_listener_is_kept_to_the_pod_network_and_the_monitoring_namespace():
    """Seen before: config.gpu.toml and deploy/bot.yaml bound the operations listener (no login; /readyz
    names the LLM URL) to 0.0.0.0 with no NetworkPolicy: anyone in the cluster could read it."""
    import yaml

    from bot.app.serve import trusted_proxies
    from tests.conftest import ROOT

    assert load_config(ROOT / "config.gpu.toml").server.admin_host == "127.0.0.1"
    docs = {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all((ROOT / "deploy/bot.yaml").read_text())}
    pod = docs["Deployment/voice-bot"]["spec"]["template"]["spec"]
    (bot,) = pod["containers"]
    sets = dict(a.split("=", 1) for a in bot["args"] if "=" in a)
    assert sets["server.admin_host"] == "'$(POD_IP)'"
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in bot["env"]
    ports = {p["name"]: p["containerPort"] for p in bot["ports"]}
    assert ports["ops"] == int(sets["server.admin_port"]) and ports["http"] == int(sets["server.port"])
    overrides = [f"{k}={v}" for k, v in sets.items() if k == "server.forwarded_allow_ips"]
    assert trusted_proxies(load_config(overrides=overrides)) != ["127.0.0.1", "::1"]  # the ingress pods, checked
    policy = docs["NetworkPolicy/voice-bot"]["spec"]
    assert policy["podSelector"]["matchLabels"] == pod.get("labels", {}) or policy["podSelector"]["matchLabels"] == \
        docs["Deployment/voice-bot"]["spec"]["template"]["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    rules = {tuple(p["port"] for p in rule["ports"]): rule.get("from") for rule in policy["ingress"]}
    assert set(rules) == {("http",), ("ops",)}
    assert rules[("ops",)] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    # No Service or Ingress other than the operations Service points at the ops port.
    for name, doc in docs.items():
        if doc["kind"] == "Ingress":
            assert "ops" not in str(doc["spec"]), name
        if doc["kind"] == "Service" and name != "Service/voice-bot-ops":
            assert all(p["targetPort"] != "ops" for p in doc["spec"]["ports"]), name
