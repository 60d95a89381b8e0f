"""How the line serves (bot/store/service.py): a scripted set of calls in a records database, and the
per-day figures of ``run_bot.py report``, its CSV, the desk's service page and ``/metrics``."""

from __future__ import annotations

import csv
import datetime as dt
import io
import subprocess
import sys
from zoneinfo import ZoneInfo

import pytest

from bot.store import service
from bot.store.db import Store
from bot.store.schema import tickets
from tests.conftest import ROOT

KST = ZoneInfo("Asia/Seoul")
DAY1, DAY2, DAY3 = dt.date(2026, 11, 30), dt.date(2026, 12, 1), dt.date(2026, 12, 2)
N1, N2, N3, N4, N5, N6, N7 = (f"+8210555{i:05d}" for i in range(1, 8))


def _at(day: dt.date, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour, minute), KST).astimezone(dt.UTC)


def _call(store: Store, sid: str, number: str | None, start: dt.datetime, end: str | None,
          turns: list[dict], *, language: str = "ko", qa: bool = False) -> None:
    store.start_call(sid, caller=number, worker="w1", qa=qa, started_at=start)
    store.save_turn(sid, {"index": 0, "route": "greeting", "language": language, "reply": "안녕하세요"})
    for i, t in enumerate(turns, 1):
        rec = {"index": i, "language": language, "llm_calls": 1 if t.get("route") == "llm" else 0, **t}
        if "v2v" in rec:
            rec["stages_ms"] = {"voice_to_voice": rec.pop("v2v")}
        store.save_turn(sid, rec)
    if end is not None:
        store.end_call(sid, reason=end, ended_at=start + dt.timedelta(minutes=3))


def _ticket(store: Store, sid: str | None, category: str, at: dt.datetime) -> None:
    number = store.create_ticket(call_sid=sid, category=category, location="중앙로", time=None, excerpt="-")
    with store.engine.begin() as conn:
        conn.execute(tickets.update().where(tickets.c.reception_no == number).values(created_at=at))


def script_calls(store: Store) -> None:
    """Two days of the line (KST), and a call on each side of them."""
    _call(store, "CA-before", N1, _at(DAY1, 0) - dt.timedelta(minutes=1), "completed", [{"route": "llm", "v2v": 5000}])
    # Day 1: a caller who calls back (their first call is not resolved), a hand-over asked for in
    # English, an emergency put through to 119.
    _call(store, "CA-1", N1, _at(DAY1, 10), "completed",
          [{"route": "llm", "intent": "bulky_waste", "v2v": 700}, {"route": "rule", "v2v": 900}])
    _call(store, "CA-2", N1, _at(DAY1, 14), "caller_hangup", [{"route": "llm", "v2v": 1500}])  # over 1200 ms
    _call(store, "CA-3", N2, _at(DAY1, 11), "transfer", [{"route": "shortcut", "intent": "transfer", "v2v": 600}],
          language="en")
    _call(store, "CA-4", N3, _at(DAY1, 12), "emergency_transfer",
          [{"route": "emergency", "intent": "emergency", "escalation": "119", "v2v": 500,
            "heard": ["emergency:fire", "emergency:fire"]}])
    _ticket(store, "CA-1", "street_lights", _at(DAY1, 10, 5))
    _ticket(store, "CA-3", "noise", _at(DAY1, 11, 5))
    # Day 2: 00:30 KST is still day 1 in UTC; an abusive end, an idle end, a hand-over after errors from
    # the day-1 caller 25 h after their last call (not a repeat of it), a callback asked for, 112 told,
    # a call still running (its pending turn not counted), a QA-page call (left out).
    _call(store, "CA-5", N4, _at(DAY2, 0, 30), "abusive", [{"route": "llm", "v2v": 800}])
    _call(store, "CA-6", N5, _at(DAY2, 9), "caller_idle", [])
    _call(store, "CA-7", N1, _at(DAY2, 15), "transfer", [{"route": "error", "intent": "transfer", "v2v": 400}])
    _call(store, "CA-8", N6, _at(DAY2, 10), "completed", [{"route": "llm", "v2v": 700}], language="en")
    store.request_callback(call_sid="CA-8", after=_at(DAY2, 18), reason="closed")
    _call(store, "CA-10", N7, _at(DAY2, 16), "completed",
          [{"route": "emergency", "intent": "emergency", "escalation": "112", "v2v": 600,
            "heard": ["emergency:crime", "filler"]}])
    _call(store, "CA-11", None, _at(DAY2, 17), None, [{"route": "pending"}])
    _call(store, "CA-qa", None, _at(DAY2, 11), "completed", [{"route": "llm", "v2v": 3000}], qa=True)
    _ticket(store, "CA-8", "water", _at(DAY2, 10, 5))
    # Day 3: the day-2 caller N7 calls again (a repeat of CA-10, seen past the report's last day).
    _call(store, "CA-after", N7, _at(DAY3, 9), "completed", [])
    _ticket(store, None, "water", _at(DAY3, 9))


