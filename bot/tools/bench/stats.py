"""Distributions of a bench run: per-stage figures joined from caller and server."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bot.telemetry.latency import GREETING_STAGE, TurnRecord, percentile
from bot.tools.bench.runner import RunResult, to_record


def _dist(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values) if values else math.nan}


def _f(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, (int, float)) else str(v)


@dataclass
class RunStats:
    """Everything the report says about one run, computed once."""

    run: RunResult
    rows: list[dict]
    records: list[TurnRecord]  # server turns (greetings excluded)
    caller_ttfa: list[float]  # caller TTFA (ms) of answered turns not cut off
    v2v: list[float]

    @classmethod
    def of(cls, run: RunResult) -> RunStats:
        rows = run.rows()
        records = [to_record(r["server"]) for r in rows if r["server"] is not None]
        ttfa = [r["caller"]["caller_ttfa_ms"] for r in rows if r["caller"] and r["caller"]["caller_ttfa_ms"] is not None
                and not r["caller"]["cut_off_early"]]
        v2v = [rec.stages_ms()["voice_to_voice"] for rec in records if "voice_to_voice" in rec.stages_ms()]
        return cls(run, rows, records, ttfa, v2v)

    def caller_turns(self) -> list[dict]:
        return [r["caller"] for r in self.rows if r["caller"] is not None]

    def greeting_server(self) -> list[float]:
        """Server side, per call: media stream start -> the greeting's first audio out (ms)."""
        ids = {c.call_id for c in self.run.calls}
        stages = [to_record(t).stages_ms() for t in self.run.server_turns
                  if t.get("route") == "greeting" and t.get("call_id") in ids]
        return [st[GREETING_STAGE] for st in stages if GREETING_STAGE in st]

    def greeting_caller(self) -> list[float]:
        """Caller side, per call: media stream opened -> the first audible greeting audio (ms)."""
        return [c.greeting_ms for c in self.run.calls if c.greeting_ms is not None]




def calls_per_worker(run: RunResult) -> Counter:
    """How many of the run's calls each worker ran (from the server records; several workers behind a proxy)."""
    worker_of = {t.get("call_id"): t.get("worker") for t in run.server_turns if t.get("worker")}
    return Counter(worker_of.values())
