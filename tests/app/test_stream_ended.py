"""Issue 46 in process: every <Connect> carries a signed action, and the action route answers how the stream ended.

A call the bot ended hangs up (or goes where its hand-over asked); any other end resumes on a new
single-use stream token, ``call.max_resumes`` times; then the duty line in hours, or the hours and a
hang-up. A forged or replayed action request is refused.
"""

import datetime as dt
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from bot.app.server import create_app
from bot.config import Secrets, load_config
from bot.line.tokens import StreamTokens, load_key
from bot.store import segments
from bot.store.db import Store
from bot.testing.twilio_sim import (
    parse_twiml_stream,
    sign_twilio_request,
    stream_action_params,
    voice_webhook_params,
)

TOKEN = "action-test-token"
HOST = "voice.example.org"
KEY = "k" * 32


@pytest.fixture
def line(monkeypatch):
    """A signed-webhook app on its own records database, and that database."""
    monkeypatch.setenv("STREAM_TOKEN_KEY", KEY)

    def make(*overrides: str):
        db = Path(tempfile.mkdtemp(prefix="action-")) / "calls.db"
        config = load_config(overrides=[f"server.public_host='{HOST}'", "server.qa_page=false",
                                        f"records.url='sqlite:///{db}'", *overrides])
        models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                                 whisper=SimpleNamespace(device="cpu"))
        client = TestClient(create_app(config, Secrets("AC" + "0" * 32, TOKEN, "EMPTY"), models))
        return client, Store(f"sqlite:///{db}")

    return make


def _webhook(client: TestClient) -> tuple[str, str]:
    """A new call through the signed webhook: (CallSid, its <Connect>'s action URL)."""
    params = voice_webhook_params()
    resp = client.post("/twilio/voice", data=params,
                       headers={"X-Twilio-Signature": sign_twilio_request(f"https://{HOST}/twilio/voice", params,
                                                                         TOKEN)})
    assert resp.status_code == 200
    action = ET.fromstring(resp.text).find("./Connect").get("action")
    return params["CallSid"], action


def _ask(client: TestClient, action: str, call_sid: str, *, status: str = "in-progress", signed: bool = True):
    """Twilio's request to a <Connect>'s action: its form, signed over the whole URL (query included)."""
    params = stream_action_params(call_sid, call_status=status)
    parts = urlsplit(action)
    headers = {"X-Twilio-Signature": sign_twilio_request(action, params, TOKEN)} if signed else {}
    return client.post(f"{parts.path}?{parts.query}", data=params, headers=headers)


def _started(store: Store, call_sid: str, idx: int = 0) -> None:
    segments.open_segment(store, call_sid, idx, worker="w1", started_at=dt.datetime.now(dt.UTC))


def test_the_webhook_connect_carries_a_signed_action_for_the_calls_first_stream(line):
    client, _store = line()
    call_sid, action = _webhook(client)
    url = urlsplit(action)
    assert url.scheme == "https" and url.netloc == HOST and url.path == "/twilio/stream-ended"
    query = parse_qs(url.query)
    assert query["seg"] == ["0"]
    assert StreamTokens(60, load_key({"STREAM_TOKEN_KEY": KEY})[0]).action_is_signed(call_sid, 0, query["sig"][0])


def test_a_call_the_bot_ended_hangs_up_and_a_hand_over_goes_where_it_asked(line):
    client, store = line()
    call_sid, action = _webhook(client)
    _started(store, call_sid)
    segments.end_segment(store, call_sid, 0, reason="completed", bot_ended=True)
    resp = _ask(client, action, call_sid)
    assert resp.status_code == 200 and "<Hangup />" in resp.text and "<Stream" not in resp.text

    call_sid, action = _webhook(client)
    _started(store, call_sid)
    dial = '<?xml version="1.0" encoding="UTF-8"?><Response><Dial>+8221200000</Dial></Response>'
    segments.end_segment(store, call_sid, 0, reason="transfer", bot_ended=True, then_twiml=dial)
    resp = _ask(client, action, call_sid)
    assert resp.status_code == 200 and "<Dial>+8221200000</Dial>" in resp.text


def test_a_stream_that_died_resumes_on_a_new_single_use_token_with_its_own_action(line):
    client, store = line()
    call_sid, action = _webhook(client)
    first_token = None
    _started(store, call_sid)  # then the worker is killed: no end is ever written
    resp = _ask(client, action, call_sid)
    assert resp.status_code == 200
    url, params = parse_twiml_stream(resp.text)
    assert url == f"wss://{HOST}/twilio/media" and params["seg"] == "1" and params["token"] != first_token
    tokens = StreamTokens(60, load_key({"STREAM_TOKEN_KEY": KEY})[0])
    issued = tokens.verify(params["token"], call_sid)  # this call's, unexpired
    with store.engine.connect() as conn:  # recorded: single use at the stream, like the webhook's
        rows = conn.exec_driver_sql("SELECT call_sid FROM stream_tokens WHERE token_id = ?",
                                    (issued.token_id,)).all()
    assert rows == [(call_sid,)]
    next_action = ET.fromstring(resp.text).find("./Connect").get("action")
    assert parse_qs(urlsplit(next_action).query)["seg"] == ["1"]


