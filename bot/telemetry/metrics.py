"""Process-wide latency metrics in Prometheus format (``GET /metrics``).

Histograms for alerting and aggregation across processes, plus exact p50/p90/p99 over the
most recent turns (computed from the same turn records as the per-call tables).
"""

from __future__ import annotations

from collections import deque

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.config import LatencyConfig
from bot.telemetry.latency import AUDIBLE_STAGE, GREETING_BUDGET_MS, GREETING_STAGE, STAGES, TurnRecord, summarize

BUCKETS_MS = (25, 50, 100, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 3000, 5000, 10000)
DEAD_AIR_MS = 2000.0  # first audio later than this after the caller went quiet: dead air on the line

# Short stable labels for ``voice_escape_hatch{hatch}``: the start of each description bot/ops/hatches.py writes.
HATCH_LABELS = (
    ("twilio.validate_signature=false", "signature_check_off"),
    ("QA page open without a token", "qa_page_open"),
    ("vLLM --enforce-eager", "vllm_enforce_eager"),
    ("TensorRT disabled for TTS", "tts_tensorrt_off"),
    ("tts.allow_fallback=true", "tts_fallback_allowed"),
    ("TTS provider FALLBACK active", "tts_fallback_active"),
    ("TTS model is a STAND-IN", "tts_standin"),
    ("STT is a FIXED-DELAY TEST ENGINE", "stt_fixed_delay"),
    ("STT on CPU", "stt_cpu"),
    ("STT asked for", "stt_cpu_fallback"),
)


def hatch_label(description: str) -> str:
    """The short label of an escape hatch description (an unknown one: its first words, as a slug)."""
    for prefix, label in HATCH_LABELS:
        if description.startswith(prefix):
            return label
    return "_".join("".join(c if c.isalnum() else " " for c in description.lower()).split()[:4]) or "unknown"


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
        # For the alert rules (deploy/alerts.yaml): budgets, dead air, providers, hatches, transfers, records queue.
        self.budget_ms = Gauge("voice_stage_budget_ms", "Latency budget of a stage (ms, [latency])", ["stage"], registry=r)
        for name, _, _, key in STAGES:
            if key:
                self.budget_ms.labels(name).set(getattr(budgets, key))
        self.budget_ms.labels(GREETING_STAGE).set(GREETING_BUDGET_MS)  # the VoiceGreetingSlow alert's line
        for stage in (GREETING_STAGE, AUDIBLE_STAGE):
            self.stage_ms.labels(stage)  # exported from the start, like the stages every turn has
        self._greeted: set[str] = set()  # calls whose greeting ``greeting_sent`` observed
        self.backchannels = Counter("voice_backchannels", "Caller backchannels over the bot's speech (neither "
                                    "interruptions nor turns)", registry=r)
        self.dead_air = Counter("voice_dead_air_turns", f"Turns whose first audio came over {DEAD_AIR_MS / 1000:.0f} s "
                                "after the caller stopped", registry=r)
        self.transfers = Counter("voice_transfers", "Calls handed over at their end (desk: to staff; emergency: to "
                                 "an emergency number)", ["to"], registry=r)
        for to in ("desk", "emergency"):
            self.transfers.labels(to)  # exported at 0 from the start: the first transfer is a visible increase
        self.turns.labels("error")  # likewise the first apology
        self.resumes = Counter("voice_calls_resumed", "Media streams resumed on a live worker after they ended "
                               "without the bot ending the call (issue 46), by how the stream ended", ["why"],
                               registry=r)
        self.onnx_provider_ok = Gauge("voice_onnx_provider_ok", "1 when the ONNX session runs on tts.require_provider",
                                      ["session"], registry=r)
        self.escape_hatch = Gauge("voice_escape_hatch", "1 per escape hatch active (bot/ops/hatches.py)", ["hatch"],
                                  registry=r)
        self.records_pending = Gauge("voice_records_queue_pending", "Record writes waiting for the database",
                                     registry=r)

    def set_onnx_providers(self, session_providers: dict[str, list[str]], required: str) -> None:
        """``required``: onnxruntime's name of ``tts.require_provider`` (e.g. ``TensorrtExecutionProvider``)."""
        for session, providers in session_providers.items():
            self.onnx_provider_ok.labels(session).set(1 if providers and providers[0] == required else 0)

    def set_escape_hatches(self, hatches: list[str]) -> None:
        for h in hatches:
            self.escape_hatch.labels(hatch_label(h)).set(1)

    def call_resumed(self, why: str) -> None:
        self.resumes.labels(why).inc()

    def call_transferred(self, to: str) -> None:
        self.transfers.labels(to).inc()

    def call_started(self) -> None:
        self.calls_total.inc()
        self.active_calls.inc()

    def greeting_sent(self, rec: TurnRecord) -> None:
        """The greeting's first audio went out (``CallRecorder.on_greeting``): media stream start -> it,
        as ``voice_stage_latency_ms{stage="greeting"}``. Observed now rather than when the call ends,
        so a slow greeting reaches the alert while callers still hear it."""
        ms = rec.stages_ms().get(GREETING_STAGE)
        if ms is None or rec.call_id in self._greeted:
            return
        self._greeted.add(rec.call_id)
        self._observe_greeting(ms)

    def _observe_greeting(self, ms: float) -> None:
        self.stage_ms.labels(GREETING_STAGE).observe(ms)
        if ms > GREETING_BUDGET_MS:
            self.over_budget.labels(GREETING_STAGE).inc()

    def call_finished(self, records: list[TurnRecord]) -> None:
        self.active_calls.dec()
        budgets = {name: getattr(self._budgets, key) for name, _, _, key in STAGES if key}
        for rec in records:
            self.backchannels.inc(rec.backchannels)  # the greeting's too
            if rec.route == "greeting":
                # Not seen by greeting_sent (a transport that does not report it): observed at the end.
                if rec.call_id in self._greeted:
                    self._greeted.discard(rec.call_id)
                elif GREETING_STAGE in rec.stages_ms():
                    self._observe_greeting(rec.stages_ms()[GREETING_STAGE])
            if rec.route in ("greeting", "pending"):
                continue
            self._recent.append(rec)
            self.turns.labels(rec.route).inc()
            self.llm_calls.inc(rec.llm_calls)
            if rec.escalation:
                self.escalations.labels(rec.escalation).inc()
            stages = rec.stages_ms()
            if stages.get("voice_to_voice", 0.0) > DEAD_AIR_MS:
                self.dead_air.inc()
            for stage, ms in stages.items():
                self.stage_ms.labels(stage).observe(ms)
                if stage in budgets and ms > budgets[stage]:
                    self.over_budget.labels(stage).inc()

    def render(self, loop_lag: dict | None = None, records_pending: int | None = None) -> tuple[bytes, str]:
        if records_pending is not None:
            self.records_pending.set(records_pending)
        if loop_lag and loop_lag.get("n"):
            self.loop_lag_ms.labels("0.5").set(loop_lag["p50_ms"])
            self.loop_lag_ms.labels("0.99").set(loop_lag["p99_ms"])
        for row in summarize(list(self._recent), self._budgets):
            if row.n:
                for q, v in (("0.5", row.p50), ("0.9", row.p90), ("0.99", row.p99)):
                    self.quantile_ms.labels(row.stage, q).set(v)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
