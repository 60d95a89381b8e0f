"""``bench --find-capacity``: how many concurrent calls one worker holds within the budgets.

The bench raises the number of concurrent calls, 1, 2, 4, ... up to ``--capacity-max``, then
halves the gap between the last level that held and the first that broke. Each level is a bench
run of its own against the same server, with enough rounds for ``--capacity-min-turns`` turns.

A level **holds** when the server's voice-to-voice p90 is within ``[latency] total_ms``, its
event-loop lag p99 within ``LAG_P99_LIMIT_MS`` and every spoken turn was answered. It **breaks**
on any of those (an unanswered turn waited longer than any budget). It **cannot be judged** when a
call errored, when it has fewer turns than asked or when the server gave no loop-lag figure: the
search stops there and the bench exits 3, as it does for any run whose figures cannot be trusted.

This module is the rule and the search; ``run_capacity`` in ``bot/tools/bench/__init__.py`` places
the calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.telemetry.latency import percentile
from bot.tools.bench.stats import RunStats, _f, calls_per_worker

# A worker whose timers fire 20 ms late (p99) sends audio frames a frame late: the caller hears gaps.
LAG_P99_LIMIT_MS = 20.0
DEFAULT_MIN_TURNS = 10  # a p90 of fewer turns is the worst turn or two


@dataclass(frozen=True)
class LevelFigures:
    """One level's run: ``calls`` at once, and what the server and the callers measured."""

    calls: int
    turns: int  # turns with a server voice_to_voice
    v2v_p50: float
    v2v_p90: float
    lag_p99: float  # the server's event-loop lag, ms; NaN: not measured
    unanswered: int = 0  # spoken turns the bot did not answer within --answer-timeout
    errored: int = 0  # calls that errored (rejected, no greeting, stream closed early)
    rounds: int = 1
    caller_lag_ms: float = 0.0  # the simulator's worst frame send lag: the bench machine's own load
    workers: int = 1  # workers that ran the calls (the records' ``worker``; several behind a proxy)
    load_avg: float = math.nan  # the machine's 1-min load average when the level ended (a shared box)

    @classmethod
    def of(cls, stats: RunStats, calls: int, rounds: int) -> LevelFigures:
        """A level's figures from its run. Loop lag: the worse of the samples since the run began and
        the worst 60-s window polled during it (a window may reach into the level before, which held)."""
        run = stats.run
        lags = [v for v in ((run.loop_lag_run or {}).get("p99_ms"), (run.loop_lag_worst or {}).get("p99_ms"))
                if isinstance(v, (int, float)) and not math.isnan(v)]
        return cls(
            calls=calls, turns=len(stats.v2v), v2v_p50=percentile(stats.v2v, 50), v2v_p90=percentile(stats.v2v, 90),
            lag_p99=max(lags) if lags else math.nan,
            unanswered=sum(bool(c["no_answer"]) for c in stats.caller_turns()),
            errored=sum(1 for c in run.calls if c.error), rounds=rounds,
            caller_lag_ms=max((c.max_send_lag_ms for c in run.calls), default=0.0),
            workers=max(1, len(calls_per_worker(run))),
        )  # fmt: skip


@dataclass(frozen=True)
class LevelVerdict:
    held: bool
    judged: bool
    why: str
    broke_on: tuple[str, ...] = ()  # the limits crossed: "voice_to_voice p90", "event-loop lag p99", ...


def judge_level(f: LevelFigures, *, budget_ms: float, min_turns: int = DEFAULT_MIN_TURNS,
                lag_limit_ms: float = LAG_P99_LIMIT_MS) -> LevelVerdict:
    """Held, broke (and on what), or not judged (and why)."""
    if f.errored:
        return LevelVerdict(False, False, f"not judged: {f.errored} call(s) errored")
    broke = []
    if f.unanswered:
        broke.append(("unanswered turns", f"{f.unanswered} turn(s) not answered in time"))
    if f.turns < min_turns and not broke:
        return LevelVerdict(False, False, f"not judged: {f.turns} turn(s), fewer than {min_turns}")
    if math.isnan(f.lag_p99) and not broke:
        return LevelVerdict(False, False, "not judged: the server gave no event-loop lag figure")
    if f.v2v_p90 > budget_ms:
        broke.append(("voice_to_voice p90", f"voice_to_voice p90 {f.v2v_p90:.0f} ms > {budget_ms:.0f} ms"))
    if f.lag_p99 > lag_limit_ms:
        broke.append(("event-loop lag p99", f"event-loop lag p99 {f.lag_p99:.1f} ms > {lag_limit_ms:.0f} ms"))
    if broke:
        return LevelVerdict(False, True, "broke: " + "; ".join(w for _, w in broke), tuple(s for s, _ in broke))
    return LevelVerdict(True, True, f"held: voice_to_voice p90 {f.v2v_p90:.0f} ms, loop lag p99 {f.lag_p99:.1f} ms")


