"""Issue 46: a call's media streams in the records (``bot/store/segments.py``), on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bot.recording.recorder import start_recording
from bot.store import segments
from bot.store.calls import CallLog
from bot.store.db import Store

SID = "CA" + "4" * 32


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def open_db(url: str) -> Store:
    store = Store(url)
    store.migrate()
    return store


def test_a_bot_end_written_before_the_close_outlives_the_plain_end_written_after(db_url):
    store = open_db(db_url)
    segments.open_segment(store, SID, 0, worker="w0", started_at=now())
    segments.end_segment(store, SID, 0, reason="completed", bot_ended=True)
    segments.end_segment(store, SID, 0, reason="stream_closed", bot_ended=False)  # the pipeline's own end, after
    ended = segments.take_action(store, SID, 0)
    assert ended is not None and ended.bot_ended and ended.end_reason == "completed"
    assert segments.take_action(store, SID, 0) is None  # Twilio asks once per stream: a second ask is a replay
    store.close()


def test_an_action_about_a_stream_that_never_started_is_answered_once(db_url):
    store = open_db(db_url)
    ended = segments.take_action(store, SID, 0)
    assert ended is not None and not ended.started and not ended.bot_ended
    assert segments.take_action(store, SID, 0) is None
    store.close()


def test_faults_before_count_the_streams_lost_not_the_hand_overs(db_url):
    store = open_db(db_url)
    for idx, reason in enumerate((segments.HANDOVER, None, segments.HANDOVER)):
        segments.open_segment(store, SID, idx, worker=f"w{idx}", started_at=now())
        if reason:
            segments.end_segment(store, SID, idx, reason=reason, bot_ended=False)
        assert segments.take_action(store, SID, idx) is not None
    segments.open_segment(store, SID, 3, worker="w3", started_at=now())
    ended = segments.take_action(store, SID, 3)
    assert ended is not None and ended.faults_before == 1  # stream 1 died; 0 and 2 were handed over
    store.close()


def test_a_resumed_stream_moves_the_call_to_its_worker_so_the_dead_ones_restart_leaves_it_running(db_url):
    store = open_db(db_url)
    store.start_call(SID, caller="+821012345678", worker="w0", qa=False, started_at=now())
    segments.open_segment(store, SID, 0, worker="w0", started_at=now())
    segments.open_segment(store, SID, 1, worker="w1", started_at=now())  # w0 was killed; w1 took the call
    assert store.abort_unfinished("w0") == 0  # w0 starts again: the call is not its any more
    (call,) = store.list_calls()
    assert call["worker"] == "w1" and call["ended_at"] is None
    assert segments.call_caller(store, SID) == "+821012345678"
    assert [(s["idx"], s["worker"]) for s in segments.list_segments(store, SID)] == [(0, "w0"), (1, "w1")]
    store.close()


async def test_a_resumed_streams_recording_is_a_file_of_its_own_noted_on_its_segment(db_url, tmp_path: Path):
    store = open_db(db_url)
    log = CallLog(store, worker="w1")
    store.start_call(SID, caller=None, worker="w0", qa=False, started_at=now())
    segments.open_segment(store, SID, 1, worker="w1", started_at=now())
    first = start_recording(_config(), tmp_path, SID, rate=8000).recording.path
    second = start_recording(_config(), tmp_path, SID, rate=8000, segment=1).recording.path
    assert first.name == f"{SID}.opus" and second.name == f"{SID}-1.opus"  # never the first one overwritten
    log.recording(SID, "2026/12/05/x-1.opus", segment=1)
    await log.aclose()
    store = Store(db_url)
    (seg,) = segments.list_segments(store, SID)
    (call,) = store.list_calls()
    assert seg["recording_path"] == "2026/12/05/x-1.opus" and call["recording_path"] is None
    store.close()


def _config():
    from bot.config import load_config

    return load_config().recording


def test_retention_deletes_a_resumed_streams_recording_with_the_calls_unless_held(db_url, tmp_path: Path):
    from bot.store.recordings import purge_recordings

    store = open_db(db_url)
    old = now() - dt.timedelta(days=90)
    for sid, hold in ((SID, False), ("CA" + "5" * 32, True)):
        store.start_call(sid, caller=None, worker="w0", qa=False, started_at=old)
        segments.open_segment(store, sid, 1, worker="w1", started_at=old)
        (tmp_path / f"{sid}-1.opus").write_bytes(b"OggS")
        segments.set_segment_recording(store, sid, 1, f"{sid}-1.opus")
        if hold:
            number = store.create_ticket(call_sid=sid, category="street_lights", location=None, time=None,
                                         excerpt="-")
            with store.engine.begin() as conn:
                conn.exec_driver_sql("UPDATE tickets SET legal_hold = true WHERE reception_no = %s"
                                     if store.backend == "postgresql" else
                                     "UPDATE tickets SET legal_hold = 1 WHERE reception_no = ?", (number,))
    purge_recordings(store, tmp_path, 60)
    assert not (tmp_path / f"{SID}-1.opus").exists() and segments.list_segments(store, SID)[0]["recording_path"] is None
    held = "CA" + "5" * 32
    assert (tmp_path / f"{held}-1.opus").exists() and segments.list_segments(store, held)[0]["recording_path"]
    store.close()