@pytest.fixture
def records(db_url):
    """The scripted calls in SQLite, then in the real PostgreSQL server (the line's production database)."""
    from bot.testing.desk_fixtures import open_db

    url = db_url
    store = open_db(url)
    script_calls(store)
    yield store, url
    store.close()


def _days(store: Store) -> list[service.DayFigures]:
    return service.service_days(store, first=DAY1, last=DAY2, tz=KST, budget_ms=1200)


def test_the_per_day_figures_match_the_scripted_calls_exactly(records):
    one, two = _days(records[0])
    assert (one.day, one.calls, one.resolved, one.callbacks, one.repeated) == (DAY1, 4, 1, 0, 1)
    assert one.handovers == {"asked": 1, "emergency": 1} and one.handed_over == 2
    assert one.emergencies == {"119": 1} and one.emergency_kinds == {"fire": 1}  # once per call
    assert one.ends == {"completed": 1, "caller_hangup": 1, "transfer": 1, "emergency_transfer": 1}
    assert (one.abusive, one.idle) == (0, 0)
    assert one.languages == {"ko": 3, "en": 1} and one.tickets == {"street_lights": 1, "noise": 1}
    # 700, 900, 1500, 600, 500: p90 interpolated between 900 and 1500.
    assert (one.turns, one.v2v_p90_ms, one.over_budget) == (5, pytest.approx(1260.0), 1)

    # CA-10 is resolved by the day-2 figures alone... but N7 called again the next morning.
    assert (two.day, two.calls, two.resolved, two.callbacks, two.repeated) == (DAY2, 6, 0, 1, 1)
    assert two.handovers == {"errors": 1} and two.emergencies == {"112": 1} and two.emergency_kinds == {"crime": 1}
    assert two.ends == {"abusive": 1, "caller_idle": 1, "transfer": 1, "completed": 2, "running": 1}
    assert (two.abusive, two.idle) == (1, 1)
    assert two.languages == {"ko": 5, "en": 1} and two.tickets == {"water": 1}
    assert (two.turns, two.v2v_p90_ms, two.over_budget) == (4, pytest.approx(770.0), 0)


def test_a_day_with_no_calls_is_a_row_of_zeros_and_a_bad_range_is_refused(records):
    (empty,) = service.service_days(records[0], first=dt.date(2026, 11, 1), last=dt.date(2026, 11, 1), tz=KST,
                                    budget_ms=1200)
    assert (empty.calls, empty.resolved, empty.turns, empty.v2v_p90_ms, empty.resolved_share) == (0, 0, 0, None, None)
    with pytest.raises(ValueError, match="before --from"):
        service.service_days(records[0], first=DAY2, last=DAY1, tz=KST, budget_ms=1200)
    with pytest.raises(ValueError, match="not a date"):
        service.parse_day("2026-13-01", "--from")


def test_an_end_reason_nobody_told_this_module_about_is_counted_and_not_called_resolved(records):
    store = records[0]
    _call(store, "CA-new", "+821099999999", _at(DAY1, 20), "operator_hung_up", [{"route": "llm", "v2v": 500}])
    one = _days(store)[0]
    assert one.ends["operator_hung_up"] == 1 and (one.calls, one.resolved) == (5, 1)
    assert "ends_operator_hung_up" in service.columns([one])


def test_the_csv_has_a_row_a_day_and_a_column_per_reason(records):
    rows = list(csv.DictReader(io.StringIO(service.to_csv(_days(records[0])))))
    assert [r["day"] for r in rows] == ["2026-11-30", "2026-12-01"]
    one, two = rows
    assert (one["calls"], one["resolved"], one["resolved_share"], one["handed_over"]) == ("4", "1", "0.250", "2")
    assert (one["handovers_asked"], one["handovers_emergency"], one["handovers_errors"]) == ("1", "1", "0")
    assert (two["handovers_errors"], two["emergencies_112"], two["emergencies_119"]) == ("1", "1", "0")
    assert (one["kind_fire"], one["kind_crime"], two["kind_crime"]) == ("1", "0", "1")
    assert (two["abusive"], two["idle"], two["ends_running"], two["languages_en"]) == ("1", "1", "1", "1")
    assert (one["tickets_street_lights"], two["tickets_water"], one["v2v_p90_ms"], two["over_budget"]) == (
        "1", "1", "1260", "0")


