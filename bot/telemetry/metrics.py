"""Process-wide latency metrics in Prometheus format (``GET /metrics``).

Histograms for alerting and aggregation across processes, plus exact p50/p90/p99 over the
most recent turns (computed from the same turn records as the per-call tables).
"""

from __future__ import annotations

from collections import deque

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.config import LatencyConfig
from bot.telemetry.latency import STAGES, TurnRecord, summarize

BUCKETS_MS = (25, 50, 100, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 3000, 5000, 10000)


class ProcessMetrics:
    def __init__(self, budgets: LatencyConfig, window: int = 2000):
        self._budgets = budgets
        self.registry = CollectorRegistry()
        self._recent: deque[TurnRecord] = deque(maxlen=window)
        r = self.registry
        self.active_calls = Gauge("voice_active_calls", "Calls in progress", registry=r)
        self.calls_total = Counter("voice_calls", "Calls started", registry=r)
        self.turns = Counter("voice_turns", "Turns answered, by route", ["route"], registry=r)
        self.llm_calls = Counter("voice_llm_calls", "LLM requests made", registry=r)
        self.escalations = Counter("voice_escalations", "Emergency turns, by the number the caller was told",
                                   ["number"], registry=r)
        self.over_budget = Counter("voice_turns_over_budget", "Turns whose stage exceeded its budget", ["stage"], registry=r)
        self.stage_ms = Histogram("voice_stage_latency_ms", "Per-stage latency (ms)", ["stage"], buckets=BUCKETS_MS, registry=r)
        self.loop_lag_ms = Gauge("voice_event_loop_lag_ms", "Event-loop timer lateness (ms)", ["quantile"], registry=r)
        self.quantile_ms = Gauge(
            "voice_stage_latency_recent_ms", f"Exact percentiles over the last {window} turns", ["stage", "quantile"], registry=r
        )

    def call_started(self) -> None:
        self.calls_total.inc()
        self.active_calls.inc()

    def call_finished(self, records: list[TurnRecord]) -> None:
        self.active_calls.dec()
        budgets = {name: getattr(self._budgets, key) for name, _, _, key in STAGES if key}
        for rec in records:
            if rec.route in ("greeting", "pending"):
                continue
            self._recent.append(rec)
            self.turns.labels(rec.route).inc()
            self.llm_calls.inc(rec.llm_calls)
            if rec.escalation:
                self.escalations.labels(rec.escalation).inc()
            for stage, ms in rec.stages_ms().items():
                self.stage_ms.labels(stage).observe(ms)
                if stage in budgets and ms > budgets[stage]:
                    self.over_budget.labels(stage).inc()

    def render(self, loop_lag: dict | None = None) -> tuple[bytes, str]:
        if loop_lag and loop_lag.get("n"):
            self.loop_lag_ms.labels("0.5").set(loop_lag["p50_ms"])
            self.loop_lag_ms.labels("0.99").set(loop_lag["p99_ms"])
        for row in summarize(list(self._recent), self._budgets):
            if row.n:
                for q, v in (("0.5", row.p50), ("0.9", row.p90), ("0.99", row.p99)):
                    self.quantile_ms.labels(row.stage, q).set(v)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
