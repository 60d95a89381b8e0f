"""Issue 47: a call the line ended for abuse shows on the desk with its end reason and its turns."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.desk.app import desk_app
from bot.testing.desk_fixtures import desk_config, logged_in, open_db, secrets_with_key, seed

pytestmark = pytest.mark.usefixtures("cheap_argon2")

WARNING = "욕설이나 폭언, 성희롱이 계속되면 통화가 종료될 수 있습니다."
CLOSING = "폭언이 계속되어 통화를 종료합니다."


def test_the_calls_page_shows_end_reason_abusive_with_the_turns(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    seed(store)
    sid = "CA" + "b" * 32
    store.start_call(sid, caller="+821055550000", worker="w1", qa=False, started_at=dt.datetime.now(dt.UTC))
    store.save_turn(sid, {"index": 0, "route": "greeting", "reply": "안녕하세요.", "ai_notice": True})
    store.save_turn(sid, {"index": 1, "route": "rule", "transcript": "씨발 뭐야", "reply": WARNING})
    store.save_turn(sid, {"index": 2, "route": "rule", "transcript": "이 개새끼야", "reply": CLOSING, "flow": "end"})
    store.end_call(sid, reason="abusive", ended_at=dt.datetime.now(dt.UTC))
    try:
        page = logged_in(desk_app(desk_config(url), secrets_with_key(), store), "agent1").get("/desk/calls").text
    finally:
        store.close()
    assert "<td>abusive</td>" in page and WARNING in page and CLOSING in page
