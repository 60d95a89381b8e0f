"""The desk's call page links the call to the operator's trace viewer (``telemetry.trace_url_template``)."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.desk.app import desk_app
from bot.telemetry.tracing import trace_id_for
from bot.testing.desk_fixtures import desk_config, logged_in, open_db, secrets_with_key, seed

pytestmark = pytest.mark.usefixtures("cheap_argon2")
TRACED, UNTRACED = "CA" + "1" * 32, "CA" + "2" * 32
VIEWER = "https://jaeger.city.example/trace/{trace_id}"


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    seed(store)
    for sid, tid in ((TRACED, format(trace_id_for(TRACED), "032x")), (UNTRACED, None)):
        store.start_call(sid, caller="+821055501234", worker="w1", qa=False, started_at=dt.datetime.now(dt.UTC))
        store.save_turn(sid, {"index": 0, "route": "greeting", "reply": "안녕하세요", "trace_id": tid})
        store.save_turn(sid, {"index": 1, "route": "llm", "transcript": "가로등", "reply": "네", "trace_id": tid})
        store.end_call(sid, reason="completed", ended_at=dt.datetime.now(dt.UTC))
    yield store, url
    store.close()


def test_a_traced_call_links_to_its_trace_and_an_untraced_one_does_not(store):
    db, url = store
    app = desk_app(desk_config(url, f"telemetry.trace_url_template='{VIEWER}'"), secrets_with_key(), db)
    agent = logged_in(app, "agent1")
    page = agent.get(f"/desk/calls/{TRACED}")
    want = VIEWER.format(trace_id=format(trace_id_for(TRACED), "032x"))
    assert page.status_code == 200 and f'<a id="trace" href="{want}"' in page.text
    assert 'id="trace"' not in agent.get(f"/desk/calls/{UNTRACED}").text
    no_viewer = logged_in(desk_app(desk_config(url), secrets_with_key(), db), "agent1")
    assert 'id="trace"' not in no_viewer.get(f"/desk/calls/{TRACED}").text  # no viewer configured: no link
