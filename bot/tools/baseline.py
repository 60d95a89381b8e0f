"""``bench --save-baseline FILE`` and ``bench --compare FILE``: a lost speedup fails loudly.

A baseline is one bench run boiled down to what a regression would move: every stage's values
(so p50/p90 and the rank test can be recomputed; the greeting is a stage too, one value per call,
judged by the same rule), LLM calls per turn, the shortcut share, the
provider each ONNX session got, the escape hatches, failed turns, and the identity of the machine
and config it ran on. ``compare`` holds a new run against it and names what got worse.

The noise rule (``NoiseRule``) was chosen from repeated runs of the same config on the 2-core
machine class (figures in docs/regressions.md): a stage counts as slower only when its p50 is both
more than ``ratio`` times the baseline's AND more than ``min_ms`` slower; its p90 is judged the
same way only when both runs have ``p90_min_n`` turns (the p90 of 10 turns is one turn, and it
moved x1.7 between two runs of one config). Either test alone flakes: a ratio on a 30 ms stage
moves with one scheduler hiccup, a fixed margin on a 1.5 s stage hides a real loss. The default
(x1.6 and +100 ms) is for two runs on one machine; ``scripts/perf_gate.sh`` holds another machine
of the class, under CI's load, to x2.5 and +300 ms.

Few turns. A run with fewer than ``min_n`` turns of a stage (one call plays one or two model
turns) has no p50 worth the name, but a large change still shows: when the baseline has
``min_n`` turns and EVERY new sample is beyond the baseline's p90 x ``ratio``, its p90 +
``min_ms`` and the slowest turn the baseline ever saw, the stage is slower (a 900 ms first token
against a 150 ms baseline, from one turn). Otherwise the stage is "not judged", and the compare
fails on it unless ``--allow-unjudged`` is given: the guard never says ok about what it skipped.

An overloaded bench machine is not judged. The caller simulator sends a frame every 20 ms from the
bench's own process; when it fell behind its clock by more than ``SEND_LAG_MARK_MS`` the machine
starved the callers as well as the bot, and a slow stage or a lost turn of that run says nothing
about the bot (a CI run beside full CPU load failed on ``failed_turns: 1`` with the caller 2.8 s
behind). ``outcome`` then answers "overloaded" (exit ``OVERLOADED_EXIT``), unless what changed does
not move with load: an ONNX provider or an escape hatch still fails.

LLM calls are judged per model turn (calls / turns that made one) and by their maximum: the mean
over all turns moves with how Whisper cut the caller's speech into turns (0.55 and 0.64 in two
runs of one config), while a second call in a turn is what a regression looks like.
"""

from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.telemetry.latency import GREETING_STAGE, STAGES, percentile
from bot.telemetry.noise import ONE_MACHINE

FORMAT = "voice-bench-baseline/1"
# The caller simulator's worst frame send lag past which a run is not judged (module doc).
SEND_LAG_MARK_MS = 500.0
# ``bench --compare``'s exit status for "not judged: the bench machine was overloaded" (1: slower than
# the baseline or a stage not judged; 2: a bench error; 3: a call errored, bot/tools/bench/__init__.py).
OVERLOADED_EXIT = 4
# What a loaded machine cannot move: these fail even on an overloaded run.
LOAD_INDEPENDENT = ("provider", "escape_hatches")
# The turn stages, then the greeting (one per call: media stream start -> its first audio out).
JUDGED_STAGES = (*(name for name, *_ in STAGES), GREETING_STAGE)


