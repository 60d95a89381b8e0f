"""One trace per call, sent to the operator's trace backend (Jaeger, Tempo) over OTLP/HTTP.

On when ``telemetry.otlp_endpoint`` is set (off by default: then nothing here runs and no record gets a
trace id). A call's trace is written from its turn records when the call ends, with the records' own
timestamps, so the spans say exactly what the records say:

* ``call`` (the root): stream start to the call's end; ``call.id`` and ``conversation.id`` (the CallSid,
  Pipecat's attribute name), ``call.caller`` masked, ``call.end_reason``, ``call.qa``;
* ``greeting``: stream start to its first audio out;
* ``turn`` per caller turn: speech end to its first audio out (``turn.index``, ``turn.route``, intent,
  emergency number, language, LLM calls, interrupted, voice-to-voice), with a child per stage of
  ``bot.telemetry.latency.STAGES`` whose marks the record has (``endpointing``: the turn-taking wait;
  ``stt``, ``llm_first_token``, ``llm``, ``tts``, ``transport``), and ``dialog``: the turn's last
  transcript to its first sentence, the decision (``dialog.decision`` and ``turn.decision``: rule,
  shortcut, emergency or model; often made before the turn-taking wait ends, the answer held for it).

The trace id is the call's (the first 128 bits of SHA-256 of the CallSid), so every record carries it from
the start (``TurnRecord.trace_id``: the desk links a call to the trace viewer), and a call resumed on
another worker (issue 46) adds to the same trace. The process's resource names what a regression
would change: the ONNX sessions' providers and the escape hatches.

A receiver that is down or slow costs the call nothing: spans are queued for a background thread
(``BatchSpanProcessor``: a full queue drops spans, never blocks) that posts them with a short timeout.
Pipecat's own turn tracing (``PipelineTask(enable_tracing=True)``) is not used: its turns are its turn
tracker's (user started speaking to bot stopped), not the records', and each pipeline would open a
second trace of its own.
"""

from __future__ import annotations

import contextvars
import hashlib
import random
import time
from collections.abc import Iterable, Mapping
from typing import Any

from loguru import logger

from bot.config import TelemetryConfig
from bot.privacy import mask
from bot.telemetry.latency import STAGES, TurnRecord
from bot.telemetry.metrics import hatch_label

SERVICE_NAME = "voice-bot"
TRACES_PATH = "/v1/traces"
# What the route says about how the turn was decided (bot/dialog/policy.py's routes; "llm": the model).
DECISIONS = {"rule": "rule", "shortcut": "shortcut", "emergency": "emergency", "llm": "model", "error": "error"}
# The turn span itself, not a child of it.
_NOT_CHILDREN = ("voice_to_voice",)
# The record's marks a stage starts or ends at (tts_start is derived: ``TurnRecord.tts_start``).
_MARKS = {m for _, a, b, _ in STAGES for m in (a, b)} - {"tts_start"}


def trace_id_for(call_id: str) -> int:
    """The call's trace id: the first 128 bits of SHA-256 of its id (never 0)."""
    return int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:16], "big") or 1


def _call_trace_ids(writing: contextvars.ContextVar[int | None]) -> Any:
    """An id generator: random span ids; the trace id of the call being written (``writing``), else random."""
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class CallTraceIds(IdGenerator):
        def generate_span_id(self) -> int:
            return random.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return writing.get() or random.getrandbits(128) or 1

    return CallTraceIds()


def _ns(t: float) -> int:
    return int(round(t * 1e9))


