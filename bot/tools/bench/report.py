"""The bench report (``report.md``): environment, hatches, per-stage tables, ratios, TTFA."""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

from bot.config import LatencyConfig
from bot.telemetry.latency import AUDIBLE_STAGE, STAGES, format_table, percentile, summarize
from bot.tools.bench.caller import BOT_QUIET_GAP
from bot.tools.bench.plot import plot_cdfs
from bot.tools.bench.runner import EXPECTED_MARKS, RunResult, to_record
from bot.tools.bench.stats import RunStats, _dist, _f, calls_per_worker
from bot.tools.bench.turnset import ROOT, TurnSet


def _environment_lines(env: dict) -> list[str]:
    stt, tts, llm = env.get("stt") or {}, env.get("tts") or {}, env.get("llm") or {}
    lines = [
        f"- STT: model `{stt.get('model')}`, device {stt.get('device')}, compute type {stt.get('compute_type')}, "
        f"beam {stt.get('beam_size')}",
        f"- TTS: voice {tts.get('voice')}, {tts.get('steps')} steps, stand-in model: {tts.get('standin')}",
    ]
    providers = tts.get("providers") or {}
    if isinstance(providers, dict):
        lines += [f"  - ONNX session `{name}`: {', '.join(p) if isinstance(p, list) else p}" for name, p in providers.items()]
    else:
        lines.append(f"  - ONNX sessions: {providers}")
    lines.append(f"- LLM: model `{llm.get('model')}`, dialect {llm.get('dialect')}, base_url {llm.get('base_url')}")
    for k, v in env.items():
        if k not in ("stt", "tts", "llm", "escape_hatches"):
            lines.append(f"- {k}: {json.dumps(v, ensure_ascii=False)}")
    return lines


def _hatch_lines(env: dict) -> list[str]:
    hatches = env.get("escape_hatches")
    if hatches is None:
        return ["- escape hatches: UNKNOWN (the server did not report them)"]
    return [f"- **ESCAPE HATCH:** {h}" for h in hatches] or ["- escape hatches: none"]




