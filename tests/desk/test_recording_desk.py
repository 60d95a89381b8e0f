"""Recordings on the staff desk: who may play a call, seeking, the access audit, legal holds, headers.

Route tests run the desk alone under Starlette's TestClient (the fixtures of tests/desk/test_desk.py); the
last test drives Debian's headless Chromium (Playwright) against a desk served by uvicorn: an agent
plays a call, the audit on the page shows the playback, a water clerk gets 404 for a roads call.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from bot.desk.app import desk_app
from bot.recording import files
from bot.recording.recorder import recording_path
from bot.store import recordings
from bot.testing.desk_fixtures import PASSWORD, csrf_of, desk_config, logged_in, open_db, secrets_with_key, seed

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
    down = agent.get(f"/desk/calls/{CALL}/recording?download=1")
    assert down.status_code == 200 and down.headers["content-disposition"].startswith("attachment")
    log = [(a["actor"], a["action"]) for a in recordings.access_log(store, CALL)]
    assert log == [("agent1", "play"), ("agent1", "download")]  # the seek is that playback's
    ticket = agent.get(f"/desk/tickets/{numbers['road']}")
    assert f"/desk/calls/{CALL}/recording" in ticket.text and "media-src 'self'" in ticket.headers[
        "content-security-policy"]
    rows = re.findall(r'<td class="actor">(\w+)</td><td class="action">(\S+)</td>', ticket.text)
    assert rows == [("agent1", "재생"), ("agent1", "내려받기")]


def test_a_department_hears_only_its_own_tickets_calls_and_logged_out_nobody(desk):
    app, store, numbers, _ = desk
    road = logged_in(app, "road1")
    assert road.get(f"/desk/calls/{CALL}/recording").status_code == 200
    assert road.get(f"/desk/calls/{CALL}").status_code == 200
    water = logged_in(app, "water1")
    for url in (f"/desk/calls/{CALL}/recording", f"/desk/calls/{CALL}", "/desk/calls/CAnosuchcall/recording"):
        r = water.get(url)
        assert r.status_code == 404 and b"OggS" not in r.content, url
    assert [a["actor"] for a in recordings.access_log(store, CALL)] == ["road1"]
    anonymous = logged_in(app, "agent1")
    anonymous.cookies.clear()
    r = anonymous.get(f"/desk/calls/{CALL}/recording")
    assert r.status_code == 303 and r.headers["location"] == "/desk/login"


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
    assert [(a["actor"], a["action"]) for a in recordings.access_log(store, CALL)] == [("agent1", "play")]
