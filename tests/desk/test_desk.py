"""The staff desk (bot/desk/): accounts, sessions, CSRF, login limits, the access rules, pages and API.

Route tests run the desk alone (``desk_app``) under Starlette's TestClient on SQLite; the store's
desk methods (audit trail, accounts) also run on a real PostgreSQL server (``db_url``). The browser
test is tests/desk/test_desk_browser.py.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from bot.config import load_config
from bot.core.errors import StartupError
from bot.desk import queries
from bot.desk.app import desk_app
from bot.desk.auth import Signer, hash_password, new_api_token, verify_password
from bot.desk.charts import line_chart
from bot.desk.context import desk_context
from bot.desk.departments import Routing, RoutingError
from bot.store.db import StoreError
from bot.testing.desk_fixtures import (  # noqa: F401  (tests/desk/test_recording_desk.py takes them from here)
    ACCOUNTS,
    CALLER,
    PASSWORD,
    SECRET,
    client_for,
    csrf_of,
    desk_config,
    logged_in,
    login,
    open_db,
    secrets_with_key,
    seed,
)
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("cheap_argon2")


@pytest.fixture
def desk(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    numbers = seed(store)
    app = desk_app(desk_config(url), secrets_with_key(), store)
    yield app, store, numbers
    store.close()


# --- the access rules: each role x each URL ---------------------------------------------------------

PAGES = ["/desk/tickets", "/desk/tickets/{road}", "/desk/tickets/{water}", "/desk/calls", "/desk/health",
         "/desk/staff", "/desk/"]
APIS = ["/desk/api/tickets", "/desk/api/tickets/{road}", "/desk/api/tickets/{water}"]
# URL: expected status for (agent, department of roads, admin). Logged out: pages 303 to login, APIs 401.
RULES = {
    "/desk/tickets": (200, 200, 200),
    "/desk/tickets/{road}": (200, 200, 200),
    "/desk/tickets/{water}": (200, 404, 200),  # another department's ticket: as if it did not exist
    "/desk/calls": (200, 403, 200),
    "/desk/health": (200, 200, 200),
    "/desk/staff": (403, 403, 200),
    "/desk/": (303, 303, 303),
    "/desk/api/tickets": (200, 200, 200),
    "/desk/api/tickets/{road}": (200, 200, 200),
    "/desk/api/tickets/{water}": (200, 404, 200),
}


def test_logged_out_every_page_redirects_to_login_and_every_api_answers_401(desk):
    app, _, numbers = desk
    c = client_for(app)
    for url in PAGES:
        r = c.get(url.format(**numbers))
        assert r.status_code == 303 and r.headers["location"] == "/desk/login", url
    for url in APIS:
        r = c.get(url.format(**numbers))
        assert r.status_code == 401 and r.json()["error"] == "login" and "Bearer" in r.headers["www-authenticate"], url
    # Forms too: a post without a session goes to the login page, and changes nothing.
    r = c.post(f"/desk/tickets/{numbers['road']}/status", data={"status": "done", "csrf_token": "x"})
    assert r.status_code == 303 and r.headers["location"] == "/desk/login"
    assert c.post("/desk/staff", data={"username": "eve", "role": "admin", "password": "x" * 12}).status_code == 303
    assert c.get("/desk/login").status_code == 200 and c.get("/desk/static/desk.css").status_code == 200


@pytest.mark.parametrize("role_index,username", [(0, "agent1"), (1, "road1"), (2, "admin1")])
def test_the_access_rule_table(desk, role_index, username):
    app, _, numbers = desk
    c = logged_in(app, username)
    got = {url: c.get(url.format(**numbers)).status_code for url in RULES}
    assert got == {url: codes[role_index] for url, codes in RULES.items()}


def test_a_department_user_sees_only_its_departments_tickets(desk):
    app, _, numbers = desk
    c = logged_in(app, "road1")
    listed = c.get("/desk/tickets").text
    assert numbers["road"] in listed and numbers["water"] not in listed
    api = c.get("/desk/api/tickets").json()["tickets"]
    assert [t["reception_no"] for t in api] == [numbers["road"]] and api[0]["department"] == "dept-road"
    # Asking for another department's queue by filter does not widen it.
    assert numbers["water"] not in c.get("/desk/api/tickets?department=dept-water").text
    refused = c.get(f"/desk/tickets/{numbers['water']}")
    assert refused.status_code == 404 and "누수" not in refused.text and "시청 앞" not in refused.text
    r = c.post(f"/desk/tickets/{numbers['water']}/status",
               data={"status": "done", "csrf_token": csrf_of(c.get("/desk/tickets").text)})
    assert r.status_code == 404
    # The water clerk sees it.
    assert numbers["water"] in logged_in(app, "water1").get("/desk/tickets").text


def test_another_departments_ticket_cannot_be_told_from_a_missing_one(desk):
    """Probing ticket numbers: another department's ticket answers exactly as a number that does not exist."""
    app, store, numbers = desk
    c = logged_in(app, "road1")
    missing = str(int(numbers["english"]) + 1000)
    token = csrf_of(c.get("/desk/tickets").text)
    for path in ("/desk/tickets/{}", "/desk/api/tickets/{}"):
        theirs, none = c.get(path.format(numbers["water"])), c.get(path.format(missing))
        assert theirs.status_code == none.status_code == 404, path
        assert theirs.text == none.text and dict(theirs.headers) == dict(none.headers), path
    posts = [c.post(f"/desk/tickets/{n}/status", data={"status": "done", "note": "x", "csrf_token": token})
             for n in (numbers["water"], missing)]
    assert [r.status_code for r in posts] == [404, 404] and posts[0].text == posts[1].text
    assert store.find_ticket(numbers["water"])["status"] == "open"