def _run_section(st: RunStats, budgets: LatencyConfig) -> list[str]:
    run = st.run
    recs = st.records
    callers = st.caller_turns()
    lines = [f"## {run.system}: {run.url}", ""]
    lines += ["### Environment (from the server's /api/turns)", "", *_environment_lines(run.environment),
              "", "Escape hatches:", "", *_hatch_lines(run.environment), ""]
    ended = Counter(c.ended_by for c in run.calls)
    lines += [f"Calls: {len(run.calls)} ({', '.join(f'{k}: {v}' for k, v in sorted(ended.items()))}); "
              f"caller turns: {len(callers)}; server turns: {len(recs)}; wall time {run.wall_secs:.1f} s.", ""]
    share = calls_per_worker(run)
    if share:
        total = sum(share.values())
        lines += ["Calls per worker (the records' `worker`): " + ", ".join(
            f"{w} {n} ({100 * n / total:.0f} %)" for w, n in sorted(share.items())) + ".", ""]
    errors = [c for c in run.calls if c.error]
    if errors:
        lines += ["Call problems:", ""] + [f"- `{c.call_id[:10]}…` {c.ended_by}: {c.error}" for c in errors] + [""]

    lines += ["### Per-stage latency (server turn records)", "", format_table(summarize(recs, budgets)), ""]
    over = sum(v > budgets.total_ms for v in st.v2v)
    lines += [f"Turns over the {budgets.total_ms} ms voice-to-voice budget: **{over}/{len(st.v2v)}**.", ""]

    gs, gc = _dist(st.greeting_server()), _dist(st.greeting_caller())
    lines += ["### Greeting", "", "| measure | n | p50 ms | p90 ms | p99 ms | max ms |", "|---|---|---|---|---|---|",
              f"| server: media stream start -> greeting's first audio out | {gs['n']} | {_f(gs['p50'])} | "
              f"{_f(gs['p90'])} | {_f(gs['p99'])} | {_f(gs['max'])} |",
              f"| caller: stream opened -> first audible greeting audio | {gc['n']} | {_f(gc['p50'])} | "
              f"{_f(gc['p90'])} | {_f(gc['p99'])} | {_f(gc['max'])} |", ""]

    ca, sv = _dist(st.caller_ttfa), _dist(st.v2v)
    lines += ["### Caller-side time to first audio vs the server's voice_to_voice", "",
              "| measure | n | p50 ms | p90 ms | p99 ms | max ms |", "|---|---|---|---|---|---|",
              f"| caller TTFA (last speech frame sent -> first audible bot audio) | {ca['n']} | {_f(ca['p50'])} | "
              f"{_f(ca['p90'])} | {_f(ca['p99'])} | {_f(ca['max'])} |",
              f"| server voice_to_voice (speech_end -> first audio out) | {sv['n']} | {_f(sv['p50'])} | {_f(sv['p90'])} | "
              f"{_f(sv['p99'])} | {_f(sv['max'])} |"]
    au = _dist([rec.stages_ms()[AUDIBLE_STAGE] for rec in recs if AUDIBLE_STAGE in rec.stages_ms()])
    lines.append(f"| server voice_to_audible (speech_end -> first sample above -40 dBFS out: the TTS's leading "
                 f"silence added) | {au['n']} | {_f(au['p50'])} | {_f(au['p90'])} | {_f(au['p99'])} | {_f(au['max'])} |")
    diffs = [r["caller"]["caller_ttfa_ms"] - to_record(r["server"]).stages_ms()["voice_to_voice"] for r in st.rows
             if r["caller"] and r["server"] and r["caller"]["caller_ttfa_ms"] is not None
             and not r["caller"]["cut_off_early"] and "voice_to_voice" in to_record(r["server"]).stages_ms()]
    if diffs:
        lines.append(f"\nPer turn, caller TTFA minus server voice_to_voice: p50 {_f(percentile(diffs, 50))} ms, "
                     f"min {_f(min(diffs))}, max {_f(max(diffs))} (the server's speech_end is VAD stop minus "
                     "stop_secs; the caller's is the last speech frame sent).")
    lines.append("")

    calls_per_turn = Counter(r.llm_calls for r in recs)
    max_calls = max(calls_per_turn, default=0)
    verdict = "OK (at most one)" if max_calls <= 1 else f"**FAIL: {sum(v for k, v in calls_per_turn.items() if k > 1)} turn(s) made more than one call**"
    routes = Counter(r.route for r in recs)
    shortcut = routes.get("shortcut", 0)
    lines += ["### Turns", "",
              f"- LLM calls per turn: {', '.join(f'{k} call(s): {v} turns' for k, v in sorted(calls_per_turn.items())) or '-'}; "
              f"max {max_calls}: {verdict}",
              f"- Shortcut share: {shortcut}/{len(recs)} = {_f(100 * shortcut / len(recs) if recs else math.nan)} %",
              f"- Route mix: {', '.join(f'{k} {v}' for k, v in routes.most_common()) or '-'}",
              f"- Interrupted turns (server: the caller barged in while the bot spoke): {sum(r.interrupted for r in recs)}",
              f"- Cut off early (caller: bot audio arrived while the caller was still sending speech): "
              f"{sum(c['cut_off_early'] for c in callers)}",
              f"- No answer within the timeout: {sum(c['no_answer'] for c in callers)}",
              f"- Bot resumed talking during the caller's pause (gap > {BOT_QUIET_GAP} s inside a reply): "
              f"{sum(c['bot_resumed'] for c in callers)}",
              f"- Turns not played (the call had ended): {sum(c['speech_start'] is None for c in callers)}"]
    missing_server = sum(1 for r in st.rows if r["caller"] and r["caller"]["speech_start"] is not None and r["server"] is None)
    extra = sum(1 for r in st.rows if r["caller"] is None)
    lines.append(f"- Caller turns without a server record: {missing_server}; server turns no caller turn explains: {extra}")
    missing: Counter = Counter()
    for r in recs:
        for mark in EXPECTED_MARKS.get(r.route, ()):
            if getattr(r, mark) is None:
                missing[f"{r.route}.{mark}"] += 1
    lines.append("- Turns with missing marks: " + (", ".join(f"{k} x{v}" for k, v in sorted(missing.items())) or "none"))
    lag_ms = max((c.max_send_lag_ms for c in run.calls), default=0.0)
    stalls = sorted((lag, at - (c.stream_started or at)) for c in run.calls for at, lag in c.send_stalls)
    speech_lag = max((c["send_lag_ms"] for c in callers), default=0.0)
    shown = ", ".join(f"{lag:.0f} ms at {at:.1f} s" for lag, at in stalls[-6:]) or "-"
    lines.append(f"- Caller simulator: worst frame send lag {lag_ms:.0f} ms"
                 + (" (**over 50 ms: the bench machine was overloaded; caller figures are suspect**)" if lag_ms > 50 else "")
                 + f"; {len(stalls)} stall(s) over 20 ms ({shown}{', the worst 6' if len(stalls) > 6 else ''}; "
                 f"time after the stream's start), worst while a turn's speech was sent {speech_lag:.0f} ms")
    lines.append("")

    pairs = [(r["caller"], r["server"]) for r in st.rows if r["caller"] and r["server"]]
    agree = sum(c["expected_route"] == s.get("route") for c, s in pairs)
    lines += [f"Expected vs actual route: {agree}/{len(pairs)} agree.", ""]
    if pairs:
        table: Counter = Counter((c["turn_id"], c["label"], c["expected_route"], s.get("route")) for c, s in pairs)
        lines += ["| turn | label | expected | actual | n |", "|---|---|---|---|---|"]
        lines += [f"| {t} | {label} | {e} | {a}{'' if e == a else ' (mismatch)'} | {n} |"
                  for (t, label, e, a), n in sorted(table.items())]
        lines.append("")

    lag, worst = run.loop_lag or {}, run.loop_lag_worst or {}
    lines += ["### Event-loop lag (server)", "",
              f"- last 60 s at the end of the run: p50 {_f(lag.get('p50_ms'), 1)} ms, p99 {_f(lag.get('p99_ms'), 1)} ms, "
              f"max {_f(lag.get('max_ms'), 1)} ms (n={lag.get('n', '-')})",
              f"- worst 60-s window polled during the run: p99 {_f(worst.get('p99_ms'), 1)} ms, max {_f(worst.get('max_ms'), 1)} ms",
              ""]
    return lines