def test_a_forged_or_replayed_action_request_is_refused(line):
    client, store = line()
    call_sid, action = _webhook(client)
    other_sid, _ = _webhook(client)
    _started(store, call_sid)
    assert _ask(client, action, call_sid, signed=False).status_code == 403  # not signed by Twilio
    assert _ask(client, action, other_sid).status_code == 403  # another call's action URL
    forged = action.replace("seg=0", "seg=1")
    assert _ask(client, forged, call_sid).status_code == 403  # a segment we never gave
    assert _ask(client, action, call_sid).status_code == 200
    assert _ask(client, action, call_sid).status_code == 403  # Twilio asks once per stream: a replay


def test_a_call_twilio_reports_over_is_hung_up_without_a_resume(line):
    client, store = line()
    call_sid, action = _webhook(client)
    _started(store, call_sid)
    resp = _ask(client, action, call_sid, status="completed")
    assert resp.status_code == 200 and "<Hangup />" in resp.text and "<Stream" not in resp.text


def _past_max_resumes(client: TestClient, store: Store, call_sid: str, action: str, first: int = 0) -> str:
    for idx in range(first, first + 2):  # call.max_resumes = 2: two streams die and resume
        _started(store, call_sid, idx)
        resp = _ask(client, action, call_sid)
        assert "<Stream" in resp.text
        action = ET.fromstring(resp.text).find("./Connect").get("action")
    _started(store, call_sid, first + 2)
    return _ask(client, action, call_sid).text


def test_beyond_max_resumes_the_duty_line_answers_in_hours(line):
    client, store = line("call.transfer_number='+8221200000'", "line.hours=['24/7']", "line.breaks=[]")
    call_sid, action = _webhook(client)
    twiml = _past_max_resumes(client, store, call_sid, action)
    assert "<Dial>+8221200000</Dial>" in twiml and "<Stream" not in twiml


def test_beyond_max_resumes_with_the_desk_closed_the_caller_hears_the_hours_never_silence(line):
    client, store = line("call.transfer_number=''")
    call_sid, action = _webhook(client)
    twiml = _past_max_resumes(client, store, call_sid, action)
    root = ET.fromstring(twiml)
    said = root.find("./Say")
    assert said is not None and "상담원은" in said.text and root.find("./Hangup") is not None


def test_a_drains_hand_over_resumes_without_spending_max_resumes(line):
    client, store = line("call.transfer_number=''")
    call_sid, action = _webhook(client)
    for idx in range(4):  # a rolling deploy moves a call more than call.max_resumes (2) times
        _started(store, call_sid, idx)
        segments.end_segment(store, call_sid, idx, reason=segments.HANDOVER, bot_ended=False)
        resp = _ask(client, action, call_sid)
        assert "<Stream" in resp.text, idx
        action = ET.fromstring(resp.text).find("./Connect").get("action")
    twiml = _past_max_resumes(client, store, call_sid, action, first=4)  # then faults still have their two
    assert "<Say" in twiml and "<Stream" not in twiml


def test_with_the_records_database_down_a_stream_that_ended_still_resumes_never_silence(line, monkeypatch):
    client, store = line()
    call_sid, action = _webhook(client)

    def down(*_a, **_kw):
        raise ConnectionError("records database unreachable")

    from bot.app.routes import stream_ended

    monkeypatch.setattr(stream_ended, "take_action", down)
    monkeypatch.setattr(stream_ended, "record_resume_token", down)
    resp = _ask(client, action, call_sid)
    assert resp.status_code == 200
    url, params = parse_twiml_stream(resp.text)  # the signed token is enough: its first use is kept at the stream
    assert params["seg"] == "1" and StreamTokens(60, load_key({"STREAM_TOKEN_KEY": KEY})[0]).verify(params["token"],
                                                                                                   call_sid)


def test_a_records_read_cut_by_its_timeout_as_cancelled_error_still_resumes(line, monkeypatch):
    """Below Python 3.12 Pipecat's wait_for2 can report a records call ending as its timeout fires as
    CancelledError; the route caught only Exception, so Twilio got a 500 (the caller an application error)."""
    import asyncio

    client, _store = line()
    call_sid, action = _webhook(client)
    real = asyncio.wait_for

    async def cut(aw, timeout):
        if getattr(aw, "__qualname__", "") != "to_thread":
            return await real(aw, timeout)
        aw.close()
        raise asyncio.CancelledError

    monkeypatch.setattr(asyncio, "wait_for", cut)
    resp = _ask(client, action, call_sid)
    assert resp.status_code == 200
    _url, params = parse_twiml_stream(resp.text)
    assert params["seg"] == "1"