@dataclass(frozen=True)
class NoiseRule:
    ratio: float = ONE_MACHINE.ratio  # 1.6 (bot/telemetry/noise.py: shared with the startup self-timing)
    min_ms: float = ONE_MACHINE.min_ms  # 100 ms
    min_n: int = 3
    p90_min_n: int = 20
    calls_slack: float = 0.05  # LLM calls per model turn may wobble this much (a withdrawn speculation)
    send_lag_mark_ms: float = SEND_LAG_MARK_MS  # the caller simulator's send lag past which nothing is judged

    @classmethod
    def from_args(cls, args) -> NoiseRule:
        """The rule of ``--noise-ratio`` / ``--noise-ms`` (defaults: the quiet-machine rule)."""
        ratio, ms = getattr(args, "noise_ratio", None), getattr(args, "noise_ms", None)
        mark = getattr(args, "send_lag_mark_ms", None)
        rule = cls(ratio=cls.ratio if ratio is None else ratio, min_ms=cls.min_ms if ms is None else ms,
                   send_lag_mark_ms=cls.send_lag_mark_ms if mark is None else mark)
        if rule.ratio < 1 or rule.min_ms < 0:
            raise ValueError(f"--noise-ratio must be >= 1 and --noise-ms >= 0 (got {rule.ratio}, {rule.min_ms})")
        if rule.send_lag_mark_ms <= 0:
            raise ValueError(f"--send-lag-mark-ms must be > 0 (got {rule.send_lag_mark_ms})")
        return rule


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - not Linux
        pass
    return platform.processor() or "?"


def machine_identity(meta: dict) -> dict[str, Any]:
    import os

    return {"cpu": _cpu_model(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "pipecat": meta.get("pipecat"), "git": meta.get("git")}


def summarize_run(stats, *, meta: dict, settings: dict) -> dict[str, Any]:
    """A baseline from one run's ``bench.RunStats``: JSON-ready."""
    recs = stats.records
    stages = {}
    per_stage = {name: [r.stages_ms()[name] for r in recs if name in r.stages_ms()] for name, *_ in STAGES}
    per_stage[GREETING_STAGE] = stats.greeting_server()
    for name, values in per_stage.items():
        vals = sorted(round(v, 1) for v in values)
        stages[name] = {"n": len(vals), "p50": percentile(vals, 50), "p90": percentile(vals, 90),
                        "p99": percentile(vals, 99), "values": vals}
    calls = [r.llm_calls for r in recs]
    env = stats.run.environment or {}
    tts = env.get("tts") or {}
    stt = env.get("stt") or {}
    llm = env.get("llm") or {}
    return {
        "format": FORMAT,
        "date": meta.get("date"),
        "machine": machine_identity(meta),
        "settings": settings,
        "config": {"stt": {k: stt.get(k) for k in ("model", "device", "compute_type", "beam_size")},
                   "tts": {k: tts.get(k) for k in ("voice", "steps", "standin")},
                   "llm": {k: llm.get(k) for k in ("model", "dialect")}},
        "providers": tts.get("providers") or {},
        "escape_hatches": sorted(env.get("escape_hatches") or []),
        "turns": len(recs),
        "llm_calls_per_turn": {"mean": sum(calls) / len(calls) if calls else 0.0, "max": max(calls, default=0),
                               "per_model_turn": (sum(calls) / sum(1 for c in calls if c)) if any(calls) else 0.0},
        "shortcut_share": (sum(r.route == "shortcut" for r in recs) / len(recs)) if recs else 0.0,
        # Spoken turns the bot did not answer in time, or that left no server record.
        "failed_turns": sum(1 for r in stats.rows if r["caller"] and r["caller"]["speech_start"] is not None
                            and (r["caller"]["no_answer"] or r["server"] is None)),
        "failed_calls": sum(1 for c in stats.run.calls if c.error),
        # The bench machine's own load: how far the caller simulator fell behind its 20 ms clock.
        "caller_send_lag_ms": {"max": max((c.max_send_lag_ms for c in stats.run.calls), default=0.0),
                               "speech_max": max((c.get("send_lag_ms", 0.0) for c in stats.caller_turns()), default=0.0)},
        "stages": stages,
    }


def save(path: str | Path, baseline: dict) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(jsonable(baseline), ensure_ascii=False, indent=1, allow_nan=False) + "\n",
                 encoding="utf-8")
    return p