def _ratio(x: float, y: float) -> float:
    return math.nan if math.isnan(x) or math.isnan(y) or y == 0 else x / y


def stock_ratios(ours: RunStats, stock: RunStats, budgets: LatencyConfig) -> list[tuple[str, dict, dict]]:
    """(measure, ours {p50, p90}, stock {p50, p90}) for every stage and the caller's TTFA."""
    a = {r.stage: r for r in summarize(ours.records, budgets)}
    b = {r.stage: r for r in summarize(stock.records, budgets)}
    rows = [(name, {"p50": a[name].p50, "p90": a[name].p90}, {"p50": b[name].p50, "p90": b[name].p90})
            for name, *_ in STAGES]
    return [*rows, ("caller TTFA", _dist(ours.caller_ttfa), _dist(stock.caller_ttfa))]


def bench_problems(stats: list[RunStats], budgets: LatencyConfig) -> list[str]:
    """Why this run's figures cannot be trusted (empty: none): a call of any server that errored (no
    greeting, a stream closed early, a rejected call) or an ours/stock ratio that could not be
    computed. ``run_bench`` exits 3 on any of them: a broken comparison is never a quiet empty table."""
    problems = [f"{st.run.system}: call {c.call_id[:10]}… {c.ended_by}: {c.error}"
                for st in stats for c in st.run.calls if c.error]
    problems += [f"{st.run.system}: no call was placed" for st in stats if not st.run.calls]
    by = {st.run.system: st for st in stats}
    if "ours" in by and "stock" in by:
        for name, x, y in stock_ratios(by["ours"], by["stock"], budgets):
            missing = [q for q in ("p50", "p90") if math.isnan(_ratio(x[q], y[q]))]
            if missing:
                why = "; ".join(f"{system} {_f(v[missing[0]])}" for system, v in (("ours", x), ("stock", y)))
                problems.append(f"ours/stock ratio of {name} {'/'.join(missing)} could not be computed ({why})")
    return problems


def _ratio_section(ours: RunStats, stock: RunStats, budgets: LatencyConfig) -> list[str]:
    def ratio(x: float, y: float) -> str:
        r = _ratio(x, y)
        return "-" if math.isnan(r) else f"{r:.2f}"

    lines = ["## Ours vs stock Pipecat (ratio = ours / stock; below 1 = ours faster)", "",
             "| stage | ours p50 | stock p50 | p50 ratio | ours p90 | stock p90 | p90 ratio |",
             "|---|---|---|---|---|---|---|"]
    for name, x, y in stock_ratios(ours, stock, budgets):
        label = f"**{name}**" if name == "caller TTFA" else name
        lines.append(f"| {label} | {_f(x['p50'])} | {_f(y['p50'])} | {ratio(x['p50'], y['p50'])} | {_f(x['p90'])} | "
                     f"{_f(y['p90'])} | {ratio(x['p90'], y['p90'])} |")
    la, lb = ours.run.loop_lag_worst or {}, stock.run.loop_lag_worst or {}
    lines += ["", f"Event-loop lag, worst p99: ours {_f(la.get('p99_ms'), 1)} ms, stock {_f(lb.get('p99_ms'), 1)} ms.",
              "Stock = bot/app/stock.py: Pipecat WhisperSTTService (faster-whisper defaults, beam 5), default "
              "UserTurnStrategies (smart-turn v3 stop), default VAD params and input resampler, plain "
              "OpenAILLMService (no shortcuts, no structured output), the same Supertonic TTS.", ""]
    return lines


