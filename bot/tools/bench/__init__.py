"""``run_bot.py bench``: latency as a distribution, from N simulated Twilio callers at once.

The bench places N calls at the same time over real sockets, exactly as Twilio would: a signed
``/twilio/voice`` webhook, the TwiML's one-time stream token, then the Media Streams WebSocket
with a caller line that sends 20 ms of 8 kHz mu-law every 20 ms (silence between utterances).
Each call plays a scripted conversation from the turn set (``bench/turns.toml``): wait until the
bot has finished speaking, pause 0.3-1.0 s, speak the next clip; after the last turn the caller
hangs up with ``stop`` (unless the bot already ended the call, as it does after a goodbye).

Two views of every turn:

* caller side (measured here): time to first audio = from the moment the caller's last SPEECH
  frame was sent (the clip's trailing silence excluded: ``speech_bounds`` finds the speech in the
  clip's energy envelope, and only the clip up to there is sent; the line then carries silence)
  to the first audible bot media after it. A turn is "cut off early" when the bot's first audio
  for it arrived while the caller was still sending speech (its TTFA is then negative and left
  out of the TTFA distribution).
* server side: after the calls, ``GET /api/turns?since=<bench start>`` gives the server's own turn
  records (marks and stages, route, LLM calls, interruptions) and its environment; records are
  matched to caller turns by call (``call_id`` = CallSid) and time (the server record whose
  speech end falls between this utterance's start and the next one's).

Writes ``DIR/report.md`` (environment and escape hatches, per-stage p50/p90/p99, budgets, LLM
calls per turn, shortcut share, route mix and expected-vs-actual routes, interruptions, event-loop
lag, caller TTFA beside the server's voice_to_voice), ``DIR/latency.png`` (CDFs) and
``DIR/turns.jsonl`` (one line per turn: server record + caller-side fields).

Without ``--url`` the bench starts the server itself (``run_bot.py`` in a subprocess, with the
given ``--config``/``--set``, a random TWILIO_AUTH_TOKEN and no TWILIO_ACCOUNT_SID so nothing
reaches Twilio's REST API) and, unless ``--no-fake-llm``, a fake vLLM in this process
(``bot.testing.fake_llm.FakeLLM``, first token after 150 ms, 3 characters per 10 ms). With
``--baseline stock`` the same calls then run against ``python -m bot.app.stock`` (stock Pipecat parts,
see ``bot/app/stock.py``) and the report puts ours/stock ratios side by side. The servers run one
after the other, never at once, so they do not compete for the CPU.

``--find-capacity`` runs the calls at rising numbers at once against one server until a level
breaks voice-to-voice p90 (``[latency] total_ms``) or event-loop lag p99 (20 ms), and prints the
calls per worker that held (``bot/tools/bench/capacity.py``; ``DIR/capacity.md``, ``DIR/level-N/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets as pysecrets
import sys
from pathlib import Path

from loguru import logger

from bot.config import Config
from bot.tools import baseline
from bot.tools.bench.caller import CallerTurn, CallResult, Target, run_call
from bot.tools.bench.plot import plot_cdfs
from bot.tools.bench.report import (
    FEATURES_OFF,
    RECORDING_ON,
    TRACING_RUNS,
    bench_problems,
    machine_meta,
    recording_comparison,
    recording_cost,
    render_report,
    tracing_comparison,
    write_outputs,
)
from bot.tools.bench.runner import RunResult, ServerProcess, bench_responder, records_token, run_bench_calls
from bot.tools.bench.stats import RunStats, calls_per_worker
from bot.tools.bench.turnset import DEFAULT_TURNS, ROOT, ROUTES, BenchError, Turn, TurnSet, load_turn_set, speech_bounds

__all__ = [
    "BenchError",
    "CallResult",
    "CallerTurn",
    "DEFAULT_TURNS",
    "FEATURES_OFF",
    "ROOT",
    "ROUTES",
    "RunResult",
    "RunStats",
    "ServerProcess",
    "Target",
    "Turn",
    "TurnSet",
    "bench_problems",
    "bench_responder",
    "calls_per_worker",
    "load_turn_set",
    "machine_meta",
    "plot_cdfs",
    "records_token",
    "render_report",
    "run_bench",
    "run_bench_calls",
    "run_call",
    "speech_bounds",
    "write_outputs",
]


def _http_to_ws(url: str) -> str:
    if url.startswith("https://"):
        return "wss://" + url[len("https://"):]
    if url.startswith("http://"):
        return "ws://" + url[len("http://"):]
    raise BenchError(f"--url must start with http:// or https://, not {url!r}")


def _url_target(config: Config, args, url: str, auth: str | None, admin_url: str | None = None) -> Target:
    """A running server to call (``--url``, ``--baseline-url``)."""
    if not auth:
        logger.warning("bench: no --auth-token / TWILIO_AUTH_TOKEN: webhooks go unsigned")
    base = url.rstrip("/")
    host = args.public_host or config.server.public_host
    return Target(base, f"https://{host}/twilio/voice", _http_to_ws(base) + "/twilio/media", auth,
                  records_token=records_token(args), admin_url=admin_url)


def run_bench(config: Config, args) -> int:
    """``run_bot.py bench``: see the module doc. ``args``: the parsed bench options."""
    if getattr(args, "find_capacity", False):
        return run_capacity(config, args)
    turn_set = load_turn_set(args.turns)
    n = args.calls
    if n < 1:
        raise BenchError("--calls must be at least 1")
    out = Path(args.out)
    fake = args.fake_llm if args.fake_llm is not None else not args.url
    if args.url and fake:
        raise BenchError("--fake-llm needs the bench to start the server (no --url): a running server has its own LLM")
    if args.url and args.baseline and not args.baseline_url:
        raise BenchError("--baseline stock with --url needs --baseline-url (a running `python -m bot.app.stock` server)")
    if not args.url and n > config.server.max_calls:
        raise BenchError(f"--calls {n} > server.max_calls {config.server.max_calls}: the server would reject calls "
                         f"(add --set server.max_calls={n})")
    recording = getattr(args, "recording", False)
    tracing = getattr(args, "tracing", False)
    systems = (["ours"] + (["ours-basic"] if args.features_off else []) + (["ours-recording"] if recording else [])
               + (list(TRACING_RUNS) if tracing else []) + (["stock"] if args.baseline else []))
    if args.url and (args.features_off or recording or tracing):
        raise BenchError("--features-off, --recording and --tracing need the bench to start the servers (no --url)")
    auth = args.auth_token or os.environ.get("TWILIO_AUTH_TOKEN")
    compare_to = getattr(args, "compare", None)
    try:
        baseline.NoiseRule.from_args(args)
    except ValueError as e:
        raise BenchError(str(e)) from None
    try:  # a bad baseline fails before any call is placed
        base = baseline.load(compare_to) if compare_to else None
    except ValueError as e:
        raise BenchError(str(e)) from None
    first_token_ms, char_ms = _fake_llm_delays(args)
    fake_llm = None
    runs: list[RunResult] = []
    traced: dict[str, dict[str, int]] = {}
    try:
        if fake:
            from bot.testing.fake_llm import FakeLLM

            fake_llm = FakeLLM(first_token_delay=first_token_ms / 1000, token_delay=char_ms * FAKE_CHUNK_CHARS / 1000,
                               chunk_chars=FAKE_CHUNK_CHARS, responder=bench_responder).start()
            logger.info("bench: fake LLM at {} (first token {} ms, {} ms per character)", fake_llm.base_url,
                        first_token_ms, char_ms)
        for system in systems:
            url = args.url if system == "ours" else args.baseline_url
            if url:
                target = _url_target(config, args, url, auth)
                runs.append(asyncio.run(run_bench_calls(system, target, turn_set, n, seed=args.seed,
                                                        answer_timeout=args.answer_timeout, progress=not args.no_progress,
                                                        rounds=args.rounds)))
                continue
            overrides = list(args.overrides)
            if system == "ours-basic":
                overrides += list(FEATURES_OFF)
            if system == "ours-recording":
                overrides += [*RECORDING_ON, f"recording.dir='{(out / 'recordings').resolve()}'"]
            collector = None
            if system in TRACING_RUNS:  # a collector in this process, live or slow (bot/testing/otlp_receiver.py)
                from bot.testing.otlp_receiver import OTLPReceiver

                collector = OTLPReceiver(delay_secs=TRACING_RUNS[system]).start()
                overrides.append(f"telemetry.otlp_endpoint='{collector.endpoint}'")
            if fake_llm is not None:
                overrides.append(f"llm.base_url='{fake_llm.base_url}'")
            overrides.append(f"records.url='sqlite:///{(out / 'records' / system / 'calls.db').resolve()}'")
            server = ServerProcess(system, args.config, overrides, out / f"server-{system}.log", pysecrets.token_hex(16))
            try:
                logger.info("bench: starting the {} server (log: {})", system, server.log_path)
                server.wait_ready()
                runs.append(asyncio.run(run_bench_calls(system, server.target, turn_set, n, seed=args.seed,
                                                        answer_timeout=args.answer_timeout,
                                                        progress=not args.no_progress, rounds=args.rounds)))
            finally:
                server.stop()  # its traces are flushed as it exits
                if collector is not None:
                    collector.stop()
                    traced[system] = _traced(runs[-1] if runs and runs[-1].system == system else None, collector)
    finally:
        if fake_llm is not None:
            fake_llm.stop()
    meta = machine_meta(n, turn_set, getattr(args, "argv", None))
    meta["rounds"] = args.rounds
    if fake:
        meta["LLM"] = (f"fake vLLM (bot/testing/fake_llm.py): first token {first_token_ms:g} ms, "
                       f"{char_ms:g} ms per character")
    cost = None
    if recording and (out / "server-ours-recording.log").exists():
        cost = recording_cost((out / "server-ours-recording.log").read_text(encoding="utf-8", errors="replace"))
    paths = write_outputs(out, runs, meta, config.latency, turn_set, recording=cost, tracing=traced)
    print(paths["report"].read_text(encoding="utf-8"))
    print(f"wrote {paths['report']}, {paths['plot']}, {paths['turns']}", file=sys.stderr)
    problems = bench_problems([RunStats.of(r) for r in runs], config.latency)
    for problem in problems:
        print(f"bench FAILED: {problem}", file=sys.stderr)
    failed = BENCH_FAILED if problems else 0
    if recording and not problems:
        by = {r.system: RunStats.of(r) for r in runs}
        _, verdict = recording_comparison(by["ours"], by["ours-recording"], config.latency, cost or {})
        if not verdict.startswith("no growth"):  # growth, or a comparison it could not judge
            print(f"bench FAILED: recording on vs off: {verdict}", file=sys.stderr)
            failed = 1
    if tracing and not problems:
        by = {r.system: RunStats.of(r) for r in runs}
        for system in TRACING_RUNS:
            _, verdict = tracing_comparison(by["ours"], by[system], traced.get(system, {}))
            if not verdict.startswith("no growth"):
                print(f"bench FAILED: {system} vs off: {verdict}", file=sys.stderr)
                failed = 1
    if not (getattr(args, "save_baseline", None) or base):
        return failed
    set_path = Path(turn_set.path).resolve()
    settings = {"calls": n, "rounds": args.rounds, "overrides": list(args.overrides),
                "turn_set": str(set_path.relative_to(ROOT) if set_path.is_relative_to(ROOT) else set_path),
                "fake_llm": {"first_token_ms": first_token_ms, "char_ms": char_ms} if fake else None}
    now = baseline.summarize_run(RunStats.of(runs[0]), meta=meta, settings=settings)
    busy = baseline.overload(now, baseline.NoiseRule.from_args(args))
    if args.save_baseline and problems:
        print(f"baseline NOT saved to {args.save_baseline}: the run failed (above)", file=sys.stderr)
    elif args.save_baseline and busy is not None:
        print(f"baseline NOT saved to {args.save_baseline}: {busy.detail}", file=sys.stderr)
        failed = failed or baseline.OVERLOADED_EXIT
    elif args.save_baseline:
        print(f"wrote baseline {baseline.save(args.save_baseline, now)}", file=sys.stderr)
    if base is None:
        return failed
    rule = baseline.NoiseRule.from_args(args)
    allow = bool(getattr(args, "allow_unjudged", False))
    findings = baseline.compare(base, now, rule)
    text = baseline.render(base, now, findings, rule, base_path=str(compare_to), allow_unjudged=allow)
    (out / "compare.md").write_text(text, encoding="utf-8")
    print(text)
    code = baseline.exit_code(findings, allow_unjudged=allow)
    # An overloaded machine also errors calls (exit 3): the run is not judged either way.
    return code if code == baseline.OVERLOADED_EXIT else failed or code


def run_capacity(config: Config, args) -> int:
    """``bench --find-capacity``: rising numbers of calls at once against one server until a limit
    breaks (``bot/tools/bench/capacity.py``); writes DIR/capacity.md and DIR/level-N/ (each level's
    report). Exit 0 with the figure, 3 when a level could not be judged."""
    from bot.tools.bench.capacity import (
        DEFAULT_MIN_TURNS,
        LevelFigures,
        find_capacity,
        render_capacity,
        rounds_for_turns,
    )
    from bot.tools.bench.report import _environment_lines

    for flag in ("baseline", "compare", "save_baseline", "features_off", "recording", "tracing"):
        if getattr(args, flag, None):
            raise BenchError(f"--find-capacity runs one server at rising load: --{flag.replace('_', '-')} does not "
                             "go with it")
    if args.calls != 1:
        raise BenchError("--find-capacity picks the number of calls itself: leave out --calls")
    max_calls = args.capacity_max
    min_turns = DEFAULT_MIN_TURNS if args.capacity_min_turns is None else args.capacity_min_turns
    if max_calls < 1 or min_turns < 1:
        raise BenchError(f"--capacity-max and --capacity-min-turns must be at least 1 (got {max_calls}, {min_turns})")
    turn_set = load_turn_set(args.turns)
    per_call = sum(len(c) for c in turn_set.calls) / len(turn_set.calls)
    out = Path(args.out)
    fake = args.fake_llm if args.fake_llm is not None else not args.url
    if args.url and fake:
        raise BenchError("--fake-llm needs the bench to start the server (no --url): a running server has its own LLM")
    first_token_ms, char_ms = _fake_llm_delays(args)
    config_lines = [f"- config: {args.config or 'config.toml'}; --set: {', '.join(args.overrides) or 'none'}"]
    env: dict = {}

    with contextlib.ExitStack() as stack:
        if fake:
            from bot.testing.fake_llm import FakeLLM

            fake_llm = FakeLLM(first_token_delay=first_token_ms / 1000, token_delay=char_ms * FAKE_CHUNK_CHARS / 1000,
                               chunk_chars=FAKE_CHUNK_CHARS, responder=bench_responder).start()
            stack.callback(fake_llm.stop)
            config_lines.append(f"- fake LLM (bot/testing/fake_llm.py): first token {first_token_ms:g} ms, "
                                f"{char_ms:g} ms per character")
        if args.url:
            target = _url_target(config, args, args.url, args.auth_token or os.environ.get("TWILIO_AUTH_TOKEN"),
                                 args.admin_url)
            config_lines.append(f"- server: {args.url} (its own config; the budget is this config's)")
        else:
            overrides = [*args.overrides, f"records.url='sqlite:///{(out / 'records' / 'calls.db').resolve()}'"]
            if fake:
                overrides.append(f"llm.base_url='{fake_llm.base_url}'")
            if config.server.max_calls < max_calls:
                overrides.append(f"server.max_calls={max_calls}")  # admission only: the search finds the limit
                config_lines.append(f"- server.max_calls raised to {max_calls} for the search")
            server = ServerProcess("ours", args.config, overrides, out / "server-ours.log", pysecrets.token_hex(16))
            stack.callback(server.stop)
            logger.info("bench: starting the server (log: {})", server.log_path)
            server.wait_ready()
            target = server.target

        def measure(calls: int, rounds: int) -> LevelFigures:
            run = asyncio.run(run_bench_calls("ours", target, turn_set, calls, seed=args.seed,
                                              answer_timeout=args.answer_timeout, progress=not args.no_progress,
                                              rounds=rounds))
            env.update(run.environment or {})
            meta = machine_meta(calls, turn_set, getattr(args, "argv", None))
            meta["rounds"] = rounds
            write_outputs(out / f"level-{calls}", [run], meta, config.latency, turn_set)
            figures = dataclasses.replace(LevelFigures.of(RunStats.of(run), calls, rounds), load_avg=os.getloadavg()[0])
            logger.info("bench: {} call(s) at once x {} round(s): {} turns, voice_to_voice p90 {:.0f} ms, loop lag "
                        "p99 {:.1f} ms", calls, rounds, figures.turns, figures.v2v_p90, figures.lag_p99)
            return figures

        result = find_capacity(measure, max_calls=max_calls, budget_ms=config.latency.total_ms, min_turns=min_turns,
                               rounds_for=rounds_for_turns(min_turns, per_call, args.rounds))
    config_lines += [*_environment_lines(env), f"- machine: {machine_meta(0, None)['machine']}"]
    text = render_capacity(result, config_lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {out / 'capacity.md'} and each level's report in {out}/level-N/", file=sys.stderr)
    return 0 if result.unjudged is None else BENCH_FAILED


# A turn record with any of these has a turn span (bot/telemetry/tracing.py: a turn nothing happened in has none).
TRACED_MARKS = ("speech_end", "vad_stop", "stt_done", "turn_end", "llm_request", "llm_first_token", "first_sentence",
                "tts_first_audio", "first_audio_out")


def _traced(run: RunResult | None, collector) -> dict[str, int]:
    """What the collector got for the run's calls: traces (a call span each), turn spans, and the turn records."""
    if run is None:
        return {}
    ids = {c.call_id for c in run.calls}
    traces = {sp.trace_id for sp in collector.spans if sp.name == "call" and sp.attributes.get("call.id") in ids}
    return {"calls": len(ids), "traces": len(traces),
            "turns": sum(1 for sp in collector.spans if sp.name == "turn" and sp.trace_id in traces),
            "records": sum(1 for t in run.server_turns if t.get("call_id") in ids and t.get("route") != "greeting"
                           and any(t.get(m) is not None for m in TRACED_MARKS))}


# Exit status when a call of any server errored or an ours/stock ratio could not be computed
# (1 is --compare's "slower than the baseline" or "not judged", or --recording's growth or "not judged";
# 2 a bench error before any call; 4, baseline.OVERLOADED_EXIT, --compare's "the bench machine was overloaded").
BENCH_FAILED = 3

# The bench's fake LLM streams its reply in chunks of this many characters.
FAKE_CHUNK_CHARS = 3


def _fake_llm_delays(args) -> tuple[float, float]:
    first = getattr(args, "fake_llm_first_token_ms", None)
    char = getattr(args, "fake_llm_char_ms", None)
    first, char = (150.0 if first is None else first), (10 / 3 if char is None else char)
    if first < 0 or char < 0:
        raise BenchError("--fake-llm-first-token-ms and --fake-llm-char-ms cannot be negative")
    return first, char
