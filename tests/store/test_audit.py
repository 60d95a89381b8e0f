"""Issue 47 part 4: access logs as the law asks (PIPA security standard art. 8).

The access audit outlives the records' retention (a moved clock), its own period is at least a year, every
export and desk download asks a reason and keeps it, and the monthly review (``run_bot.py audit --month``,
/desk/audit) lists downloads, playback, exports and the unusual: an account opening many calls in a day,
access outside the line's hours, refusals.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from bot.config import ConfigError, load_config
from bot.store import audit, db, recordings
from bot.store.db import Store
from bot.store.schema import recording_access

KST = ZoneInfo("Asia/Seoul")
REAL_NOW = db.now


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'calls.db'}")
    s.migrate()
    yield s
    s.close()


def move_clock(monkeypatch, days: float) -> None:
    """Every ``now`` of the records' modules ``days`` ahead."""
    later = lambda: REAL_NOW() + dt.timedelta(days=days)
    for module in ("bot.store.db", "bot.store.recordings", "bot.store.audit", "bot.store.calls"):
        monkeypatch.setattr(f"{module}.now", later)


def test_the_access_audit_outlives_the_records_retention_and_goes_after_its_own_period(store, monkeypatch):
    from bot.store.calls import CallLog

    store.start_call("CA1", caller=None, worker="w", qa=False, started_at=dt.datetime.now(dt.UTC))
    store.save_turn("CA1", {"index": 1, "route": "llm", "transcript": "가로등이 꺼졌어요"})
    recordings.note_access(store, "CA1", actor="kim", action="play", address="10.0.0.1")
    recordings.note_access(store, "CA1", actor="lee", action="export", reason="정보공개 청구")
    config = load_config(None, [f"records.url='{store.engine.url}'", "records.retention_days=30",
                                "recording.retention_days=90"])
    log = CallLog(store, worker="w", retention_days=config.records.retention_days)
    log.audit_retention_days = config.desk.audit_retention_days
    assert log.audit_retention_days == 730
    try:
        move_clock(monkeypatch, 400)  # past the records' retention, within the audit's
        log.apply_retention()
        assert recordings.call_transcript(store, "CA1") == []  # the words went
        assert [r["actor"] for r in recordings.access_log(store, "CA1")] == ["kim", "lee"]  # who read them stays
        move_clock(monkeypatch, 731)
        log.apply_retention()
        assert recordings.access_log(store, "CA1") == []
    finally:
        log.writer.close()


def test_the_audit_is_kept_at_least_a_year_or_forever():
    with pytest.raises(ConfigError, match="desk.audit_retention_days"):
        load_config(None, ["desk.audit_retention_days=90"])
    assert load_config(None, ["desk.audit_retention_days=0"]).desk.audit_retention_days == 0
    assert load_config(None, ["desk.audit_retention_days=365"]).desk.audit_retention_days == 365


def test_an_export_without_a_reason_is_refused_and_its_reason_is_audited(tmp_path, capsys):
    import numpy as np
    import soundfile as sf

    from bot.recording import files
    from bot.recording.recorder import recording_path
    from bot.tools.recording import run

    config = load_config(None, [f"records.url='sqlite:///{tmp_path / 'calls.db'}'", f"recording.dir='{tmp_path}'"])
    store = Store(f"sqlite:///{tmp_path / 'calls.db'}")
    store.migrate()
    path = recording_path(tmp_path, "CAr", "opus", when=0)
    path.parent.mkdir(parents=True)
    sf.write(path, np.zeros((800, 2), dtype=np.int16), 8000, format="OGG", subtype="OPUS")
    store.start_call("CAr", caller=None, worker="w", qa=False, started_at=dt.datetime.now(dt.UTC))
    recordings.set_recording(store, "CAr", files.relative(tmp_path, path), 0.1)
    try:
        for reason in ("", "   "):
            args = SimpleNamespace(action="export", call_sid="CAr", dir=str(tmp_path / "out"), actor="kim",
                                   unmasked=False, reason=reason)
            assert run(config, args, io.StringIO()) == 2
            assert "--reason" in capsys.readouterr().err and not (tmp_path / "out").exists()
        assert recordings.access_log(store, "CAr") == []
        args.reason = "정보공개 청구 2026-118"
        assert run(config, args, io.StringIO()) == 0
        (row,) = recordings.access_log(store, "CAr")
        assert (row["actor"], row["action"], row["reason"]) == ("kim", "export", "정보공개 청구 2026-118")
    finally:
        store.close()