# The "ours-recording" run: the same server recording every call (bot/recording/).
RECORDING_ON = ("recording.enabled=true",)
_RECORDED = re.compile(r"recording of call \S+: ([\d.]+) s in \S+ \((\d+) kB, ([\d.]+) s CPU\)")
MIN_JUDGED_TURNS = 3  # fewer voice-to-voice turns a run: the comparison says "not judged"


def recording_cost(log_text: str) -> dict[str, float]:
    """The recorder's own per-call log lines: calls, seconds recorded, kB written, CPU seconds."""
    rows = [tuple(float(x) for x in m.groups()) for m in _RECORDED.finditer(log_text)]
    return {"calls": len(rows), "secs": sum(r[0] for r in rows), "kb": sum(r[1] for r in rows),
            "cpu_s": sum(r[2] for r in rows), "cpu_max_s": max((r[2] for r in rows), default=math.nan)}


def _recording_section(off: RunStats, on: RunStats, budgets: LatencyConfig, cost: dict[str, float]) -> list[str]:
    lines, verdict = recording_comparison(off, on, budgets, cost)
    return [*lines, f"Verdict: {verdict}.", ""]


def recording_comparison(off: RunStats, on: RunStats, budgets: LatencyConfig,
                         cost: dict[str, float]) -> tuple[list[str], str]:
    """Recording on vs off in the same run: the report's lines (the recorder's cost, voice-to-voice
    and loop lag of each) and the verdict (``run_bench`` fails on anything but "no growth")."""
    a = {r.stage: r for r in summarize(off.records, budgets)}["voice_to_voice"]
    b = {r.stage: r for r in summarize(on.records, budgets)}["voice_to_voice"]
    la = (off.run.loop_lag_worst or {}).get("p99_ms", math.nan)
    lb = (on.run.loop_lag_worst or {}).get("p99_ms", math.nan)
    calls, secs = cost.get("calls", 0), cost.get("secs", 0.0)
    lines = ["## Recording on vs off (the same calls, two configs)", "",
             "| run | voice-to-voice n | p50 ms | p90 ms | loop lag worst p99 ms |", "|---|---|---|---|---|",
             f"| ours (recording off) | {a.n} | {_f(a.p50)} | {_f(a.p90)} | {_f(la, 1)} |",
             f"| ours-recording | {b.n} | {_f(b.p50)} | {_f(b.p90)} | {_f(lb, 1)} |", ""]
    if calls:
        lines += [f"Recorder: {calls} calls, {secs:.0f} s recorded, CPU per call {cost['cpu_s'] / calls:.2f} s "
                  f"(max {cost['cpu_max_s']:.2f} s), disk {cost['kb'] / 1000 / secs * 3600:.1f} MB per hour of calls."
                  if secs else f"Recorder: {calls} calls, nothing recorded."]
    else:
        lines += ["Recorder: NO recording log lines in the recording server's log: cost not measured."]
    return lines, recording_verdict((a.n, a.p50, la), (b.n, b.p50, lb), calls)


def recording_verdict(off: tuple[int, float, float], on: tuple[int, float, float], calls: int,
                      what: str = "recording") -> str:
    """(turns, voice-to-voice p50, loop-lag p99) off and on: growth, none, or "not judged"."""
    (n_off, v_off, lag_off), (n_on, v_on, lag_on) = off, on
    if min(n_off, n_on) < MIN_JUDGED_TURNS or not calls or math.isnan(v_off) or math.isnan(v_on):
        return f"not judged (fewer than {MIN_JUDGED_TURNS} turns a run, or no {what} figures)"
    # The bench's own noise rule for a stage (x 1.6 and + 100 ms), and 5 ms of loop-lag p99.
    slower = v_on > v_off * 1.6 and v_on > v_off + 100
    lag = not math.isnan(lag_off) and not math.isnan(lag_on) and lag_on > lag_off + 5
    if slower or lag:
        return f"GROWTH with {what} on: " + ", ".join(
            x for x, bad in (("voice-to-voice p50", slower), ("loop-lag p99", lag)) if bad)
    return "no growth beyond noise (voice-to-voice p50 within x1.6 / +100 ms, loop-lag p99 within +5 ms)"