# --- login, sessions, CSRF, the rate limit ------------------------------------------------------------

def test_a_wrong_password_and_an_unknown_user_are_refused_alike(desk):
    app, _, _ = desk
    c = client_for(app)
    for name, pw in (("agent1", "wrong-password-1"), ("nobody", PASSWORD), ("agent1", "")):
        r = login(c, name, pw)
        assert r.status_code == 401 and "아이디 또는 비밀번호가 맞지 않습니다" in r.text
        assert "desk_session" not in r.headers.get("set-cookie", "")
    assert c.get("/desk/tickets").status_code == 303


def test_a_login_post_without_the_csrf_token_is_refused(desk):
    app, _, _ = desk
    c = client_for(app)
    c.get("/desk/login")
    for data in ({"username": "agent1", "password": PASSWORD},
                 {"username": "agent1", "password": PASSWORD, "csrf_token": "0" * 64}):
        r = c.post("/desk/login", data=data)
        assert r.status_code == 403 and "desk_session" not in r.headers.get("set-cookie", "")
    # A token from another browser's login form (another nonce) is refused too.
    other = client_for(app)
    token = csrf_of(other.get("/desk/login").text)
    assert c.post("/desk/login", data={"username": "agent1", "password": PASSWORD,
                                       "csrf_token": token}).status_code == 403


def test_login_attempts_are_limited_per_username_and_address(desk):
    app, _, _ = desk
    c = client_for(app, "10.0.0.7")
    for _ in range(5):
        assert login(c, "agent1", "wrong-password-1").status_code == 401
    r = login(c, "agent1")  # the right password, but too late
    assert r.status_code == 429 and "시도가 너무 많습니다" in r.text
    assert login(c, "admin1").status_code == 303  # another name from the same address
    assert login(client_for(app, "10.0.0.8"), "agent1").status_code == 303  # the same name elsewhere


# The limiter's rules under attack (bursts, a shared proxy address, device cookies): tests/desk/test_login_limits.py


def test_a_form_post_without_the_csrf_token_is_refused_and_changes_nothing(desk):
    app, store, numbers = desk
    c = logged_in(app, "agent1")
    for data in ({"status": "done"}, {"status": "done", "csrf_token": "f" * 64}):
        r = c.post(f"/desk/tickets/{numbers['road']}/status", data=data)
        assert r.status_code == 403 and "보안 토큰" in r.text
    assert store.find_ticket(numbers["road"])["status"] == "open"
    # Another user's token does not work in this session.
    other = logged_in(app, "admin1")
    token = csrf_of(other.get("/desk/tickets").text)
    assert c.post(f"/desk/tickets/{numbers['road']}/status",
                  data={"status": "done", "csrf_token": token}).status_code == 403


