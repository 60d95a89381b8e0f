"""Recordings on the staff desk: who may play a call, seeking, the access audit, legal holds, headers.

Route tests run the desk alone under Starlette's TestClient (the fixtures of tests/desk/test_desk.py); the
last test drives Debian's headless Chromium (Playwright) against a desk served by uvicorn: an agent
plays a call, the audit on the page shows the playback, a water clerk gets 404 for a roads call.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest
import soundfile as sf

from bot.desk.app import desk_app
from bot.recording import files
from bot.recording.recorder import recording_path
from bot.store import recordings
from bot.testing.desk_fixtures import (
    PASSWORD,
    client_for,
    csrf_of,
    desk_config,
    logged_in,
    open_db,
    secrets_with_key,
    seed,
)

pytestmark = pytest.mark.usefixtures("cheap_argon2")

CALL = "CA" + "a" * 32  # seed()'s call: a roads (street_lights) ticket


@pytest.fixture
def desk(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    numbers = seed(store)
    rec_dir = tmp_path / "recordings"
    path = recording_path(rec_dir, CALL, "opus")
    path.parent.mkdir(parents=True)
    tone = (np.sin(np.arange(8000 * 3) / 3) * 8000).astype(np.int16)
    sf.write(path, np.stack([tone, tone // 2], 1), 8000, format="OGG", subtype="OPUS")
    recordings.set_recording(store, CALL, files.relative(rec_dir, path), 3.0)
    app = desk_app(desk_config(url, f"recording.dir='{rec_dir}'"), secrets_with_key(), store)
    yield app, store, numbers, path
    store.close()


def test_an_agent_plays_and_seeks_a_call_and_each_playback_and_download_is_audited(desk):
    app, store, numbers, path = desk
    agent = logged_in(app, "agent1")
    page = agent.get(f"/desk/calls/{CALL}")
    assert page.status_code == 200 and f'src="/desk/calls/{CALL}/recording"' in page.text
    whole = agent.get(f"/desk/calls/{CALL}/recording")
    assert whole.status_code == 200 and whole.content == path.read_bytes()
    assert whole.headers["content-type"] == "audio/ogg" and whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["cache-control"] == "no-store" and whole.headers["content-disposition"].startswith("inline")
    seek = agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": "bytes=100-199"})
    assert seek.status_code == 206 and seek.content == path.read_bytes()[100:200]
    assert seek.headers["content-range"] == f"bytes 100-199/{path.stat().st_size}"
    down = agent.post(f"/desk/calls/{CALL}/recording/download", data={"reason": "민원 회신",
                                                                     "csrf_token": csrf_of(page.text)})
    assert down.status_code == 200 and down.headers["content-disposition"].startswith("attachment")
    seek = agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": "bytes=300-399"})
    assert seek.status_code == 206
    log = [(a["actor"], a["action"]) for a in recordings.access_log(store, CALL)]
    # The whole file without a range is a copy (a browser's "Save as"); the seeks are one playback.
    assert log == [("agent1", "copy"), ("agent1", "play"), ("agent1", "download")]
    ticket = agent.get(f"/desk/tickets/{numbers['road']}")
    assert f"/desk/calls/{CALL}/recording" in ticket.text and "media-src 'self'" in ticket.headers[
        "content-security-policy"]
    rows = re.findall(r'<td class="actor">(\w+)</td><td class="action">([^<]+)</td>', ticket.text)
    assert rows == [("agent1", "전체 복사"), ("agent1", "재생"), ("agent1", "내려받기")]


def test_a_department_hears_only_its_own_tickets_calls_and_logged_out_nobody(desk):
    app, store, numbers, _ = desk
    road = logged_in(app, "road1")
    assert road.get(f"/desk/calls/{CALL}/recording").status_code == 200
    assert road.get(f"/desk/calls/{CALL}").status_code == 200
    water = logged_in(app, "water1")
    for url in (f"/desk/calls/{CALL}/recording", f"/desk/calls/{CALL}", "/desk/calls/CAnosuchcall/recording"):
        r = water.get(url)
        assert r.status_code == 404 and b"OggS" not in r.content, url
    anonymous = logged_in(app, "agent1")
    anonymous.cookies.clear()
    for _ in range(2):  # the same refusal again within the window: still one row
        r = anonymous.get(f"/desk/calls/{CALL}/recording")
        assert r.status_code == 303 and r.headers["location"] == "/desk/login"
    # Served: road1's copy; refused and audited: water1's attempt (another department's 404), the anonymous one.
    log = [(a["actor"], a["action"], a["refused"]) for a in recordings.access_log(store, CALL)]
    assert log == [("road1", "copy", None), ("water1", "copy", "other_department"), ("-", "copy", "anonymous")]
    assert {a["address"] for a in recordings.access_log(store, CALL)} == {"10.0.0.1"}


def test_only_an_admin_puts_a_legal_hold_and_it_is_in_the_tickets_trail(desk):
    app, store, numbers, _ = desk
    number = numbers["road"]
    agent = logged_in(app, "agent1")
    page = agent.get(f"/desk/tickets/{number}")
    assert 'id="hold-form"' not in page.text
    r = agent.post(f"/desk/tickets/{number}/hold", data={"hold": "1", "csrf_token": csrf_of(page.text)})
    assert r.status_code == 403
    admin = logged_in(app, "admin1")
    page = admin.get(f"/desk/tickets/{number}")
    r = admin.post(f"/desk/tickets/{number}/hold", data={"hold": "1", "note": "정보공개 청구"})
    assert r.status_code == 403  # no CSRF token: refused, nothing changed
    assert not recordings.find_recording(store, CALL)["held"]
    r = admin.post(f"/desk/tickets/{number}/hold", data={"hold": "1", "note": "정보공개 청구",
                                                        "csrf_token": csrf_of(page.text)})
    assert r.status_code == 303 and recordings.find_recording(store, CALL)["held"]
    page = admin.get(f"/desk/tickets/{number}")
    assert "법적 보존 설정: 정보공개 청구" in page.text and "<b>설정됨</b>" in page.text


def test_every_whole_copy_is_a_row_and_a_range_the_desk_refuses_is_none(desk):
    app, store, _, path = desk
    agent = logged_in(app, "agent1")
    for _ in range(5):  # a browser's "Save as", five times within the playback window
        r = agent.get(f"/desk/calls/{CALL}/recording")
        assert r.status_code == 200 and r.content == path.read_bytes()
    assert [a["action"] for a in recordings.access_log(store, CALL)] == ["copy"] * 5
    size = path.stat().st_size
    for rng, code in (("bytes=abc", 400), ("bytes=9-3", 400), (f"bytes={size + 10}-", 416)):
        r = agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": rng})
        assert r.status_code == code and b"OggS" not in r.content, rng
    assert [a["action"] for a in recordings.access_log(store, CALL)] == ["copy"] * 5  # no bytes, no row
    # A range that no longer matches the file (If-Range) gets the whole file: a copy, though it asked a range.
    r = agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": "bytes=0-9", "If-Range": '"stale"'})
    assert r.status_code == 200 and r.content == path.read_bytes()
    assert [a["action"] for a in recordings.access_log(store, CALL)] == ["copy"] * 6
    # A download (a form's POST) ignores a range: the whole file, one download row each.
    form = {"reason": "민원 회신", "csrf_token": csrf_of(agent.get(f"/desk/calls/{CALL}").text)}
    for _ in range(2):
        r = agent.post(f"/desk/calls/{CALL}/recording/download", data=form, headers={"Range": "bytes=abc"})
        assert r.status_code == 200 and r.content == path.read_bytes()
    assert [a["action"] for a in recordings.access_log(store, CALL)] == ["copy"] * 6 + ["download"] * 2


def test_a_deleted_recordings_404_and_an_unknown_calls_are_audited_refusals(desk):
    app, store, _, path = desk
    path.unlink()  # retention (or a hand) removed the file
    agent = logged_in(app, "agent1")
    assert agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": "bytes=0-9"}).status_code == 404
    assert agent.get("/desk/calls/CAnosuchcall/recording?download=1").status_code == 404
    assert [(a["actor"], a["action"], a["refused"]) for a in recordings.access_log(store, CALL)] == [
        ("agent1", "play", "deleted")]
    assert [(a["actor"], a["action"], a["refused"]) for a in recordings.access_log(store, "CAnosuchcall")] == [
        ("agent1", "download", "no_such_call")]
    page = agent.get(f"/desk/calls/{CALL}")
    assert re.search(r'<td class="action">거부: 녹음 삭제됨</td>', page.text), page.text


SECURITY = ("content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy",
            "cross-origin-opener-policy", "permissions-policy", "cache-control")


def test_every_answer_under_desk_carries_the_security_headers_errors_included(desk):
    app, _, _, path = desk
    agent = logged_in(app, "agent1")
    ok = agent.get(f"/desk/calls/{CALL}/recording")
    assert ok.status_code == 200
    want = {h: ok.headers[h] for h in SECURITY}
    assert want["cache-control"] == "no-store" and want["x-content-type-options"] == "nosniff"
    water = logged_in(app, "water1")
    answers = {
        "HEAD": agent.head(f"/desk/calls/{CALL}/recording"),
        "malformed range": agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": "bytes=abc"}),
        "unsatisfiable range": agent.get(f"/desk/calls/{CALL}/recording",
                                         headers={"Range": f"bytes={path.stat().st_size + 10}-"}),
        "no such page": agent.get("/desk/nosuchpage"),
        "another department": water.get(f"/desk/calls/{CALL}/recording"),
        "a POST to a GET route": agent.post(f"/desk/calls/{CALL}/recording"),
        "logged out": client_for(app).get("/desk/tickets"),
    }
    assert {k: r.status_code for k, r in answers.items()} == {
        "HEAD": 405, "malformed range": 400, "unsatisfiable range": 416, "no such page": 404,
        "another department": 404, "a POST to a GET route": 405, "logged out": 303}
    for what, r in answers.items():
        assert {h: r.headers.get(h) for h in SECURITY} == want, what


def test_a_desk_error_answered_500_carries_the_headers_too(desk, monkeypatch):
    from fastapi.testclient import TestClient

    from bot.desk import recordings as desk_recordings

    app, _, _, _ = desk
    agent = logged_in(app, "agent1")

    def broken(*_a, **_k):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(desk_recordings, "ticket_detail", broken)
    client = TestClient(app, raise_server_exceptions=False, cookies=dict(agent.cookies), client=("10.0.0.1", 50000))
    r = client.get(f"/desk/calls/{CALL}")
    assert r.status_code == 500 and "database" not in r.text
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"


def test_an_export_shows_the_turns_exactly_as_the_desk_does(desk, tmp_path):
    import html
    import io
    from types import SimpleNamespace

    from bot.tools.recording import run

    app, store, _, _ = desk
    page = logged_in(app, "agent1").get(f"/desk/calls/{CALL}").text
    shown = [html.unescape(t) for t in re.findall(r'<p class="caller"><b>발신자</b> ([^<]+)</p>', page)]
    assert shown and "010-****-**89" in shown[0] and "010-2345-6789" not in page
    config = desk_config(str(store.engine.url), f"recording.dir='{tmp_path / 'recordings'}'")
    args = SimpleNamespace(action="export", call_sid=CALL, dir=str(tmp_path / "out"), actor="agent1",
                           unmasked=False, reason="정보공개 청구")
    assert run(config, args, io.StringIO()) == 0
    text = (tmp_path / "out" / f"{CALL}.txt").read_text(encoding="utf-8")
    assert [line.split("발신자: ", 1)[1] for line in text.splitlines() if "발신자: " in line] == shown


def test_a_download_asks_a_reason_and_the_audit_keeps_it(desk):
    app, store, _, path = desk
    agent = logged_in(app, "agent1")
    page = agent.get(f"/desk/calls/{CALL}")
    assert 'id="download-form"' in page.text and 'name="reason"' in page.text
    r = agent.get(f"/desk/calls/{CALL}/recording?download=1")  # no reason: refused, audited
    assert r.status_code == 400 and b"OggS" not in r.content
    url = f"/desk/calls/{CALL}/recording/download"
    assert agent.post(url, data={"reason": "민원 회신"}).status_code == 403  # no CSRF token
    r = agent.post(url, data={"reason": "  ", "csrf_token": csrf_of(page.text)})
    assert r.status_code == 400 and b"OggS" not in r.content
    r = agent.post(url, data={"reason": "민원인 열람 청구 2026-77", "csrf_token": csrf_of(page.text)})
    assert r.status_code == 200 and r.content == path.read_bytes()
    assert r.headers["content-disposition"].startswith("attachment") and r.headers["cache-control"] == "no-store"
    log = [(a["action"], a["refused"], a["reason"]) for a in recordings.access_log(store, CALL)]
    assert log == [("download", "no_reason", None), ("download", None, "민원인 열람 청구 2026-77")]
    page = agent.get(f"/desk/calls/{CALL}")
    assert '<td class="reason">민원인 열람 청구 2026-77</td>' in page.text


def test_opening_a_call_or_its_ticket_is_audited_as_a_view(desk):
    app, store, numbers, _ = desk
    agent = logged_in(app, "agent1")
    agent.get(f"/desk/calls/{CALL}")
    agent.get(f"/desk/calls/{CALL}")  # again within the window: the same reading
    agent.get(f"/desk/tickets/{numbers['road']}")
    views = [(a["actor"], a["action"], a["reception_no"]) for a in recordings.access_log(store, CALL, views=True)]
    assert views == [("agent1", "view", None), ("agent1", "view", numbers["road"])]
    assert recordings.access_log(store, CALL) == []  # the player's table: the recording's own rows


def test_the_monthly_review_page_is_for_admins(desk):
    app, store, _, _ = desk
    agent = logged_in(app, "agent1")
    agent.get(f"/desk/calls/{CALL}/recording", headers={"Range": "bytes=0-9"})
    month = dt.datetime.now(ZoneInfo("Asia/Seoul")).strftime("%Y-%m")
    assert agent.get(f"/desk/audit?month={month}").status_code == 403
    admin = logged_in(app, "admin1")
    page = admin.get(f"/desk/audit?month={month}")
    assert page.status_code == 200 and "월간 접속 기록 점검" in page.text
    assert re.search(r'<td class="actor">agent1</td><td class="action">재생</td>', page.text), page.text
    assert admin.get("/desk/audit?month=2026-13").status_code == 400
    assert admin.get("/desk/audit").status_code == 200  # this month


# --- in Chromium --------------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")


def serve(app) -> tuple[str, object]:
    import uvicorn

    from bot.testing.process import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


@pytest.mark.slow
def test_in_chromium_an_agent_plays_a_call_and_the_audit_shows_it_and_another_department_gets_404(desk):
    if not os.environ.get("CI_REQUIRE_BROWSER"):
        if not CHROMIUM.exists():
            pytest.skip("needs Debian's chromium at /usr/bin/chromium")
        pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright


    app, store, numbers, _ = desk
    base, server = serve(app)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=[
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
                "--autoplay-policy=no-user-gesture-required"])
            try:
                page = browser.new_page(locale="ko-KR")
                errors: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

                def log_in(username: str) -> None:
                    page.goto(f"{base}/desk/login")
                    page.fill("#username", username)
                    page.fill("#password", PASSWORD)
                    page.click("#login")
                    page.wait_for_url(f"{base}/desk/tickets")

                log_in("agent1")
                page.goto(f"{base}/desk/calls")
                page.click(f'a[href="/desk/calls/{CALL}"]')
                page.wait_for_url(f"{base}/desk/calls/{CALL}")
                assert "아직 녹음을 재생하거나" in page.locator("#recording-access").inner_text()
                player = page.locator("audio#recording")
                def played_past(secs: float) -> None:  # polled: the desk's CSP allows no eval (wait_for_function)
                    deadline = time.monotonic() + 15
                    while player.evaluate("a => a.currentTime") <= secs:
                        assert time.monotonic() < deadline and player.evaluate("a => a.error") is None
                        time.sleep(0.1)

                player.evaluate("a => a.play()")
                played_past(0.3)
                player.evaluate("a => { a.currentTime = 2.0; }")  # seeking: a range request
                played_past(2.05)
                assert player.evaluate("a => a.error") is None
                page.reload()
                row = page.locator("#recording-access tbody tr").first
                assert row.locator(".actor").inner_text() == "agent1" and row.locator(".action").inner_text() == "재생"
                assert page.locator("#recording-access tbody tr").count() == 1  # one playback, however many ranges
                page.click("#logout")
                page.wait_for_url(f"{base}/desk/login")

                log_in("water1")
                resp = page.goto(f"{base}/desk/calls/{CALL}/recording")
                assert resp.status == 404 and "찾는 항목이 없습니다" in page.locator("#message").inner_text()
                assert page.goto(f"{base}/desk/calls/{CALL}").status == 404
                assert [e for e in errors if "404" not in e] == [], errors
            finally:
                browser.close()
    finally:
        server.should_exit = True
    # One playback however many ranges; the water clerk's attempt at the file (a navigation: the whole) refused.
    assert [(a["actor"], a["action"], a["refused"]) for a in recordings.access_log(store, CALL)] == [
        ("agent1", "play", None), ("water1", "copy", "other_department")]