# The "ours-tracing" runs (``--tracing``): the same server sending one trace per call (bot/telemetry/tracing.py)
# to a collector in the bench's process that answers at once, and to one that answers each export after
# 3 s (past the exporter's 2 s timeout: every export of that run times out).
TRACING_RUNS = {"ours-tracing": 0.0, "ours-tracing-slow": 3.0}


def _unanswered(st: RunStats) -> int:
    return sum(1 for r in st.rows if r["caller"] and r["caller"]["speech_start"] is not None
               and (r["caller"]["no_answer"] or r["server"] is None))


def tracing_comparison(off: RunStats, on: RunStats, traced: dict[str, int]) -> tuple[list[str], str]:
    """Tracing on vs off in the same run: voice-to-voice, loop lag and unanswered turns of each, the traces the
    collector got; the verdict (``run_bench`` fails on anything but "no growth"). ``traced``: ``calls`` placed,
    ``traces`` the collector got for them (a call span each), ``turns`` turn spans, ``records`` turn records."""
    runs = []
    for st in (off, on):
        v2v = {r.stage: r for r in summarize(st.records, LatencyConfig())}["voice_to_voice"]
        runs.append((st, v2v, (st.run.loop_lag_worst or {}).get("p99_ms", math.nan), _unanswered(st)))
    lines = [f"## Tracing on vs off: {on.run.system} (the same calls, two configs)", "",
             "| run | voice-to-voice n | p50 ms | p90 ms | loop lag worst p99 ms | unanswered turns |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {st.run.system} | {v.n} | {_f(v.p50)} | {_f(v.p90)} | {_f(lag, 1)} | {lost} |"
              for st, v, lag, lost in runs]
    lines += ["", f"Collector: {traced.get('traces', 0)} trace(s) for {traced.get('calls', 0)} call(s) placed, "
              f"{traced.get('turns', 0)} turn span(s) for {traced.get('records', 0)} answered turn record(s)", ""]
    (_, a, la, lost_off), (_, b, lb, lost_on) = runs
    verdict = recording_verdict((a.n, a.p50, la), (b.n, b.p50, lb), traced.get("calls", 0), "tracing")
    if lost_on > lost_off:
        verdict = f"GROWTH with tracing on: {lost_on - lost_off} more unanswered turn(s)" + (
            f"; {verdict}" if verdict.startswith("GROWTH") else "")
    return lines, verdict


# The call's own features (bot/call/: turn-taking, canned audio), switched off for the "ours-basic" run.
FEATURES_OFF = ("turn.korean_endpointing=false", "turn.speculative_reply=false", "tts.canned_audio=false")


def _ttfa_section(stats: list[RunStats]) -> list[str]:
    """What the caller waits for, every run side by side (ratios against stock when it ran)."""
    by = {st.run.system: st for st in stats}
    stock = _dist(by["stock"].caller_ttfa) if "stock" in by else None
    lines = ["## Caller-side time to first audio, all runs", "",
             "| run | turns | p50 ms | p90 ms | p99 ms | p50 / stock | cut off early | LLM calls cancelled |",
             "|---|---|---|---|---|---|---|---|"]
    for st in stats:
        d = _dist(st.caller_ttfa)
        ratio = f"{d['p50'] / stock['p50']:.2f}" if stock and stock["p50"] and not math.isnan(d["p50"]) else "-"
        cut = sum(c["cut_off_early"] for c in st.caller_turns())
        cancelled = sum(getattr(r, "llm_cancelled_calls", 0) for r in st.records)
        lines.append(f"| {st.run.system} | {len(st.caller_ttfa)} | {_f(d['p50'])} | {_f(d['p90'])} | {_f(d['p99'])} | "
                     f"{ratio} | {cut} | {cancelled} |")
    lines += ["", "ours = Korean end-of-turn waits + speculative reply + canned audio; ours-basic = the same server "
              f"with {', '.join(FEATURES_OFF)}; stock = bot/app/stock.py.", ""]
    return lines