def next_level(tried: dict[int, LevelVerdict], max_calls: int) -> int | None:
    """The next number of calls to try; None when the search is over.

    Doubling until a level breaks (or ``max_calls``), then halving the gap between the highest level
    that held and the lowest that broke. A level that could not be judged ends the search.
    """
    if any(not v.judged for v in tried.values()):
        return None
    held = max((n for n, v in tried.items() if v.held), default=0)
    broke = min((n for n, v in tried.items() if not v.held), default=None)
    if broke is None:
        return None if held >= max_calls else min(max(1, 2 * held), max_calls)
    return None if broke - held <= 1 else (held + broke) // 2


@dataclass
class CapacityResult:
    """The levels tried, in order, and what they add up to."""

    budget_ms: float
    max_calls: int
    lag_limit_ms: float = LAG_P99_LIMIT_MS
    levels: list[tuple[LevelFigures, LevelVerdict]] = field(default_factory=list)

    @property
    def unjudged(self) -> tuple[LevelFigures, LevelVerdict] | None:
        return next(((f, v) for f, v in self.levels if not v.judged), None)

    @property
    def held(self) -> int:
        """The most calls at once that held (0: one call already broke the budget)."""
        return max((f.calls for f, v in self.levels if v.held), default=0)

    @property
    def broke(self) -> tuple[LevelFigures, LevelVerdict] | None:
        """The fewest calls at once that broke, and why."""
        return min(((f, v) for f, v in self.levels if v.judged and not v.held), key=lambda fv: fv[0].calls,
                   default=None)

    def figure(self) -> str:
        """The one-line answer: calls per worker, the level that broke and the limit that broke it."""
        bad = self.unjudged
        if bad is not None:
            return (f"Capacity NOT judged: at {bad[0].calls} call(s) {bad[1].why.removeprefix('not judged: ')}"
                    + (f" (held up to {self.held} before)" if self.held else ""))
        broke = self.broke
        workers = max((f.workers for f, v in self.levels if v.held), default=1)
        per = f" over {workers} workers ({self.held / workers:g} per worker)" if workers > 1 else " per worker"
        if broke is None:
            return (f"Capacity: at least {self.held} concurrent call(s){per}: every level up to --capacity-max "
                    f"{self.max_calls} held (raise it to find the limit)")
        f, v = broke
        if not self.held:
            return f"Capacity: 0 calls: one call already breaks the limits ({v.why.removeprefix('broke: ')})"
        return (f"Capacity: {self.held} concurrent call(s){per} (held at {self.held}; broke at {f.calls} on "
                f"{' and '.join(v.broke_on)}: {v.why.removeprefix('broke: ')})")


def find_capacity(measure: Callable[[int, int], LevelFigures], *, max_calls: int, budget_ms: float,
                  min_turns: int = DEFAULT_MIN_TURNS, lag_limit_ms: float = LAG_P99_LIMIT_MS,
                  rounds_for: Callable[[int], int] = lambda n: 1) -> CapacityResult:
    """Run ``measure(calls, rounds)`` at each level ``next_level`` picks and judge it."""
    if max_calls < 1 or min_turns < 1:
        raise ValueError(f"--capacity-max and --capacity-min-turns must be at least 1 (got {max_calls}, {min_turns})")
    result = CapacityResult(budget_ms, max_calls, lag_limit_ms)
    tried: dict[int, LevelVerdict] = {}
    level = next_level(tried, max_calls)
    while level is not None:
        figures = measure(level, rounds_for(level))
        verdict = judge_level(figures, budget_ms=budget_ms, min_turns=min_turns, lag_limit_ms=lag_limit_ms)
        result.levels.append((figures, verdict))
        tried[level] = verdict
        level = next_level(tried, max_calls)
    return result


def rounds_for_turns(min_turns: int, turns_per_call: float, at_least: int = 1) -> Callable[[int], int]:
    """Rounds a level of N calls needs for ``min_turns`` turns (its calls play ``turns_per_call`` on average)."""
    return lambda n: max(at_least, math.ceil(min_turns / max(1e-9, n * turns_per_call)))


def render_capacity(result: CapacityResult, config_lines: list[str]) -> str:
    """``capacity.md``: the config, the limits, every level tried and the figure."""
    lines = ["# Capacity: concurrent calls one worker holds", "", "Config:", "", *config_lines, "",
             f"Limits: voice_to_voice p90 <= {result.budget_ms:.0f} ms ([latency] total_ms), event-loop lag p99 <= "
             f"{result.lag_limit_ms:.0f} ms, every spoken turn answered.", "",
             "| calls | rounds | turns | v2v p50 ms | v2v p90 ms | loop lag p99 ms | unanswered | errored "
             "| caller send lag max ms | load avg | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for f, v in result.levels:
        lines.append(f"| {f.calls} | {f.rounds} | {f.turns} | {_f(f.v2v_p50)} | {_f(f.v2v_p90)} | {_f(f.lag_p99, 1)} | "
                     f"{f.unanswered} | {f.errored} | {f.caller_lag_ms:.0f} | {_f(f.load_avg, 1)} | {v.why} |")
    if any(f.caller_lag_ms > 50 for f, _ in result.levels):
        lines += ["", "The caller simulator sent frames over 50 ms late at some level: the bench shares the "
                  "machine with the server, so those levels measured both."]
    lines += ["", result.figure(), ""]
    return "\n".join(lines)
