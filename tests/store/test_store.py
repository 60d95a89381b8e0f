"""The records database on SQLite (WAL) and a real PostgreSQL server: schema, tickets, writer, privacy."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
import sqlalchemy as sa

from bot.store.db import Store, StoreError, resolve_url
from bot.store.schema import turns
from bot.store.writer import RecordWriter


def open_db(url: str) -> Store:
    store = Store(url)
    store.migrate()
    return store


def test_migrations_create_the_tables_and_run_twice(db_url):
    store = open_db(db_url)
    store.migrate()  # a second worker starting: nothing to do, no error
    names = set(sa.inspect(store.engine).get_table_names())
    assert {"calls", "turns", "tickets", "alembic_version"} <= names
    if store.backend == "sqlite":
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    store.close()


def test_reception_numbers_are_unique_when_eight_workers_confirm_at_once(db_url):
    open_db(db_url).close()
    stores = [Store(db_url) for _ in range(8)]  # one engine each, like separate worker processes
    numbers: list[str] = []
    barrier = threading.Barrier(8)

    def confirm(store: Store):
        barrier.wait()
        for _ in range(5):
            numbers.append(store.create_ticket(call_sid="CA", category="roads", location="중앙로", time=None,
                                               excerpt="도로가 파였어요"))

    threads = [threading.Thread(target=confirm, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(numbers) == 40 and len(set(numbers)) == 40
    year = str(dt.datetime.now(dt.UTC).year)
    assert all(n.startswith(year) and len(n) == 8 and n.isdigit() for n in numbers)
    assert len(stores[0].list_tickets(status="open")) == 40
    for s in stores:
        s.close()


def test_ticket_status_updates_and_bad_status_is_refused(db_url):
    store = open_db(db_url)
    number = store.create_ticket(call_sid=None, category="noise", location="101동", time="밤 11시", excerpt="시끄러워요")
    assert store.find_ticket(number)["status"] == "open"
    updated = store.set_ticket_status(number, "done")
    assert updated["status"] == "done" and updated["updated_at"] >= updated["created_at"]
    with pytest.raises(StoreError, match="unknown status"):
        store.set_ticket_status(number, "closed-ish")
    with pytest.raises(StoreError, match="no ticket"):
        store.set_ticket_status("19990001", "done")
    assert store.find_ticket("19990001") is None
    store.close()


def test_due_texts_and_callbacks_are_each_claimed_by_one_of_four_workers_claiming_at_once(db_url):
    n_due = 40
    open_db(db_url).close()
    stores = [Store(db_url) for _ in range(4)]  # one engine each, like separate worker processes
    due = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    for i in range(n_due):
        sid = f"CA{i:032d}"
        stores[0].start_call(sid, caller="+821012345678", worker="w", qa=False, started_at=due)
        stores[0].text_ticket(stores[0].create_ticket(call_sid=sid, category="roads", location="중앙로", time=None,
                                                      excerpt="도로가 파였어요"))
        stores[0].request_callback(call_sid=sid, after=due, reason="after_hours")
    barrier = threading.Barrier(4)
    texts: list[int] = []
    calls: list[int] = []

    def claim(store: Store, worker: str):
        barrier.wait()
        while got := [m["id"] for m in store.claim_due_sms(worker, limit=5)]:
            texts.extend(got)
        while got := [c["id"] for c in store.claim_due_callbacks(limit=5)]:
            calls.extend(got)

    threads = [threading.Thread(target=claim, args=(s, f"w{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(texts) == sorted(calls) == list(range(1, n_due + 1))
    assert all(c["attempts"] == 1 for c in stores[0].list_callbacks("calling"))
    assert stores[0].claim_due_sms("w9") == [] and stores[0].claim_due_callbacks() == []
    for s in stores:
        s.close()


def test_a_text_or_a_callback_outcome_for_a_row_that_is_not_there_is_refused_by_name(db_url):
    store = open_db(db_url)
    with pytest.raises(StoreError, match="no ticket with reception number 19990001"):
        store.text_ticket("19990001")
    with pytest.raises(StoreError, match="no callback 999"):
        store.callback_outcome(999, reached=True, max_attempts=3, retry_after_secs=60)
    store.close()


def test_stored_words_are_masked_and_retention_keeps_tickets(db_url):
    store = open_db(db_url)
    t0 = dt.datetime.now(dt.UTC)
    store.start_call("CA1", caller="+821012345678", worker="w", qa=False, started_at=t0)
    said = "제 주민번호는 900101-2345678이고 카드는 1234 5678 9012 3456이에요"
    store.save_turn("CA1", {"index": 1, "route": "llm", "transcript": said, "reply": "네.", "llm_calls": 1})
    store.create_ticket(call_sid="CA1", category="roads", location="x", time=None, excerpt=said)
    (call,) = store.list_calls()
    assert call["caller"] == "+821012345678"  # kept for call-backs
    text = call["turns"][0]["transcript"]
    assert "2345678" not in text and "9012" not in text and "900101-2******" in text
    assert "2345678" not in store.list_tickets()[0]["excerpt"]
    with store.engine.begin() as conn:  # age the turn past the retention period
        conn.execute(turns.update().values(created_at=t0 - dt.timedelta(days=100)))
    assert store.purge_turns(90) == 1
    assert store.list_calls()[0]["turns"] == [] and len(store.list_tickets()) == 1
    store.close()


def test_unfinished_calls_of_this_worker_are_marked_aborted(db_url):
    store = open_db(db_url)
    t = dt.datetime.now(dt.UTC)
    store.start_call("CA-mine", caller=None, worker="w1", qa=False, started_at=t)
    store.start_call("CA-other", caller=None, worker="w2", qa=False, started_at=t)
    store.start_call("CA-done", caller=None, worker="w1", qa=False, started_at=t)
    store.end_call("CA-done", reason="completed", ended_at=t)
    assert store.abort_unfinished("w1") == 1
    reasons = {c["call_sid"]: c["end_reason"] for c in store.list_calls()}
    assert reasons == {"CA-mine": "aborted", "CA-other": None, "CA-done": "completed"}
    store.close()


def test_relative_sqlite_paths_resolve_against_the_config_dir(tmp_path):
    url = resolve_url("sqlite:///records/calls.db", tmp_path)
    assert url == f"sqlite:///{tmp_path / 'records' / 'calls.db'}" and (tmp_path / "records").is_dir()
    assert resolve_url("postgresql://u@h/db", tmp_path) == "postgresql+psycopg://u@h/db"
    with pytest.raises(StoreError, match="unsupported database"):
        Store("mysql://u@h/db")


def test_writes_survive_a_database_outage_without_blocking(postgres):
    """PostgreSQL goes down mid-call: submits return at once, writes wait in memory, land on return."""
    from bot.testing.postgres import PostgresServer

    with PostgresServer() as pg:
        store = open_db(pg.create_database("outage"))
        writer = RecordWriter(store, retry_max_secs=0.3)
        writer.submit("start", lambda s: s.start_call("CA1", caller=None, worker="w", qa=False,
                                                      started_at=dt.datetime.now(dt.UTC)))
        assert writer.flush(5)
        pg.halt()
        worst = 0.0
        for i in range(20):
            t = time.perf_counter()
            writer.submit(f"turn {i}", lambda s, i=i: s.save_turn("CA1", {"index": i, "route": "llm"}))
            worst = max(worst, time.perf_counter() - t)
        assert worst < 0.01, f"submit blocked for {worst * 1000:.1f} ms"
        assert not writer.flush(1.0) and writer.outage and writer.pending == 20
        pg.resume()
        assert writer.flush(15), "the writes did not land after the database came back"
        assert not writer.outage and len(store.list_calls()[0]["turns"]) == 20
        writer.close()
        store.close()


def test_a_full_queue_drops_the_oldest_write_loudly(tmp_path):
    store = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    gate = threading.Event()
    writer = RecordWriter(store, max_pending=3)
    writer.submit("blocker", lambda s: gate.wait(5))
    time.sleep(0.1)  # the blocker is running: the queue holds the rest
    for i in range(5):
        writer.submit(f"w{i}", lambda s, i=i: s.save_turn("CA", {"index": i}))
    assert writer.dropped == 2
    gate.set()
    assert writer.flush(5)
    with store.engine.connect() as conn:
        kept = sorted(r[0] for r in conn.execute(sa.select(turns.c.idx)))
    assert kept == [2, 3, 4]
    writer.close()


def test_a_callback_waits_in_the_desks_queue_with_the_callers_number(db_url):
    from zoneinfo import ZoneInfo

    store = open_db(db_url)
    store.start_call("CAcb", caller="+821012345678", worker="w", qa=False, started_at=dt.datetime.now(dt.UTC))
    after = dt.datetime(2026, 9, 28, 9, 0, tzinfo=ZoneInfo("Asia/Seoul"))
    first = store.request_callback(call_sid="CAcb", after=after, reason="closed_transfer")
    second = store.request_callback(call_sid="CAnone", after=after, reason="closed_transfer")
    assert second > first
    rows = store.list_callbacks()
    assert [r["id"] for r in rows] == [first, second]
    assert rows[0]["caller"] == "+821012345678" and rows[1]["caller"] is None  # a call not recorded
    assert rows[0]["call_after"] == after and rows[0]["status"] == "waiting"
    assert store.list_callbacks("done") == []
    store.close()


def test_the_escalation_of_a_turn_is_a_column_the_desk_can_query(db_url):
    store = open_db(db_url)
    store.save_turn("CAe", {"index": 1, "route": "emergency", "escalation": "119", "transcript": "불이 났어요"})
    store.save_turn("CAe", {"index": 2, "route": "llm", "escalation": None})
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(turns.c.idx).where(turns.c.escalation == "119")).all()
    assert [r.idx for r in rows] == [1]
    store.close()