def _machine_lines(meta: dict) -> list[str]:
    return [f"- {k}: {v}" for k, v in meta.items()]


def machine_meta(n_calls: int, turn_set: TurnSet | None, argv: list[str] | None = None) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        pipecat_version = version("pipecat-ai")
    except PackageNotFoundError:  # pragma: no cover
        pipecat_version = "?"
    try:
        rev = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True,
                             timeout=5).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):  # pragma: no cover
        rev = "?"
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": " ".join(argv) if argv else "-",
        "concurrent calls (N)": n_calls,
        "turn set": str(turn_set.path) if turn_set else "-",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "pipecat": pipecat_version,
        "git": rev,
    }
    return meta


def render_report(runs: list[RunResult], meta: dict, budgets: LatencyConfig, turn_set: TurnSet | None = None,
                  recording: dict[str, float] | None = None, tracing: dict[str, dict[str, int]] | None = None) -> str:
    """The markdown report: machine and environment header, then one section per run, then ratios."""
    stats = [RunStats.of(r) for r in runs]
    first_env = runs[0].environment if runs else {}
    lines = ["# Voice agent bench", "", "Escape hatches (printed beside every latency report):", "",
             *_hatch_lines(first_env), "", "Machine and run:", "", *_machine_lines(meta), "",
             f"Budgets (this config): stt {budgets.stt_ms} ms, llm {budgets.llm_ms} ms, tts {budgets.tts_ms} ms, "
             f"voice-to-voice {budgets.total_ms} ms.", ""]
    if turn_set is not None:
        lines += ["Turn set:", "", "| turn | label | text | expected route | speech s |", "|---|---|---|---|---|"]
        lines += [f"| {t.id} | {t.label} | {t.text} | {t.route} | {t.speech_end_s - t.speech_start_s:.2f} |"
                  for t in turn_set.turns.values()]
        lines += ["", "Calls (call i plays script i mod " + str(len(turn_set.calls)) + "): "
                  + "; ".join(" -> ".join(c) for c in turn_set.calls), ""]
    problems = bench_problems(stats, budgets)
    lines += (["## BENCH FAILED: these figures cannot be trusted", "", *(f"- {p}" for p in problems), ""] if problems
              else ["Bench: every call of every server completed"
                    + (", every ours/stock ratio computed." if any(r.system == "stock" for r in runs) else "."),
                    ""])
    for st in stats:
        lines += _run_section(st, budgets)
    by = {st.run.system: st for st in stats}
    if "ours" in by and "stock" in by:
        lines += _ratio_section(by["ours"], by["stock"], budgets)
    if "ours" in by and "ours-recording" in by:
        lines += _recording_section(by["ours"], by["ours-recording"], budgets, recording or {})
    for system in TRACING_RUNS:
        if "ours" in by and system in by:
            section, verdict = tracing_comparison(by["ours"], by[system], (tracing or {}).get(system, {}))
            lines += [*section, f"Verdict: {verdict}.", ""]
    if len(by) > 1:
        lines += _ttfa_section(stats)
    lines += ["---", "", "Definitions: caller TTFA runs from the moment the caller's last speech frame was sent (the "
              "clip's trailing silence is not part of the speech: its end comes from the energy envelope) to the "
              "first audible bot media after it (arrival at the caller). Cut-off-early turns (bot audio while the "
              "caller was still sending speech) are counted, not included in the TTFA distribution. Server stages "
              "come from the server's own turn records (bot/telemetry/latency.py STAGES). latency.png has the CDFs, "
              "turns.jsonl every turn.", ""]
    return "\n".join(lines)




def write_outputs(out_dir: str | Path, runs: list[RunResult], meta: dict, budgets: LatencyConfig,
                  turn_set: TurnSet | None = None, recording: dict[str, float] | None = None,
                  tracing: dict[str, dict[str, int]] | None = None) -> dict[str, Path]:
    """Write report.md, latency.png and turns.jsonl; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"report": out / "report.md", "plot": out / "latency.png", "turns": out / "turns.jsonl"}
    paths["report"].write_text(render_report(runs, meta, budgets, turn_set, recording, tracing), encoding="utf-8")
    plot_cdfs(runs, paths["plot"])
    with paths["turns"].open("w", encoding="utf-8") as f:
        for run in runs:
            for row in run.rows():
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return paths


# --------------------------------------------------------------------------------- command