def load(path: str | Path) -> dict:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: no such baseline (make one with `run_bot.py bench --save-baseline {p}`)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not a baseline: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{p}: not a baseline: format is {data.get('format') if isinstance(data, dict) else None!r}, "
                         f"expected {FORMAT!r}")
    return data


def jsonable(baseline: dict) -> dict:
    """NaN percentiles (a stage no turn reached) as null, as JSON wants."""
    def fix(v):
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v
    return fix(baseline)


@dataclass
class Finding:
    what: str  # stage name, or llm_calls / provider / escape_hatches / failed_turns / overloaded
    detail: str
    regression: bool  # False: shown, not failing
    unjudged: bool = False  # a stage with too few turns to judge: fails unless --allow-unjudged


def overload(new: dict, rule: NoiseRule = NoiseRule()) -> Finding | None:
    """"Not judged" when the caller simulator's send lag passed its mark (module doc), else None."""
    lag = (new.get("caller_send_lag_ms") or {}).get("max") or 0.0
    if lag <= rule.send_lag_mark_ms:
        return None
    return Finding("overloaded", f"not judged: the bench machine was overloaded (send lag {lag:.0f} ms)", False,
                   unjudged=True)


def outcome(findings: list[Finding], *, allow_unjudged: bool = False) -> str:
    """``"fail"``, ``"overloaded"`` or ``"ok"``. On an overloaded run only what load cannot move
    (``LOAD_INDEPENDENT``) fails; a slow stage, a lost turn or an unjudged stage is set aside."""
    if any(f.what == "overloaded" for f in findings):
        return "fail" if any(f.regression and f.what in LOAD_INDEPENDENT for f in findings) else "overloaded"
    return "fail" if any(f.regression or (f.unjudged and not allow_unjudged) for f in findings) else "ok"


def failed(findings: list[Finding], *, allow_unjudged: bool = False) -> bool:
    """The compare's verdict: a regression, or a stage not judged (unless allowed); see ``outcome``."""
    return outcome(findings, allow_unjudged=allow_unjudged) != "ok"


def exit_code(findings: list[Finding], *, allow_unjudged: bool = False) -> int:
    """``bench --compare``'s status: 0 ok, 1 slower (or not judged), ``OVERLOADED_EXIT`` overloaded."""
    return {"ok": 0, "fail": 1, "overloaded": OVERLOADED_EXIT}[outcome(findings, allow_unjudged=allow_unjudged)]


def _few_samples(name: str, b: dict, n: dict, rule: NoiseRule) -> Finding:
    """A stage with fewer than ``min_n`` new turns against a baseline that has them (module doc)."""
    values = [float(v) for v in n.get("values") or [] if v is not None]
    p90, base_values = _num(b.get("p90")), [float(v) for v in b.get("values") or [] if v is not None]
    if math.isnan(p90) or not values:
        return Finding(name, f"not judged: {n.get('n', 0)} turn(s) now, {b.get('n', 0)} in the baseline "
                       f"(fewer than {rule.min_n})", False, unjudged=True)
    line = max(p90 * rule.ratio, p90 + rule.min_ms, max(base_values, default=p90))
    shown = ", ".join(f"{v:.0f}" for v in values)
    if min(values) > line:
        return Finding(name, f"every one of {len(values)} turn(s) ({shown} ms) beyond {line:.0f} ms (the baseline's "
                       f"p90 {p90:.0f} ms x{rule.ratio}, +{rule.min_ms:.0f} ms, and its slowest turn); "
                       f"too few turns for a p50", True)
    return Finding(name, f"not judged: {len(values)} turn(s) now ({shown} ms), fewer than {rule.min_n}, and not all "
                   f"beyond {line:.0f} ms", False, unjudged=True)


def _num(v) -> float:
    return math.nan if v is None else float(v)


