"""Turn records and latency distributions: what the caller hears, per stage, as percentiles.

A turn records timestamps (wall clock, seconds) as frames pass; stages are derived from those
timestamps, never re-timed separately. Reports give p50/p90/p99 and turns over budget, never a
mean alone, and print the escape hatches beside every table.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bot.config import LatencyConfig

# (stage, start mark, end mark, budget key or None). Order is the order of the pipeline.
STAGES: tuple[tuple[str, str, str, str | None], ...] = (
    ("endpointing", "speech_end", "turn_end", None),
    ("stt", "vad_stop", "stt_done", "stt_ms"),
    ("llm_first_token", "llm_request", "llm_first_token", None),
    ("llm", "llm_request", "first_sentence", "llm_ms"),
    ("tts", "tts_start", "tts_first_audio", "tts_ms"),
    ("transport", "tts_first_audio", "first_audio_out", None),
    ("voice_to_voice", "speech_end", "first_audio_out", "total_ms"),
)


_CALLER_MARKS = ("speech_end", "vad_stop", "stt_done")

# The greeting's own stage (greeting records only, so not in STAGES, whose tables are the caller's
# turns): media stream start -> the greeting's first audio out.
GREETING_STAGE = "greeting"
# Canned greeting audio goes out within ~100 ms of the stream's start; 500 ms leaves room for load
# and stays well under the second of silence after which a caller who just answered says "hello?".
GREETING_BUDGET_MS = 500
# Speech end -> the answer's first audible sample on the line (voice_to_voice counts the first byte,
# silent or not). Audible: a 16-bit sample at or above -40 dBFS.
AUDIBLE_STAGE = "voice_to_audible"
AUDIBLE_PEAK = 328


@dataclass
class TurnRecord:
    """One caller turn and the bot's answer to it."""

    call_id: str
    index: int
    route: str = "pending"  # shortcut | rule | llm | error | greeting | unclear | no_reply
    # Marks (time.time() seconds); None when the turn never reached that point.
    speech_end: float | None = None  # VAD stop minus stop_secs: when the caller went quiet
    vad_stop: float | None = None
    stt_done: float | None = None
    turn_end: float | None = None
    llm_request: float | None = None
    llm_first_token: float | None = None
    first_sentence: float | None = None  # first reply sentence ready for TTS
    tts_first_audio: float | None = None
    first_audio_out: float | None = None  # first audio frame written to the transport
    # The greeting's record only: the call's media stream started (its pipeline was built, right after
    # Twilio's `start` and the stream token's check). Greeting time = this -> first_audio_out.
    stream_start: float | None = None
    # The answer's first TTS frame with a sample at or above ``AUDIBLE_PEAK``, and the audio before
    # that sample (the TTS's leading silence, ms of audio): the caller hears the answer that much after
    # first_audio_out, so voice_to_audible = voice_to_voice + lead_silence_ms.
    tts_first_audible: float | None = None
    lead_silence_ms: float | None = None
    llm_calls: int = 0
    llm_cancelled_calls: int = 0  # speculative calls withdrawn because the caller kept talking
    endpoint_kind: str | None = None  # final | continuing | default: how the turn-stop wait was chosen
    endpoint_wait_ms: float | None = None
    reply_chars: int = 0
    interrupted: bool = False
    backchannels: int = 0  # the caller's "네"/"음" over this turn's reply: neither interruptions nor turns
    error: str | None = None
    intent: str | None = None
    flow: str | None = None
    slots: dict[str, Any] = field(default_factory=dict)
    stt_audio_secs: float | None = None
    # The call's language when the turn was answered, and Whisper's probability for the language it
    # guessed this turn (stt.language = "auto"; None when forced).
    language: str | None = None
    language_p: float | None = None
    stt_ms: float | None = None
    stt_rtf: float | None = None
    tts_synth_ms: list[float] = field(default_factory=list)
    qa: bool = False
    retrieval_ms: float | None = None  # the city's facts looked up for this turn
    facts: list[str] = field(default_factory=list)  # their ids, as put into the prompt
    answer_source: str | None = None  # the fact the answer used (the model's answer_source, or a directory rule)
    transcript: str | None = None  # what the caller said (or keyed), as the dialog saw it
    # Sentences played to the caller during this turn, in order: a canned sentence's name
    # ("filler", "apology", "idle_prompt", "shortcut:<name>", ...) or "reply" for the model's words.
    heard: list[str] = field(default_factory=list)
    reply: str | None = None  # what the bot said back
    escalation: str | None = None  # the emergency number the bot told the caller ("119", "112", "109")
    line_open: bool | None = None  # a person could take the call at this turn (the desk's calendar)
    ai_notice: bool = False  # the greeting's record: the caller was told an AI answers (issue 47)
    trace_id: str | None = None  # the call's trace (32 hex digits; bot/telemetry/tracing.py), None: tracing off

    @property
    def tts_start(self) -> float | None:
        """When TTS could start: the first sentence, or the turn end if a speculative reply was held."""
        if self.first_sentence is None:
            return None
        return max(self.first_sentence, self.turn_end or self.first_sentence)

    def mark(self, name: str, t: float | None = None, *, overwrite: bool = False) -> None:
        """Set a timestamp once (the first event wins unless ``overwrite``).

        The caller's marks stop at the answer: speech over the reply (a backchannel, or a barge-in
        whose words are still awaited) is no part of this turn's speech.
        """
        if name in _CALLER_MARKS and self.first_audio_out is not None:
            return
        if overwrite or getattr(self, name) is None:
            setattr(self, name, time.time() if t is None else t)

    def stages_ms(self) -> dict[str, float]:
        """Derived stage durations in milliseconds (only those whose marks both exist)."""
        out = {}
        for name, start, end, _ in STAGES:
            a, b = getattr(self, start), getattr(self, end)
            if a is not None and b is not None:
                out[name] = round((b - a) * 1000.0, 1)
        if self.stream_start is not None and self.first_audio_out is not None:
            out[GREETING_STAGE] = round((self.first_audio_out - self.stream_start) * 1000.0, 1)
        if "voice_to_voice" in out and self.tts_first_audible is not None and self.lead_silence_ms is not None:
            out[AUDIBLE_STAGE] = round(out["voice_to_voice"] + self.lead_silence_ms, 1)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stages_ms"] = self.stages_ms()
        return d


