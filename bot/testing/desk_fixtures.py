"""A seeded staff desk for the desk's tests: accounts, a call with its turns, three tickets, a login.

Test lab only (``tests/``); no product module imports it. Route tests run the desk alone
(``bot.desk.app.desk_app``) under Starlette's TestClient.
"""

from __future__ import annotations

import datetime as dt
import re

from fastapi.testclient import TestClient

from bot.config import Config, Secrets, load_config
from bot.desk.auth import hash_password
from bot.store.db import Store

SECRET = "desk-test-secret-" + "k" * 32
PASSWORD = "correct-horse-battery"
ACCOUNTS = {  # username: (role, department)
    "admin1": ("admin", None),
    "agent1": ("agent", None),
    "road1": ("department", "dept-road"),
    "water1": ("department", "dept-water"),
}
CALLER = "+821012345678"


def desk_config(db_url: str, *extra: str) -> Config:
    return load_config(None, [f"records.url='{db_url}'", "desk.cookie_secure=false", *extra])


def secrets_with_key(key: str | None = SECRET) -> Secrets:
    return Secrets(None, None, "EMPTY", desk_secret_key=key)


def open_db(url: str) -> Store:
    store = Store(url)
    store.migrate()
    return store


def seed(store: Store) -> dict[str, str]:
    """Four accounts; a roads ticket with its call's turns (an RRN and a phone number said) and a water ticket."""
    for name, (role, dept) in ACCOUNTS.items():
        store.add_staff(name, role=role, department=dept, password_hash=hash_password(PASSWORD))
    t0 = dt.datetime.now(dt.UTC)
    store.start_call("CA" + "a" * 32, caller=CALLER, worker="w1", qa=False, started_at=t0)
    store.save_turn("CA" + "a" * 32, {"index": 0, "route": "greeting", "reply": "안녕하세요, 한빛시청입니다."})
    store.save_turn("CA" + "a" * 32, {
        "index": 1, "route": "llm", "llm_calls": 1, "transcript": "중앙로 12번길 가로등이 꺼졌어요 주민번호 900101-1234567 "
        "연락처 010-2345-6789", "reply": "위치를 말씀해 주시겠어요?", "heard": ["reply"],
        "stages_ms": {"voice_to_voice": 900.0, "stt": 120.0, "llm": 300.0}})
    store.end_call("CA" + "a" * 32, reason="caller_hangup", ended_at=t0)
    road = store.create_ticket(call_sid="CA" + "a" * 32, category="street_lights", location="중앙로 12번길", time=None,
                               excerpt="가로등이 꺼졌어요")
    water = store.create_ticket(call_sid=None, category="water", location="시청 앞", time=None, excerpt="누수")
    english = store.create_ticket(call_sid=None, category="noise", location="Main Street", time=None,
                                  excerpt="loud music", language="en")
    return {"road": road, "water": water, "english": english}


def client_for(app, address: str = "10.0.0.1") -> TestClient:
    return TestClient(app, follow_redirects=False, client=(address, 50000))


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def login(client: TestClient, username: str, password: str = PASSWORD):
    form = client.get("/desk/login")
    assert form.status_code == 200
    return client.post("/desk/login", data={"username": username, "password": password,
                                            "csrf_token": csrf_of(form.text)})


def logged_in(app, username: str) -> TestClient:
    c = client_for(app)
    r = login(c, username)
    assert r.status_code == 303 and r.headers["location"] == "/desk/tickets", r.text
    return c