# --- the monthly review ----------------------------------------------------------------------------


def _row(store: Store, at: dt.datetime, actor: str, action: str, call: str, **kw) -> None:
    with store.engine.begin() as conn:
        conn.execute(recording_access.insert().values(call_sid=call, at=at.astimezone(dt.UTC), actor=actor,
                                                      action=action, **kw))


def seed_month(store: Store) -> None:
    """November 2026 in Seoul: kim opens three calls on Tuesday the 3rd; lee downloads one with a reason on a
    Saturday night; park exports one; a water clerk is refused another department's call; one row in October."""
    tue = dt.datetime(2026, 11, 3, 10, 0, tzinfo=KST)
    for i, sid in enumerate(("CA1", "CA2", "CA3")):
        _row(store, tue + dt.timedelta(minutes=i), "kim", "play", sid, address="10.0.0.5")
    _row(store, dt.datetime(2026, 11, 7, 23, 30, tzinfo=KST), "lee", "download", "CA1", address="10.0.0.6",
         reason="민원 회신")
    _row(store, dt.datetime(2026, 11, 10, 14, 0, tzinfo=KST), "park", "export", "CA2", reason="정보공개 청구")
    _row(store, dt.datetime(2026, 11, 12, 11, 0, tzinfo=KST), "water1", "copy", "CA3", address="10.0.0.7",
         refused="other_department")
    _row(store, dt.datetime(2026, 10, 31, 10, 0, tzinfo=KST), "kim", "play", "CA9")


def test_the_monthly_review_counts_and_flags_the_unusual(store):
    from bot.dialog.calendar import Hours, LineCalendar

    seed_month(store)
    cal = LineCalendar(Hours.parse(["mon-fri 09:00-18:00"]), tz="Asia/Seoul")
    review = audit.monthly_review(store, "2026-11", tz=KST, is_open=cal.is_open, many_calls=2)
    assert len(review["rows"]) == 6 and review["refused"] == 1
    assert {k: v for k, v in review["counts"].items() if v} == {"play": 3, "download": 1, "export": 1}
    assert review["accounts"] == [("kim", 3), ("lee", 1), ("park", 1)]
    kinds = [(u["kind"], u["actor"]) for u in review["unusual"]]
    assert kinds == [("many_calls", "kim"), ("after_hours", "lee"), ("refused", "water1")]
    with pytest.raises(Exception, match="YYYY-MM"):
        audit.monthly_review(store, "November", tz=KST, is_open=cal.is_open, many_calls=2)


def test_run_bot_audit_month_prints_the_review(store, capsys):
    import run_bot

    seed_month(store)
    url = str(store.engine.url)
    assert run_bot.main(["audit", "--month", "2026-11", "--set", f"records.url='{url}'",
                         "--set", "desk.review_many_calls=2"]) == 0
    out = capsys.readouterr().out
    assert "2026-11" in out and "재생 3" in out and "내려받기 1" in out and "반출 1" in out and "거부 1" in out
    assert re.search(r"kim .*하루에 통화 3건", out), out
    assert re.search(r"lee .*근무 시간 밖", out) and "민원 회신" in out
    assert re.search(r"water1 .*거부: 다른 부서", out)
    assert "CA9" not in out  # October's
    assert run_bot.main(["audit", "--month", "2026-13", "--set", f"records.url='{url}'"]) == 2
    assert "YYYY-MM" in capsys.readouterr().err
