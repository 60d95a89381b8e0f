"""The staff desk in a real browser, on a ticket the bot took in a simulated phone call.

`python run_bot.py` runs in its own process with the desk on (env DESK_SECRET_KEY), real Whisper
base (in English, as in the other phone tests), real VAD, the fake vLLM and the stand-in TTS. The
staff accounts are made the way docs/desk.md says (`run_bot.py staff add`, password on stdin). A
simulated Twilio caller reports a broken street light and confirms with key 1: a ticket of 도로과
(dept-road). Then Debian's headless Chromium (Playwright, no downloaded browser): logged out, the
desk sends it to the login page; the admin logs in, finds the ticket in the queue, opens it, reads
the caller's turn, closes it with a note and sees the audit entry; a form posted without its CSRF
token is refused; a water-department clerk does not see the ticket in the queue and gets 404 on it (as for a missing one).

Skipped locally when /usr/bin/chromium or playwright is missing; with CI_REQUIRE_BROWSER=1 (CI)
it never skips. DESK_SCREENSHOTS=DIR keeps a screenshot of each page there.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bot.store.db import Store
from bot.testing.fake_llm import FakeLLM
from bot.testing.phone import FAST_VOICE
from bot.testing.process import ROOT, BotProcess
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)
from tests.conftest import FIXTURES, offline_bot_overrides

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_BROWSER = bool(os.environ.get("CI_REQUIRE_BROWSER"))
if not REQUIRE_BROWSER:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)
    pytest.importorskip("playwright.sync_api", reason="needs the playwright package (requirements-dev.txt)")
from playwright.sync_api import sync_playwright  # noqa: E402

pytestmark = pytest.mark.slow  # a real bot process, a simulated call and a browser

AUTH_TOKEN = "test-auth-token-desk"
ACCOUNT_SID = "AC" + "3" * 32
PUBLIC_HOST = "voice.example.org"
PUBLIC_URL = f"https://{PUBLIC_HOST}/twilio/voice"
CALLER = "+821055501234"
DESK_KEY = "desk-browser-test-" + "s" * 32
PASSWORD = "browser-test-password"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SHOTS = Path(os.environ["DESK_SCREENSHOTS"]) if os.environ.get("DESK_SCREENSHOTS") else None


@pytest.fixture(scope="module")
def fake_llm():
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake:
        yield fake


def run_bot_cli(db_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args, "--set", f"records.url='{db_url}'"],
                          input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm):
    tmp = tmp_path_factory.mktemp("desk_bot")
    db_url = f"sqlite:///{tmp / 'records' / 'calls.db'}"
    (tmp / "records").mkdir()
    # The first accounts, as docs/desk.md makes them: the password on stdin, never an argument.
    for name, role in (("admin1", ["--role", "admin"]), ("water1", ["--role", "department", "--department", "dept-water"])):
        made = run_bot_cli(db_url, "staff", "add", name, *role, stdin=PASSWORD + "\n")
        assert made.returncode == 0, made.stderr[-2000:]
    overrides = [o for o in offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records")
                 if not o.startswith("records.url")]
    proc = BotProcess(
        # No speculative answers: a speculative request withdrawn when "Hello?" turns out to go on would
        # take the next scripted answer (the fake answers in queue order, not by what was said).
        [*overrides, f"records.url='{db_url}'", f"server.public_host='{PUBLIC_HOST}'", "desk.cookie_secure=false",
         "turn.speculative_reply=false", FAST_VOICE],
        env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None, "DESK_SECRET_KEY": DESK_KEY},
        log_path=tmp / "bot.log",
    )
    try:
        proc.wait_ready()
        proc.db_url = db_url
        yield proc
    finally:
        proc.stop()


def model_turn(reply, **kw):
    base = {"reply": reply, "intent": "report_problem", "category": "street_lights", "location": None, "time": None,
            "flow": "continue"}
    return {**base, **kw}


async def say(call: TwilioCallSimulator, wav) -> None:
    await call.send_wav(wav)
    await call.wait_for_media(timeout=30, after=time.monotonic())
    await call.wait_for_silence_from_bot(gap=0.8, timeout=40)


async def report_by_phone(bot: BotProcess, fake_llm: FakeLLM) -> str:
    """Greeting, two spoken turns (category, then location), key 1 for yes: the call's SID."""
    call_sid = new_sid("CA")
    params = {**voice_webhook_params(call_sid, account_sid=ACCOUNT_SID), "From": CALLER}
    resp = await post_voice_webhook(bot.base_url, PUBLIC_URL, params, AUTH_TOKEN)
    assert resp.status_code == 200, resp.text
    _, stream_params = parse_twiml_stream(resp.text)
    call = TwilioCallSimulator(bot.ws_url, call_sid=call_sid, custom_parameters=stream_params, account_sid=ACCOUNT_SID)
    async with call:
        await call.wait_for_media(timeout=20)
        await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
        # ``heard``: the whole utterance's call takes the script, not a speculative one on "Hello?" alone.
        fake_llm.script(model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?"), heard="how")
        await say(call, FIXTURES / "en_hello.wav")
        fake_llm.script(model_turn("알겠습니다.", location="중앙로 12번길"), heard="how")
        await say(call, FIXTURES / "en_hello.wav")
        t = time.monotonic()
        await call.send_dtmf("1")  # yes: the ticket is made and its number read out
        await call.wait_for_media(timeout=30, after=t)
        await call.wait_for_silence_from_bot(gap=0.8, timeout=40)
        await call.stop()
    return call_sid


def wait_for_ticket(db_url: str, call_sid: str, timeout: float = 20.0) -> dict:
    store = Store(db_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            mine = [t for t in store.list_tickets() if t["call_sid"] == call_sid]
            call = next((c for c in store.list_calls() if c["call_sid"] == call_sid), None)
            if mine and call and call["ended_at"]:
                return mine[0]
            time.sleep(0.3)
    finally:
        store.close()
    raise AssertionError("no ticket from the simulated call")


def shot(page, name: str) -> None:
    if SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/desk/login")
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("#login")
    page.wait_for_url(f"{base}/desk/tickets")


def test_a_ticket_reported_by_phone_is_found_read_and_closed_in_the_desk(bot, fake_llm):
    fake_llm.reset()
    call_sid = asyncio.run(report_by_phone(bot, fake_llm))
    number = wait_for_ticket(bot.db_url, call_sid)["reception_no"]
    base = bot.base_url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(locale="ko-KR")
            page = context.new_page()
            # A refusal the test asks for (403, 401) is a document answer; a failed asset or a CSP
            # block is a bug. Chromium logs both as console errors, so assets are watched by response.
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text)
                    if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
            page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
                    if r.status >= 400 and r.request.resource_type != "document" else None)
            try:
                # Logged out: every page goes to the login page, the API answers 401.
                for url in ("/desk/tickets", f"/desk/tickets/{number}", "/desk/calls", "/desk/health"):
                    page.goto(base + url)
                    assert page.url == f"{base}/desk/login", url
                assert context.request.get(f"{base}/desk/api/tickets/{number}").status == 401
                shot(page, "login")
                page.fill("#username", "admin1")
                page.fill("#password", "not-the-password")
                page.click("#login")
                assert "아이디 또는 비밀번호가 맞지 않습니다" in page.locator("#error").inner_text()

                log_in(page, base, "admin1")
                assert "admin1" in page.locator("#me").inner_text()
                row = page.locator(f'#tickets tr[data-reception-no="{number}"]')
                assert "가로등·보안등" in row.inner_text() and "중앙로 12번길" in row.inner_text()
                assert "도로과" in row.inner_text() and "접수" in row.inner_text()
                shot(page, "tickets")
                row.locator("a").click()
                page.wait_for_url(f"{base}/desk/tickets/{number}")
                assert page.locator("#status").inner_text() == "접수"
                caller_said = page.locator("#turns .caller").all_inner_texts()
                assert any("hello" in t.lower() for t in caller_said), caller_said
                assert any("이 내용으로 접수할까요?" in t for t in page.locator("#turns .bot").all_inner_texts())
                html = page.content()
                assert CALLER not in html and CALLER[3:] not in html  # the caller's number is masked
                assert "아직 변경 이력이 없습니다" in page.locator("#audit").inner_text()

                # A form posted without its CSRF token is refused, and changes nothing.
                page.evaluate("document.querySelector('#status-form input[name=csrf_token]').remove()")
                page.select_option("#new-status", "rejected")
                page.click("#change-status")
                assert "보안 토큰" in page.locator("#message").inner_text()
                page.goto(f"{base}/desk/tickets/{number}")
                assert page.locator("#status").inner_text() == "접수"

                page.select_option("#new-status", "done")
                page.fill("#note", "가로등 교체 완료")
                page.click("#change-status")
                page.wait_for_url(f"{base}/desk/tickets/{number}")
                assert page.locator("#status").inner_text() == "처리 완료"
                entry = page.locator("#audit tbody tr").first
                assert entry.locator(".actor").inner_text() == "admin1"
                assert entry.locator(".to").inner_text() == "처리 완료"
                assert entry.locator(".note").inner_text() == "가로등 교체 완료"
                shot(page, "ticket")
                page.goto(f"{base}/desk/calls")
                assert "caller_hangup" in page.locator("#calls").inner_text()
                shot(page, "calls")
                page.goto(f"{base}/desk/health")
                assert page.locator("#chart svg").count() == 1
                shot(page, "health")
                page.click("#logout")
                page.wait_for_url(f"{base}/desk/login")

                # Another department's clerk: not in its queue, 404 on the ticket itself (no probing).
                log_in(page, base, "water1")
                assert page.locator(f'#tickets tr[data-reception-no="{number}"]').count() == 0
                resp = page.goto(f"{base}/desk/tickets/{number}")
                assert resp.status == 404 and "찾는 항목이 없습니다" in page.locator("#message").inner_text()
                assert "가로등 교체 완료" not in page.content()
                assert context.request.get(f"{base}/desk/api/tickets/{number}").status == 404
                assert errors == [], errors  # nothing the CSP blocked, no broken asset
            except Exception:
                print(bot.log()[-6000:])
                raise
        finally:
            browser.close()
    # The CLI sees what the desk did: the ticket is done.
    shown = run_bot_cli(bot.db_url, "ticket", number)
    assert shown.returncode == 0 and '"status": "done"' in shown.stdout
    assert httpx.get(f"{base}/desk/api/tickets", timeout=5).status_code == 401