def percentile(values: list[float], p: float) -> float:
    """Linear-interpolated percentile (numpy's default method); NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (k - lo))


@dataclass
class StageSummary:
    stage: str
    n: int
    p50: float
    p90: float
    p99: float
    max: float
    budget_ms: int | None
    over_budget: int


def summarize(records: list[TurnRecord], budgets: LatencyConfig) -> list[StageSummary]:
    """Per-stage distributions over the turns that reached each stage."""
    rows = []
    for name, _, _, budget_key in STAGES:
        vals = [r.stages_ms()[name] for r in records if name in r.stages_ms()]
        budget = getattr(budgets, budget_key) if budget_key else None
        over = sum(v > budget for v in vals) if budget is not None else 0
        rows.append(
            StageSummary(
                name, len(vals), percentile(vals, 50), percentile(vals, 90), percentile(vals, 99),
                max(vals) if vals else math.nan, budget, over,
            )
        )  # fmt: skip
    return rows


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.0f}"


def format_table(rows: list[StageSummary]) -> str:
    """A markdown table: stage, n, p50/p90/p99/max ms, budget, turns over budget."""
    lines = [
        "| stage | n | p50 ms | p90 ms | p99 ms | max ms | budget ms | over budget |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        budget = str(r.budget_ms) if r.budget_ms is not None else "-"
        over = f"{r.over_budget}/{r.n}" if r.budget_ms is not None else "-"
        lines.append(
            f"| {r.stage} | {r.n} | {_fmt(r.p50)} | {_fmt(r.p90)} | {_fmt(r.p99)} | {_fmt(r.max)} | {budget} | {over} |"
        )
    return "\n".join(lines)


def call_report(records: list[TurnRecord], budgets: LatencyConfig, header_lines: list[str]) -> str:
    """The table logged at the end of every call, under the escape-hatch header."""
    turns = [r for r in records if r.route not in ("greeting",)]
    routes: dict[str, int] = {}
    for r in turns:
        routes[r.route] = routes.get(r.route, 0) + 1
    max_calls = max((r.llm_calls for r in turns), default=0)
    head = "\n".join(header_lines)
    return (
        f"{head}\nturns: {len(turns)} routes: {routes} max LLM calls in a turn: {max_calls} "
        f"interrupted: {sum(r.interrupted for r in turns)}\n" + format_table(summarize(turns, budgets))
    )