def compare(base: dict, new: dict, rule: NoiseRule = NoiseRule()) -> list[Finding]:
    """What got worse from ``base`` to ``new`` (regression=True), and what the reader should know."""
    out: list[Finding] = []
    if (busy := overload(new, rule)) is not None:
        out.append(busy)
    if base.get("machine", {}).get("cpu") != new.get("machine", {}).get("cpu") \
            or base.get("machine", {}).get("cpus") != new.get("machine", {}).get("cpus"):
        out.append(Finding("machine", f"baseline ran on {base.get('machine')}, this run on {new.get('machine')}: "
                           "figures from another machine class compare loosely", False))
    for key in ("settings", "config"):
        if base.get(key) != new.get(key):
            out.append(Finding(key, f"baseline {base.get(key)} vs now {new.get(key)}", False))
    for name in JUDGED_STAGES:
        b, n = base["stages"].get(name) or {}, new["stages"].get(name) or {}
        if name not in base["stages"]:
            out.append(Finding(name, "not judged: the baseline has no such stage (saved before it was recorded: "
                               "save it again)", False, unjudged=True))
            continue
        if min(b.get("n", 0), n.get("n", 0)) < rule.min_n:
            if b.get("n", 0) >= rule.min_n and n.get("n", 0) == 0:
                out.append(Finding(name, f"no turn reached this stage (baseline: {b['n']})", True))
            elif b.get("n", 0) >= rule.min_n:
                out.append(_few_samples(name, b, n, rule))
            else:
                out.append(Finding(name, f"not judged: {b.get('n', 0)} turn(s) in the baseline, {n.get('n', 0)} now "
                                   f"(fewer than {rule.min_n})", False, unjudged=True))
            continue
        judged = ("p50", "p90") if min(b.get("n", 0), n.get("n", 0)) >= rule.p90_min_n else ("p50",)
        for q in judged:
            x, y = _num(b.get(q)), _num(n.get(q))
            if math.isnan(x) or math.isnan(y):
                continue
            if y > x * rule.ratio and y - x > rule.min_ms:
                out.append(Finding(name, f"{q} {y:.0f} ms vs baseline {x:.0f} ms (x{y / x if x else math.inf:.2f}, "
                                   f"+{y - x:.0f} ms; rule: > x{rule.ratio} and > +{rule.min_ms:.0f} ms)", True))
    bc, nc = base["llm_calls_per_turn"], new["llm_calls_per_turn"]
    b_per, n_per = bc.get("per_model_turn", bc["mean"]), nc.get("per_model_turn", nc["mean"])
    if nc["max"] > bc["max"] or n_per > b_per + rule.calls_slack:
        out.append(Finding("llm_calls", f"LLM calls per model turn rose: {n_per:.2f} (max {nc['max']}) vs "
                           f"baseline {b_per:.2f} (max {bc['max']})", True))
    bp, np_ = base.get("providers") or {}, new.get("providers") or {}
    for session in sorted(set(bp) | set(np_)):
        if bp.get(session) != np_.get(session):
            out.append(Finding("provider", f"ONNX session {session}: {np_.get(session)} vs baseline {bp.get(session)}",
                               True))
    bh, nh = set(base.get("escape_hatches") or []), set(new.get("escape_hatches") or [])
    if bh != nh:
        gone, added = sorted(bh - nh), sorted(nh - bh)
        out.append(Finding("escape_hatches", f"turned on: {added or '-'}; turned off: {gone or '-'}", True))
    for key in ("failed_turns", "failed_calls"):
        if new.get(key, 0) > base.get(key, 0):
            out.append(Finding(key, f"{new[key]} vs baseline {base.get(key, 0)}", True))
    ds = new.get("shortcut_share", 0.0) - base.get("shortcut_share", 0.0)
    if abs(ds) > 1e-9:
        out.append(Finding("shortcut_share", f"{100 * new['shortcut_share']:.0f} % vs baseline "
                           f"{100 * base['shortcut_share']:.0f} %", False))
    return out


