"""The monthly review of the access audit from the command line (PIPA security standard art. 8; issue 47).

    run_bot.py audit --month 2026-11 [--json]

Counts of playback, copies, downloads, exports and openings of calls in the month (the line's time zone),
calls opened per account, and what to look at: an account opening more than ``desk.review_many_calls`` calls
in a day, access outside the line's hours (``line.hours``, holidays closed), refused attempts; then every
row. The desk shows the same at /desk/audit (admins).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from bot.config import Config
from bot.dialog.calendar import Hours, LineCalendar
from bot.privacy import mask
from bot.store.audit import ACTION_LABELS as LABELS
from bot.store.audit import REFUSAL_LABELS as REFUSALS
from bot.store.audit import monthly_review
from bot.store.db import StoreError, open_store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--month", required=True, metavar="YYYY-MM", help="the month to review (the line's time zone)")
    p.add_argument("--json", action="store_true", help="the review as JSON")


def run_audit(config: Config, args, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr  # at call time: a caller (or a test) may have replaced them
    line = config.line
    hours = LineCalendar(Hours.parse(line.hours, key="line.hours"), tz=line.timezone,
                         extra_closed=line.extra_closed_days)
    store = open_store(config)
    try:
        review = monthly_review(store, args.month, tz=ZoneInfo(line.timezone), is_open=hours.is_open,
                                many_calls=config.desk.review_many_calls)
    except StoreError as e:
        err.write(f"error: {e}\n")
        return 2
    finally:
        store.close()
    if args.json:
        out.write(json.dumps(review, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        out.write(render(review))
    return 0


def _what(r: dict[str, Any]) -> str:
    return f"거부: {REFUSALS.get(r['refused'], r['refused'])}" if r["refused"] else LABELS.get(r["action"], r["action"])


def render(review: dict[str, Any]) -> str:
    counts = " · ".join(f"{LABELS[a]} {n}" for a, n in review["counts"].items())
    lines = [f"접속 기록 월간 점검 {review['month']} ({review['start']:%Y-%m-%d} ~ {review['end']:%Y-%m-%d}, "
             f"{review['start'].tzinfo})", f"{counts} · 거부 {review['refused']}", "", "살펴볼 기록:"]
    for u in review["unusual"]:
        if u["kind"] == "many_calls":
            lines.append(f"  {u['day']}  {u['actor']}  하루에 통화 {u['calls']}건 열람 ({review['many_calls']}건 초과)")
        else:
            why = _what(u) if u["kind"] == "refused" else f"근무 시간 밖: {_what(u)}"
            lines.append(f"  {u['at']:%Y-%m-%d %H:%M}  {u['actor']}  {why}  {mask(u['call_sid'])}  "
                         f"{u['address'] or '명령줄'}")
    if not review["unusual"]:
        lines.append("  없음")
    lines += ["", "직원별 열람 통화 수:"] + [f"  {a}  {n}" for a, n in review["accounts"]]
    lines += ["", f"모든 기록 ({len(review['rows'])}건):"]
    for r in review["rows"]:
        lines.append(f"  {r['at']:%Y-%m-%d %H:%M:%S}  {r['actor']}  {_what(r)}  {mask(r['call_sid'])}"
                     f"{'  ' + r['reception_no'] if r['reception_no'] else ''}  {r['address'] or '명령줄'}"
                     f"{'  사유: ' + mask(r['reason']) if r['reason'] else ''}")
    return "\n".join(lines) + "\n"