def _report(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), "report", "--set", f"records.url='{url}'", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_run_bot_report_prints_the_table_and_the_csv(records):
    _, url = records
    text = _report(url, "--from", "2026-11-30", "--to", "2026-12-01")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    day1 = next(line for line in lines if line.startswith("| 2026-11-30"))
    assert [c.strip() for c in day1.strip("|").split("|")][:6] == ["2026-11-30", "4", "1", "25%", "2",
                                                                   "asked:1 emergency:1"]
    assert "2 day(s): 10 call(s), 1 resolved by the bot alone (10%), 3 handed over" in text.stdout
    as_csv = _report(url, "--from", "2026-11-30", "--to", "2026-12-01", "--csv")
    assert as_csv.returncode == 0 and as_csv.stdout == service.to_csv(_days(records[0]))
    bad = _report(url, "--from", "2026-12-01", "--to", "2026-11-30")
    assert bad.returncode == 2 and "before --from" in bad.stderr


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples if s.name.startswith("voice_line_")}


def test_metrics_carry_the_same_counts_and_a_refresh_leaves_no_stale_series(records):
    from prometheus_client import CollectorRegistry, generate_latest

    from bot.telemetry.service_metrics import ServiceGauges

    one, two = _days(records[0])
    registry = CollectorRegistry()
    gauges = ServiceGauges(registry)
    gauges.set_days({"yesterday": one, "today": two})
    got = _samples(generate_latest(registry).decode())
    y, t = (("day", "yesterday"),), (("day", "today"),)
    assert got[("voice_line_calls", y)] == 4 and got[("voice_line_calls", t)] == 6
    assert got[("voice_line_calls_resolved", y)] == 1 and got[("voice_line_calls_resolved", t)] == 0
    assert got[("voice_line_handovers", (("day", "yesterday"), ("why", "asked")))] == 1
    assert got[("voice_line_handovers", (("day", "today"), ("why", "errors")))] == 1
    assert got[("voice_line_handovers", (("day", "today"), ("why", "asked")))] == 0
    assert got[("voice_line_emergencies", (("day", "yesterday"), ("number", "119")))] == 1
    assert got[("voice_line_emergency_kinds", (("day", "today"), ("kind", "crime")))] == 1
    assert got[("voice_line_call_ends", (("day", "today"), ("reason", "abusive")))] == 1
    assert got[("voice_line_call_ends", (("day", "today"), ("reason", "caller_idle")))] == 1
    assert got[("voice_line_call_languages", (("day", "today"), ("language", "en")))] == 1
    assert got[("voice_line_tickets", (("category", "street_lights"), ("day", "yesterday")))] == 1
    assert got[("voice_line_voice_to_voice_p90_ms", y)] == pytest.approx(1260.0)
    assert got[("voice_line_turns_over_budget", y)] == 1
    gauges.set_days({"today": service.DayFigures(DAY3)})  # the next day: yesterday's reasons are gone
    got = _samples(generate_latest(registry).decode())
    assert ("voice_line_emergencies", (("day", "yesterday"), ("number", "119"))) not in got
    assert got[("voice_line_calls", t)] == 0 and ("voice_line_calls", y) not in got


def test_the_servers_metrics_read_today_from_the_records(tmp_path):
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from bot.app.server import create_app
    from bot.config import Secrets, load_config
    from bot.store.calls import CallLog

    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=false",
                                    f"records.url='sqlite:///{tmp_path / 'calls.db'}'", "tts.require_provider='cpu'"])
    tts = SimpleNamespace(session_providers={"text_encoder": ["CPUExecutionProvider"]}, fallback_active=False,
                          is_standin=False)
    models = SimpleNamespace(tts=tts, whisper=SimpleNamespace(device="cpu"), self_timing=None)
    records = CallLog.open(config)
    try:
        now = dt.datetime.now(dt.UTC)
        _call(records.store, "CA-now", N1, now, "abusive", [{"route": "llm", "v2v": 700}])
        _call(records.store, "CA-now2", N2, now, "completed", [{"route": "llm", "v2v": 900}])
        app = create_app(config, Secrets("AC" + "0" * 32, "token", "EMPTY"), models, records=records)
        got = _samples(TestClient(app.state.admin_app).get("/metrics").text)
        t = (("day", "today"),)
        assert got[("voice_line_calls", t)] == 2 and got[("voice_line_calls_resolved", t)] == 1
        assert got[("voice_line_call_ends", (("day", "today"), ("reason", "abusive")))] == 1
        assert got[("voice_line_voice_to_voice_p90_ms", t)] == pytest.approx(880.0)
        assert got[("voice_line_calls", (("day", "yesterday"),))] == 0
    finally:
        records.writer.close()