def render(base: dict, new: dict, findings: list[Finding], rule: NoiseRule, *, base_path: str,
           allow_unjudged: bool = False) -> str:
    """The comparison table (every stage, ours vs baseline) and the verdict."""
    lines = [f"# Bench vs baseline {base_path}", "",
             f"Baseline from {base.get('date')} on {base.get('machine', {}).get('cpu')} "
             f"({base.get('machine', {}).get('cpus')} CPUs, git {base.get('machine', {}).get('git')}); "
             f"rule: slower = p50 (and p90 where both have >= {rule.p90_min_n} turns) > x{rule.ratio} and "
             f"> +{rule.min_ms:.0f} ms (stages with n >= {rule.min_n}); with fewer turns now, slower = every turn "
             f"beyond the baseline's p90 x{rule.ratio}, its p90 +{rule.min_ms:.0f} ms and its slowest turn, "
             "else not judged.",
             "", "| stage | n base/now | p50 base | p50 now | p90 base | p90 now | verdict |", "|---|---|---|---|---|---|---|"]
    bad = {f.what for f in findings if f.regression}
    unjudged = [f.what for f in findings if f.unjudged]
    for name in JUDGED_STAGES:
        b, n = base["stages"].get(name) or {}, new["stages"].get(name) or {}

        def f(v):
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0f}"
        lines.append(f"| {name} | {b.get('n', 0)}/{n.get('n', 0)} | {f(b.get('p50'))} | {f(n.get('p50'))} | "
                     f"{f(b.get('p90'))} | {f(n.get('p90'))} | "
                     f"{'**SLOWER**' if name in bad else '**not judged**' if name in unjudged else 'ok'} |")
    lines.append("")
    lines += [f"- {'**REGRESSION**' if x.regression else '**NOT JUDGED**' if x.unjudged else 'note'} {x.what}: "
              f"{x.detail}" for x in findings]
    lag = new.get("caller_send_lag_ms") or {}
    if lag:
        lines.append(f"- note caller send lag: worst {lag.get('max', 0):.0f} ms, {lag.get('speech_max', 0):.0f} ms "
                     f"while a turn's speech was sent (mark: {rule.send_lag_mark_ms:.0f} ms)")
    regressions = [x.what for x in findings if x.regression]
    judged = [name for name in JUDGED_STAGES if name not in unjudged]
    busy = next((x for x in findings if x.what == "overloaded"), None)
    if busy is not None and outcome(findings) == "overloaded":
        verdict_line = f"Verdict: **{busy.detail}**; a slow stage or a lost turn of this run says nothing " \
                       "about the bot: run it again on a quieter machine"
        if regressions:
            verdict_line += f" (set aside: {', '.join(regressions)})"
        lines += ["", verdict_line, ""]
        return "\n".join(lines)
    if busy is not None:
        verdict_line = (f"Verdict: **FAIL**, {', '.join(x for x in regressions if x in LOAD_INDEPENDENT)} changed, "
                        f"which load does not move; the rest {busy.detail}")
        lines += ["", verdict_line, ""]
        return "\n".join(lines)
    if regressions:
        verdict = f"Verdict: **FAIL**, {len(regressions)} regression(s): {', '.join(regressions)}"
        if unjudged:
            verdict += f"; not judged (too few turns): {', '.join(unjudged)}"
    elif unjudged and not allow_unjudged:
        verdict = (f"Verdict: **FAIL**, not judged (too few turns): {', '.join(unjudged)}. Play more turns "
                   "(--calls, --rounds), or pass --allow-unjudged to accept a verdict on the other stages only")
    elif unjudged and not judged:
        verdict = (f"Verdict: no stage judged (too few turns): {', '.join(unjudged)}; passed only because of "
                   "--allow-unjudged")
    elif unjudged:
        verdict = (f"Verdict: ok for {', '.join(judged)} (within noise of the baseline); "
                   f"NOT judged (too few turns, --allow-unjudged): {', '.join(unjudged)}")
    else:
        verdict = "Verdict: ok, every stage within noise of the baseline."
    lines += ["", verdict, ""]
    return "\n".join(lines)
