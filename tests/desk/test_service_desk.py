"""The desk's service page and its CSV (bot/desk/service.py) on the scripted calls of tests/store/test_service.py."""

from __future__ import annotations

import re

import pytest

from bot.desk.app import desk_app
from bot.desk.auth import new_api_token
from bot.store import service
from bot.testing.desk_fixtures import client_for, desk_config, logged_in, open_db, secrets_with_key, seed
from tests.store.test_service import DAY1, DAY2, KST, script_calls

pytestmark = pytest.mark.usefixtures("cheap_argon2")
RANGE = "date_from=2026-11-30&date_to=2026-12-01"


@pytest.fixture
def desk(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    seed(store)  # the accounts (and today's call and tickets: outside the range asked)
    script_calls(store)
    yield desk_app(desk_config(url), secrets_with_key(), store), store
    store.close()


def _cells(html: str, day: str) -> dict[str, str]:
    row = re.search(rf'<tr data-day="{day}">(.*?)</tr>', html, re.S).group(1)
    return {k: " ".join(re.sub(r"<[^>]+>", " ", v).split())
            for k, v in re.findall(r'<td class="([\w-]+)[^"]*">(.*?)</td>', row, re.S)}


def test_the_service_page_shows_each_days_figures_and_two_inline_charts(desk):
    app, _ = desk
    r = logged_in(app, "road1").get(f"/desk/service?{RANGE}")  # counts only: a department's clerk reads them too
    assert r.status_code == 200, r.text
    one, two = _cells(r.text, "2026-11-30"), _cells(r.text, "2026-12-01")
    assert (one["calls"], one["resolved"], one["handovers"]) == ("4", "1 (25%)", "2 요청 1 긴급 1")
    assert (one["emergencies"], one["v2v"], one["over-budget"], one["repeated"]) == ("119 1 fire 1", "1260", "1", "1")
    assert one["languages"] == "영어 1 한국어 3" and one["tickets"] == "소음 1 가로등·보안등 1"
    assert (two["calls"], two["resolved"], two["handovers"], two["abusive"], two["idle"]) == (
        "6", "0 (0%)", "1 오류 반복 1", "1", "1")
    assert (two["callbacks"], two["emergencies"], two["v2v"]) == ("1", "112 1 crime 1", "770")
    assert "running 1" in two["ends"] and "abusive 1" in two["ends"]
    assert r.text.count("<svg") == 2 and "<script" not in r.text and not re.search(r'(src|href)="(https?:)?//', r.text)
    assert "Content-Security-Policy" in r.headers and "script-src" not in r.headers["Content-Security-Policy"]
    assert 'href="/desk/api/service.csv?date_from=2026-11-30&amp;date_to=2026-12-01"' in r.text


def test_the_csv_is_the_reports_and_takes_a_session_or_a_token(desk):
    app, store = desk
    want = service.to_csv(service.service_days(store, first=DAY1, last=DAY2, tz=KST, budget_ms=1200))
    r = logged_in(app, "agent1").get(f"/desk/api/service.csv?{RANGE}")
    assert r.status_code == 200 and r.text == want and r.headers["content-type"].startswith("text/csv")
    assert 'filename="line-service-2026-11-30-2026-12-01.csv"' in r.headers["content-disposition"]
    token, digest = new_api_token()
    store.update_staff("agent1", api_token_hash=digest)
    assert client_for(app).get(f"/desk/api/service.csv?{RANGE}",
                               headers={"Authorization": f"Bearer {token}"}).text == want


def test_logged_out_or_a_bad_range_is_refused(desk):
    app, _ = desk
    c = client_for(app)
    assert c.get(f"/desk/service?{RANGE}").status_code == 303
    assert c.get(f"/desk/api/service.csv?{RANGE}").status_code == 401
    agent = logged_in(app, "agent1")
    assert agent.get("/desk/service?date_from=2026-12-01&date_to=2026-11-30").status_code == 400
    assert agent.get("/desk/service?date_from=yesterday").status_code == 400
    assert agent.get("/desk/service").status_code == 200  # the last 14 days


@pytest.mark.slow  # Debian's headless Chromium against the desk served by uvicorn
def test_in_chromium_the_service_page_draws_its_charts_and_table_under_the_desks_csp(desk):
    import os

    from tests.desk.test_recording_desk import CHROMIUM, serve

    if not os.environ.get("CI_REQUIRE_BROWSER"):
        if not CHROMIUM.exists():
            pytest.skip("needs Debian's chromium at /usr/bin/chromium")
        pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    from bot.testing.desk_fixtures import PASSWORD

    app, _ = desk
    base, server = serve(app)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"])
            try:
                page = browser.new_page(locale="ko-KR")
                errors: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.goto(f"{base}/desk/login")
                page.fill("#username", "agent1")
                page.fill("#password", PASSWORD)
                page.click("#login")
                page.wait_for_url(f"{base}/desk/tickets")
                page.click('a[href="/desk/service"]')  # from the menu: the last 14 days
                page.wait_for_url(f"{base}/desk/service")
                page.fill('input[name="date_from"]', "2026-11-30")
                page.fill('input[name="date_to"]', "2026-12-01")
                page.click('form.filters button[type="submit"]')
                page.wait_for_url(f"{base}/desk/service?{RANGE}")
                assert page.locator("#totals").inner_text().split() == [
                    "통화", "10건", "봇", "단독", "해결", "1건", "(10%)", "상담원·긴급", "연결", "3건"]
                row = page.locator('tr[data-day="2026-11-30"]')
                assert row.locator(".calls").inner_text() == "4" and row.locator(".v2v").inner_text() == "1260"
                for chart in ("#chart-1 svg", "#chart-2 svg"):
                    box = page.locator(chart).bounding_box()
                    assert box and box["width"] > 300 and box["height"] > 100, chart
                assert page.locator("#chart-1 svg path").count() == 3  # calls, resolved, handed over
                assert errors == [], errors  # nothing the CSP refused
                if os.environ.get("DESK_SCREENSHOTS"):
                    page.screenshot(path=f"{os.environ['DESK_SCREENSHOTS']}/service.png", full_page=True)
                with page.expect_download() as download:
                    page.click("#csv")
                assert download.value.suggested_filename == "line-service-2026-11-30-2026-12-01.csv"
            finally:
                browser.close()
    finally:
        server.should_exit = True
