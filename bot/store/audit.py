"""The access audit as the law asks for it (issue 47): kept ``desk.audit_retention_days``, reviewed monthly.

The rows are ``recording_access``'s (bot/store/recordings.py writes them): every playback, copy, download,
export and opening of a call, and every refused attempt, with who, when, from where and the reason given.
The records' retention (``records.retention_days``, ``recording.retention_days``) never removes them;
``purge_audit`` does, past their own period. ``monthly_review`` is what ``run_bot.py audit --month`` and the
desk's /desk/audit show: the month's rows, counts, and the unusual ones (an account opening many calls in a
day, access outside the line's hours, refusals). Blocking, like the rest of bot/store.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from loguru import logger

from bot.store.db import Store, StoreError, now
from bot.store.schema import RECORDING_ACTIONS, recording_access

# How the desk and ``run_bot.py audit`` name each action and refusal.
ACTION_LABELS = {"play": "재생", "copy": "전체 복사", "download": "내려받기", "export": "반출",
                 "export_unmasked": "반출(번호 가림 없음)", "view": "열람"}
REFUSAL_LABELS = {"anonymous": "로그인 없음", "other_department": "다른 부서", "no_such_call": "없는 통화",
                  "deleted": "녹음 삭제됨", "no_reason": "사유 없음"}


def purge_audit(store: Store, older_than_days: float) -> int:
    """Delete access rows older than ``older_than_days`` (0: none); returns how many."""
    if older_than_days <= 0:
        return 0
    cutoff = now() - dt.timedelta(days=older_than_days)
    with store.engine.begin() as conn:
        n = conn.execute(recording_access.delete().where(recording_access.c.at < cutoff)).rowcount or 0
    if n:
        logger.info("records: deleted {} access audit row(s) older than {} days (desk.audit_retention_days)", n,
                    older_than_days)
    return n


def month_bounds(month: str, tz: dt.tzinfo) -> tuple[dt.datetime, dt.datetime]:
    """``YYYY-MM`` as [start, end) in the line's time zone; raises StoreError for anything else."""
    try:
        first = dt.datetime.strptime(month.strip(), "%Y-%m").replace(tzinfo=tz)
    except ValueError:
        raise StoreError(f"--month {month!r}: expected YYYY-MM (e.g. 2026-11)") from None
    nxt = first.replace(year=first.year + (first.month == 12), month=first.month % 12 + 1)
    return first, nxt


def monthly_review(store: Store, month: str, *, tz: dt.tzinfo, is_open: Callable[[dt.datetime], bool],
                   many_calls: int) -> dict[str, Any]:
    """The month's access rows (oldest first) and what a reviewer looks at: counts per action, per account the
    calls it opened, and the unusual rows: ``many_calls`` (an account opening more than ``many_calls`` calls in
    one local day), ``after_hours`` (served outside ``is_open``: the line's hours and holidays), ``refused``."""
    start, end = month_bounds(month, tz)
    ra = recording_access.c
    with store.engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(sa.select(recording_access).where(
            ra.at >= start.astimezone(dt.UTC), ra.at < end.astimezone(dt.UTC)).order_by(ra.at, ra.id)).mappings()]
    for r in rows:
        r["at"] = (r["at"].replace(tzinfo=dt.UTC) if r["at"].tzinfo is None else r["at"]).astimezone(tz)
    served = [r for r in rows if r["refused"] is None]
    counts = Counter(r["action"] for r in served)
    calls_by_account: dict[str, set[str]] = defaultdict(set)
    per_day: dict[tuple[str, dt.date], set[str]] = defaultdict(set)
    for r in served:
        calls_by_account[r["actor"]].add(r["call_sid"])
        per_day[(r["actor"], r["at"].date())].add(r["call_sid"])
    unusual: list[dict[str, Any]] = [
        {"kind": "many_calls", "actor": actor, "day": day, "calls": len(sids)}
        for (actor, day), sids in sorted(per_day.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        if len(sids) > many_calls]
    unusual += [{"kind": "after_hours", **r} for r in served if not is_open(r["at"])]
    unusual += [{"kind": "refused", **r} for r in rows if r["refused"] is not None]
    return {"month": month, "start": start, "end": end, "rows": rows,
            "counts": {a: counts.get(a, 0) for a in RECORDING_ACTIONS}, "refused": len(rows) - len(served),
            "accounts": sorted(((a, len(s)) for a, s in calls_by_account.items()), key=lambda x: (-x[1], x[0])),
            "unusual": unusual, "many_calls": many_calls}
