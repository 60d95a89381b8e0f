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
    assert (one["emergencies"], one["v2v"], one["over-budget"], one["repeated"]) == ("119 1", "1260", "1", "1")
    assert one["languages"] == "영어 1 한국어 3" and one["tickets"] == "소음 1 가로등·보안등 1"
    assert (two["calls"], two["resolved"], two["handovers"], two["abusive"], two["idle"]) == (
        "6", "0 (0%)", "1 오류 반복 1", "1", "1")
    assert (two["callbacks"], two["emergencies"], two["v2v"]) == ("1", "112 1", "770")
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