def test_status_change_with_a_note_goes_into_the_audit_trail(desk):
    app, store, numbers = desk
    c = logged_in(app, "road1")
    page = c.get(f"/desk/tickets/{numbers['road']}")
    r = c.post(f"/desk/tickets/{numbers['road']}/status",
               data={"status": "in_progress", "note": "현장 확인 예정 (주민번호 900101-1234567)",
                     "csrf_token": csrf_of(page.text)})
    assert r.status_code == 303 and r.headers["location"] == f"/desk/tickets/{numbers['road']}"
    assert store.find_ticket(numbers["road"])["status"] == "in_progress"
    shown = c.get(f"/desk/tickets/{numbers['road']}").text
    assert "road1" in shown and "현장 확인 예정" in shown and "1234567" not in shown
    detail = c.get(f"/desk/api/tickets/{numbers['road']}").json()
    (entry,) = detail["audit"]
    assert (entry["actor"], entry["from"], entry["to"]) == ("road1", "open", "in_progress")
    assert "900101-1******" in entry["note"]
    bad = c.post(f"/desk/tickets/{numbers['road']}/status", data={"status": "closed-ish",
                                                                   "csrf_token": csrf_of(shown)})
    assert bad.status_code == 400


def test_logout_ends_the_session_and_every_copy_of_its_cookie(desk):
    app, _, _ = desk
    c = logged_in(app, "agent1")
    stolen = c.cookies.get("desk_session")
    token = csrf_of(c.get("/desk/tickets").text)
    assert c.post("/desk/logout", data={"csrf_token": token}).status_code == 303
    thief = client_for(app)
    thief.cookies.set("desk_session", stolen, path="/desk")
    assert thief.get("/desk/tickets").status_code == 303


def test_disabling_an_account_ends_its_sessions_and_its_login(desk):
    app, store, _ = desk
    c = logged_in(app, "agent1")
    admin = logged_in(app, "admin1")
    r = admin.post("/desk/staff/agent1/active", data={"active": "0", "csrf_token": csrf_of(admin.get("/desk/staff").text)})
    assert r.status_code == 303 and store.find_staff(username="agent1")["active"] is False
    assert c.get("/desk/tickets").status_code == 303
    assert login(client_for(app), "agent1").status_code == 401


def test_an_admin_adds_an_account_from_the_page(desk):
    app, store, _ = desk
    admin = logged_in(app, "admin1")
    token = csrf_of(admin.get("/desk/staff").text)
    weak = admin.post("/desk/staff", data={"username": "park", "role": "agent", "password": "short", "csrf_token": token})
    assert weak.status_code == 400 and store.find_staff(username="park") is None
    ok = admin.post("/desk/staff", data={"username": "park", "role": "department", "department": "dept-water",
                                         "password": PASSWORD, "csrf_token": token})
    assert ok.status_code == 303 and store.find_staff(username="park")["department"] == "dept-water"
    assert logged_in(app, "park").get("/desk/api/tickets").json()["tickets"][0]["category"] == "water"


def test_sessions_expire_when_idle_and_after_their_lifetime():
    signer = Signer(SECRET)
    import time

    cookie = signer.session_cookie(1, 0, "n", time.time())
    assert signer.read_session(cookie, idle_secs=60, max_secs=3600)["id"] == 1
    assert signer.read_session(cookie, idle_secs=-1, max_secs=3600) is None  # idle too long
    old = signer.session_cookie(1, 0, "n", time.time() - 7200)
    assert signer.read_session(old, idle_secs=60, max_secs=3600) is None  # logged in too long ago
    # forged: a character changed inside the signature (its last one carries padding bits a change may not touch)
    forged = cookie[:-5] + ("A" if cookie[-5] != "A" else "B") + cookie[-4:]
    assert signer.read_session(forged, idle_secs=60, max_secs=3600) is None
    assert Signer("another-" + SECRET).read_session(cookie, idle_secs=60, max_secs=3600) is None


def test_passwords_are_argon2id_and_api_tokens_are_kept_hashed():
    h = hash_password(PASSWORD)
    assert h.startswith("$argon2id$v=19$m=65536,t=3,p=4$") and PASSWORD not in h  # argon2-cffi's defaults
    assert verify_password(h, PASSWORD) and not verify_password(h, PASSWORD + "x")
    assert not verify_password(None, PASSWORD)
    token, digest = new_api_token()
    assert token.startswith("desk_") and len(digest) == 64 and token not in digest