class CallTracing:
    """The process's tracer: one trace per call, written when the call ends (module doc)."""

    def __init__(self, exporter: Any, *, resource: Mapping[str, Any], export_timeout_secs: float = 2.0,
                 max_queue: int = 2048):
        """``exporter``: an OpenTelemetry ``SpanExporter`` (OTLP/HTTP from ``from_config``; the tests' own)."""
        # Imported here: a process with tracing off never loads OpenTelemetry.
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self._trace = trace
        self._writing: contextvars.ContextVar[int | None] = contextvars.ContextVar("call_trace_id", default=None)
        self.provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME, **resource}),
                                       id_generator=_call_trace_ids(self._writing))  # flushed at exit
        self.provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=max_queue,
                                                            schedule_delay_millis=500,
                                                            export_timeout_millis=export_timeout_secs * 1000))
        self._tracer = self.provider.get_tracer("bot.call")

    @classmethod
    def from_config(cls, tc: TelemetryConfig, resource: Mapping[str, Any]) -> CallTracing | None:
        """The tracer of ``[telemetry]``, or None when ``otlp_endpoint`` is empty (off)."""
        if not tc.otlp_endpoint:
            return None
        url = tc.otlp_endpoint.rstrip("/")
        url = url if url.endswith(TRACES_PATH) else url + TRACES_PATH
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=url, timeout=tc.export_timeout_secs)
        logger.info("tracing: one trace per call to {} (OTLP/HTTP)", url)
        return cls(exporter, resource=resource, export_timeout_secs=tc.export_timeout_secs)

    def call_finished(self, call_id: str, records: Iterable[TurnRecord], *, started: float, ended: float,
                      end_reason: str | None = None, caller: str | None = None, qa: bool = False) -> str:
        """Write the call's trace from its records (timestamps: wall clock, seconds); returns its id (hex)."""
        tid = trace_id_for(call_id)
        token = self._writing.set(tid)
        try:
            root = self._tracer.start_span("call", start_time=_ns(started), attributes={
                "call.id": call_id, "conversation.id": call_id, "conversation.type": "voice", "call.qa": qa,
                **({"call.caller": mask(caller)} if caller else {}),
                **({"call.end_reason": end_reason} if end_reason else {})})
        finally:
            self._writing.reset(token)
        parent = self._trace.set_span_in_context(root)
        said = 0
        for rec in records:
            if rec.route == "greeting":
                if rec.stream_start is not None and rec.first_audio_out is not None:
                    self._tracer.start_span("greeting", context=parent, start_time=_ns(rec.stream_start),
                                            attributes={"turn.index": rec.index}).end(_ns(rec.first_audio_out))
                continue
            if self._turn(rec, parent):
                said += 1
        root.set_attribute("call.turns", said)
        root.end(_ns(ended))
        return format(tid, "032x")

    def _turn(self, rec: TurnRecord, parent: Any) -> bool:
        marks = {k: v for k, v in rec.__dict__.items() if isinstance(v, float) and k in _MARKS}
        if rec.tts_start is not None:
            marks["tts_start"] = rec.tts_start
        if not marks:
            return False  # a turn nothing happened in (a pending turn at the call's end)
        start = rec.speech_end if rec.speech_end is not None else min(marks.values())
        end = max(start, rec.first_audio_out if rec.first_audio_out is not None else max(marks.values()))
        attrs: dict[str, Any] = {"turn.index": rec.index, "turn.route": rec.route, "turn.llm_calls": rec.llm_calls,
                                 "turn.interrupted": rec.interrupted,
                                 "turn.decision": DECISIONS.get(rec.route, rec.route)}
        for key, value in (("turn.intent", rec.intent), ("turn.flow", rec.flow), ("turn.escalation", rec.escalation),
                           ("turn.language", rec.language), ("turn.error", rec.error),
                           ("turn.voice_to_voice_ms", rec.stages_ms().get("voice_to_voice"))):
            if value is not None:
                attrs[key] = value
        span = self._tracer.start_span("turn", context=parent, start_time=_ns(start), attributes=attrs)
        inner = self._trace.set_span_in_context(span)
        for name, a, b, _ in STAGES:
            if name in _NOT_CHILDREN or a not in marks or b not in marks or marks[b] < marks[a]:
                continue  # (a mark before its start: a barged-in turn's, not a duration)
            extra = ({"turn.endpoint_kind": rec.endpoint_kind} if name == "endpointing" and rec.endpoint_kind else {})
            self._tracer.start_span(name, context=inner, start_time=_ns(marks[a]), attributes=extra).end(_ns(marks[b]))
        # The decision: from the caller's words (the turn's last transcript) to the answer's first sentence.
        # It often comes before the turn-taking wait is over (the answer waits, ready, for the turn's end).
        if rec.stt_done is not None and rec.first_sentence is not None and rec.first_sentence >= rec.stt_done:
            self._tracer.start_span("dialog", context=inner, start_time=_ns(rec.stt_done), attributes={
                "dialog.decision": DECISIONS.get(rec.route, rec.route)}).end(_ns(rec.first_sentence))
        span.end(_ns(end))
        return True

    def flush(self, timeout_secs: float = 5.0) -> bool:
        return self.provider.force_flush(int(timeout_secs * 1000))

    def shutdown(self) -> None:
        self.provider.shutdown()


# The process's tracer (``configure``): None while tracing is off.
_active: CallTracing | None = None


def configure(tc: TelemetryConfig, resource: Mapping[str, Any]) -> CallTracing | None:
    """Turn tracing on for this process as ``[telemetry]`` says (off: None); replaces an earlier one."""
    global _active
    if _active is not None:
        _active.shutdown()
    _active = CallTracing.from_config(tc, resource)
    return _active


def active() -> CallTracing | None:
    return _active


def trace_call(recorder: Any, end_reason: str | None) -> None:
    """Write the ended call's trace (its ``CallRecorder``) when tracing is on; a failure is logged, never raised."""
    if _active is None:
        return
    try:
        _active.call_finished(recorder.call_id, recorder.records, started=recorder.started, ended=time.time(),
                              end_reason=end_reason, caller=recorder.caller, qa=recorder.qa)
    except Exception as e:  # noqa: BLE001 - a trace is never worth a call's end
        logger.warning("tracing: call {} not traced ({}: {})", mask(recorder.call_id), type(e).__name__, e)


def trace_id_hex(call_id: str) -> str | None:
    """The id of the trace the call will have (32 hex digits), or None when tracing is off."""
    return format(trace_id_for(call_id), "032x") if _active is not None else None


def resource_attributes(*, providers: Mapping[str, list[str]], hatches: Iterable[str], worker: str,
                        stt_device: str | None = None) -> dict[str, Any]:
    """What the process runs on: the ONNX sessions' providers and the escape hatches (a regression's suspects)."""
    attrs: dict[str, Any] = {"service.instance.id": worker, "voice.escape_hatches": sorted(hatch_label(h) for h in hatches)}
    for session, names in providers.items():
        attrs[f"voice.onnx.{session}.providers"] = list(names)
    if stt_device:
        attrs["voice.stt.device"] = stt_device
    return attrs