# --- headers, masking, URLs ---------------------------------------------------------------------------

def test_every_answer_has_the_security_headers_and_data_pages_are_not_cached(desk):
    app, _, numbers = desk
    c = logged_in(app, "agent1")
    for r in (c.get("/desk/tickets"), c.get(f"/desk/tickets/{numbers['road']}"), c.get("/desk/api/tickets"),
              client_for(app).get("/desk/login"), client_for(app).get("/desk/api/tickets"),
              c.get("/desk/tickets/99999999")):
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-store" and r.headers["referrer-policy"] == "no-referrer"
    cookie = login(client_for(app), "agent1").headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/desk" in cookie


def test_the_secure_flag_and_hsts_are_on_by_default(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    store.add_staff("agent1", role="agent", department=None, password_hash=hash_password(PASSWORD))
    app = desk_app(load_config(None, [f"records.url='{url}'"]), secrets_with_key(), store)
    c = TestClient(app, base_url="https://testserver", follow_redirects=False)
    r = login(c, "agent1")
    assert r.status_code == 303 and "Secure" in r.headers["set-cookie"]
    assert "max-age" in r.headers["strict-transport-security"]
    store.close()


def test_pages_show_turns_masked_and_no_resident_or_phone_number(desk):
    app, _, numbers = desk
    c = logged_in(app, "agent1")
    for text in (c.get(f"/desk/tickets/{numbers['road']}").text, c.get("/desk/calls").text,
                 c.get(f"/desk/api/tickets/{numbers['road']}").text):
        assert "중앙로 12번길 가로등이 꺼졌어요" in text  # the caller's turn
        assert "1234567" not in text and "2345-6789" not in text and CALLER not in text
    page = c.get(f"/desk/tickets/{numbers['road']}").text
    assert "900101-1******" in page and "010-****-**89" in page and "위치를 말씀해 주시겠어요?" in page
    assert '<dd id="language">한국어</dd>' in page


def test_a_ticket_taken_in_english_says_so_on_the_list_and_its_page(desk):
    app, _, numbers = desk
    c = logged_in(app, "admin1")
    listed = c.get("/desk/tickets").text
    row = listed.split(f'data-reception-no="{numbers["english"]}"')[1].split("</tr>")[0]
    assert '<span class="lang" title="통화 언어">EN</span>' in row
    assert '<span class="lang"' not in listed.split(f'data-reception-no="{numbers["road"]}"')[1].split("</tr>")[0]
    assert '<dd id="language">영어</dd>' in c.get(f"/desk/tickets/{numbers['english']}").text


def test_search_by_reception_number_and_by_location_which_never_goes_in_the_url(desk):
    app, _, numbers = desk
    c = logged_in(app, "agent1")
    by_number = c.get(f"/desk/tickets?q={numbers['water']}").text
    assert numbers["water"] in by_number and f'data-reception-no="{numbers["road"]}"' not in by_number
    # Location words in a GET are ignored (URLs end up in logs and browser history) ...
    assert f'data-reception-no="{numbers["road"]}"' in c.get("/desk/tickets?q=시청").text
    # ... and searched by POST.
    token = csrf_of(c.get("/desk/tickets").text)
    found = c.post("/desk/tickets", data={"q": "시청", "csrf_token": token}).text
    assert f'data-reception-no="{numbers["water"]}"' in found and f'data-reception-no="{numbers["road"]}"' not in found
    assert c.post("/desk/tickets", data={"q": "시청"}).status_code == 403  # the search form has its token too
    # Filters: status, category, department, date.
    assert numbers["water"] not in c.get("/desk/tickets?category=street_lights").text
    assert numbers["road"] not in c.get("/desk/tickets?department=dept-water").text
    assert "조건에 맞는 민원이 없습니다" in c.get("/desk/tickets?status=done").text
    tomorrow = (dt.date.today() + dt.timedelta(days=2)).isoformat()
    assert "조건에 맞는 민원이 없습니다" in c.get(f"/desk/tickets?date_from={tomorrow}").text
    listed = c.get("/desk/tickets").text
    assert listed.index(numbers["water"]) < listed.index(numbers["road"])  # newest first


def test_the_api_takes_a_bearer_token_scoped_like_its_account(desk):
    app, store, numbers = desk
    token, digest = new_api_token()
    store.update_staff("road1", api_token_hash=digest)
    c = client_for(app)
    r = c.get("/desk/api/tickets", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and [t["reception_no"] for t in r.json()["tickets"]] == [numbers["road"]]
    assert c.get(f"/desk/api/tickets/{numbers['water']}", headers={"Authorization": f"Bearer {token}"}).status_code == 404
    assert c.get("/desk/api/tickets", headers={"Authorization": "Bearer desk_wrong"}).status_code == 401
    # A token opens the API only, never the pages.
    assert c.get("/desk/tickets", headers={"Authorization": f"Bearer {token}"}).status_code == 303
    store.update_staff("road1", active=False, end_sessions=True)
    assert c.get("/desk/api/tickets", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_the_health_page_has_the_stage_table_rates_and_an_svg_chart(desk):
    app, _, _ = desk
    page = logged_in(app, "agent1").get("/desk/health").text
    assert "<svg" in page and 'data-stage="voice_to_voice"' in page and "턴당 LLM 호출" in page
    assert "<script" not in page


def test_health_figures_from_turn_records():
    now = dt.datetime.now(dt.UTC)
    rec = lambda sid, v2v, llm, heard, end: {"route": "llm", "stages_ms": {"voice_to_voice": v2v, "stt": 100.0},
                                              "llm_calls": llm, "heard": heard, "call_sid": sid, "end_reason": end,
                                              "created_at": now - dt.timedelta(minutes=5)}
    records = [rec("a", 800.0, 1, ["reply"], "completed"), rec("a", 1500.0, 2, ["apology"], "completed"),
               rec("b", 1000.0, 1, ["reply"], "transfer"),
               {"route": "greeting", "call_sid": "b", "end_reason": "transfer", "created_at": now}]
    h = queries.health(records, load_config().latency)
    v2v = next(s for s in h["stages"] if s["stage"] == "voice_to_voice")
    assert v2v["n"] == 3 and v2v["p50"] == 1000.0 and v2v["over_budget"] == 1  # total_ms 1200
    assert h["turns"] == 3 and h["calls"] == 2 and h["llm_calls_per_turn"] == pytest.approx(4 / 3)
    assert h["apology_rate"] == pytest.approx(1 / 3) and h["transfer_rate"] == 0.5
    hourly = queries.hourly_v2v(records, now=now)
    assert len(hourly) == 24 and hourly[-1]["n"] == 3 and hourly[0]["p50"] is None
    svg = line_chart([str(i) for i in range(24)], {"p50": [h["p50"] for h in hourly]}, title="t<x>", budget=1200)
    assert svg.startswith("<svg") and "t&lt;x&gt;" in svg and "style=" not in svg


# --- startup: key, switch, routing ----------------------------------------------------------------

def test_the_desk_is_off_without_a_key_and_refuses_a_weak_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    assert desk_context(desk_config(url), secrets_with_key(None), store) is None
    assert desk_context(desk_config(url, "desk.enabled=false"), secrets_with_key(), store) is None
    with pytest.raises(StartupError, match="at least 32"):
        desk_context(desk_config(url), secrets_with_key("short"), store)
    with pytest.raises(StartupError, match="DESK_SECRET_KEY"):
        desk_app(desk_config(url), secrets_with_key(None), store)
    store.close()


def test_every_category_has_a_department_of_the_directory(tmp_path):
    routing = Routing.load(load_config())
    assert routing.department_of("street_lights") == "dept-road" and routing.department_of("water") == "dept-water"
    assert set(routing.by_category) == set(routing.category_labels)
    bad = tmp_path / "departments.toml"
    bad.write_text('[category]\nroads = "dept-nowhere"\n', encoding="utf-8")
    with pytest.raises(RoutingError, match=r"departments.toml:2: category.roads: .dept-nowhere.: not a department"):
        Routing.load(load_config(None, [f"desk.departments_file='{bad}'"]))
    bad.write_text('[category]\nroads = "dept-road"\n', encoding="utf-8")
    with pytest.raises(RoutingError, match="is missing"):
        Routing.load(load_config(None, [f"desk.departments_file='{bad}'"]))


# --- the store, on SQLite and PostgreSQL ----------------------------------------------------------

def test_status_changes_are_audited_in_one_transaction(db_url):
    store = open_db(db_url)
    try:
        assert {"staff", "ticket_audit"} <= set(sa.inspect(store.engine).get_table_names())
        number = store.create_ticket(call_sid=None, category="noise", location="101동", time="밤", excerpt="")
        store.set_ticket_status(number, "in_progress")  # the CLI's path: actor "cli"
        store.change_ticket_status(number, "done", actor="kim", note="  처리했습니다  ")
        store.change_ticket_status(number, "done", actor="kim")  # no change, no note: nothing recorded
        store.change_ticket_status(number, "done", actor="lee", note="확인")  # a note alone is recorded
        with store.engine.connect() as conn:
            from bot.store.schema import ticket_audit

            rows = conn.execute(sa.select(ticket_audit).order_by(ticket_audit.c.id)).mappings().all()
        assert [(r["actor"], r["from_status"], r["to_status"], r["note"]) for r in rows] == [
            ("cli", "open", "in_progress", None), ("kim", "in_progress", "done", "처리했습니다"),
            ("lee", "done", "done", "확인")]
        assert store.find_ticket(number)["status"] == "done"
        with pytest.raises(StoreError):
            store.change_ticket_status(number, "closed-ish", actor="kim")
        with pytest.raises(StoreError):
            store.change_ticket_status("19990001", "done", actor="kim")
    finally:
        store.close()


def test_staff_accounts_on_the_store(db_url):
    store = open_db(db_url)
    try:
        sid = store.add_staff("kim", role="department", department="dept-road", password_hash="h")
        with pytest.raises(StoreError, match="exists already"):
            store.add_staff("kim", role="agent", department=None, password_hash="h")
        kim = store.find_staff(username="kim")
        assert kim["id"] == sid and kim["active"] is True and kim["session_epoch"] == 0
        store.update_staff("kim", active=False, end_sessions=True)
        kim = store.find_staff(staff_id=sid)
        assert kim["active"] is False and kim["session_epoch"] == 1
        store.update_staff("kim", api_token_hash="d" * 64)
        assert store.find_staff(api_token_hash="d" * 64)["username"] == "kim"
        assert [a["username"] for a in store.list_staff()] == ["kim"]
        with pytest.raises(StoreError):
            store.update_staff("nobody", active=True)
    finally:
        store.close()


# --- the commands ---------------------------------------------------------------------------------

def _cli(db_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args, "--set", f"records.url='{db_url}'"],
                          input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.mark.slow  # subprocesses
def test_staff_commands_and_the_cli_status_change_audited(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    add = _cli(url, "staff", "add", "kim", "--role", "department", "--department", "dept-road", stdin=PASSWORD + "\n")
    assert add.returncode == 0, add.stderr
    assert PASSWORD not in add.stdout + add.stderr
    bad = _cli(url, "staff", "add", "lee", "--role", "department", stdin=PASSWORD + "\n")
    assert bad.returncode == 2 and "--department" in bad.stderr
    weak = _cli(url, "staff", "add", "lee", "--role", "agent", stdin="short\n")
    assert weak.returncode == 2 and "at least" in weak.stderr
    token = _cli(url, "staff", "token", "kim")
    assert token.returncode == 0 and token.stdout.strip().startswith("desk_")
    assert _cli(url, "staff", "disable", "kim").returncode == 0
    listed = _cli(url, "staff", "list")
    assert "| kim | department | dept-road | no | yes |" in listed.stdout and "1 account(s)" in listed.stdout
    store = open_db(url)
    try:
        assert verify_password(store.find_staff(username="kim")["password_hash"], PASSWORD)
        number = store.create_ticket(call_sid=None, category="roads", location="x", time=None, excerpt="")
        assert _cli(url, "ticket", number, "--status", "done").returncode == 0
        with store.engine.connect() as conn:
            from bot.store.schema import ticket_audit

            (row,) = conn.execute(sa.select(ticket_audit)).mappings().all()
        assert (row["actor"], row["from_status"], row["to_status"]) == ("cli", "open", "done")
    finally:
        store.close()
