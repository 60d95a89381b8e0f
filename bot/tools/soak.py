"""``run_bot.py bench --soak``: many calls over time; does the server give back what each call took?

Warm-up (a few calls one after another, then the concurrent batch once), then ``--soak-rounds``
rounds of ``--soak-sequential`` calls one after another followed by ``--soak-concurrent`` calls at
once. Every call is a real simulated Twilio call (signed webhook, media stream, greeting, one
spoken turn of the bench's turn set, hang-up). After each phase, once no call is active, the
server's operations ``/healthz`` (``server.admin_port``) gives its resident memory, asyncio task count and open file descriptors.

Limits: RSS at most 5 % above the post-warm-up baseline at every later sample; asyncio tasks and
open sockets back to the baseline once the calls of a phase have ended, other file descriptors
within the records database's pool (``FD_SLACK``); no failed call.
Writes ``DIR/soak.md``.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets as pysecrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from loguru import logger

from bot.config import Config
from bot.tools.bench import (
    BenchError,
    ServerProcess,
    Target,
    TurnSet,
    _http_to_ws,
    load_turn_set,
    records_token,
    run_call,
)
from bot.tools.bench.caller import _Clock

RSS_GROWTH_LIMIT_PCT = 5.0
# Sockets must come back to the baseline exactly. Other fds may grow by the records database's
# connection pool filling up (SQLAlchemy keeps up to 5 SQLite connections, a file and its WAL each,
# opened as concurrent calls need them), never beyond.
FD_SLACK = 10
SETTLE_SECS = 30.0  # longest wait for a phase's calls to be released


@dataclass
class Sample:
    phase: str
    calls: int  # calls placed so far (warm-up included)
    rss_mb: float
    tasks: int
    fds: int
    sockets: int
    failed: int  # failed calls in this phase
    secs: float  # how long the phase took


@dataclass
class SoakResult:
    samples: list[Sample] = field(default_factory=list)
    baseline: Sample | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def rss_growth_pct(self, s: Sample) -> float:
        return 100.0 * (s.rss_mb - self.baseline.rss_mb) / self.baseline.rss_mb if self.baseline else 0.0

    def judge(self) -> None:
        self.problems = []
        if self.baseline is None:
            self.problems.append("no baseline sample")
            return
        # Only what comes after the baseline is held to it: the start sample (what earlier calls of the
        # process left, e.g. a fault run's last task still closing) and the warm-up come before it.
        for s in self.samples[self.samples.index(self.baseline) + 1:]:
            growth = self.rss_growth_pct(s)
            if growth > RSS_GROWTH_LIMIT_PCT:
                self.problems.append(f"{s.phase}: RSS {s.rss_mb:.0f} MB, +{growth:.1f} % over the baseline")
            if s.tasks > self.baseline.tasks:
                self.problems.append(f"{s.phase}: {s.tasks} asyncio tasks, baseline {self.baseline.tasks}")
            if s.sockets > self.baseline.sockets:
                self.problems.append(f"{s.phase}: {s.sockets} open sockets, baseline {self.baseline.sockets}")
            if s.fds > self.baseline.fds + FD_SLACK:
                self.problems.append(f"{s.phase}: {s.fds} open fds, baseline {self.baseline.fds} (+{FD_SLACK} allowed)")
        for s in self.samples:
            if s.failed:
                self.problems.append(f"{s.phase}: {s.failed} call(s) failed")


async def _health(client: httpx.AsyncClient, base_url: str) -> dict:
    return (await client.get(f"{base_url}/healthz", timeout=10)).json()


async def _settled(client: httpx.AsyncClient, base_url: str, tasks_at_most: int | None) -> dict:
    """/healthz once no call is active and (given a baseline) the task count is back, or after SETTLE_SECS."""
    deadline = time.monotonic() + SETTLE_SECS
    while True:
        h = await _health(client, base_url)
        idle = h.get("active_calls", 0) == 0
        if idle and (tasks_at_most is None or h["asyncio_tasks"] <= tasks_at_most):
            await asyncio.sleep(0.5)  # let the last call's records and sockets go
            return await _health(client, base_url)
        if time.monotonic() > deadline:
            return h
        await asyncio.sleep(0.25)


async def soak(target: Target, turn_set: TurnSet, *, rounds: int, sequential: int, concurrent: int,
               warmup_sequential: int = 3, warmup_concurrent: bool = True, answer_timeout: float = 20.0) -> SoakResult:
    """Place the calls; sample /healthz after each phase (see the module doc)."""
    result = SoakResult()
    clock, placed = _Clock(), 0

    async def one(i: int) -> bool:
        script = turn_set.script(i)[:1]
        call = await run_call(target, script, clock=clock, rng=random.Random(i), answer_timeout=answer_timeout)
        ok = call.ended_by in ("caller", "bot") and call.error is None and not any(t.no_answer for t in call.turns)
        if not ok:
            logger.warning("soak: call {} failed: {} {}", i, call.ended_by, call.error)
        return ok

    async def phase(name: str, n: int, at_once: bool) -> None:
        nonlocal placed
        t0 = time.monotonic()
        if at_once:
            oks = await asyncio.gather(*(one(placed + k) for k in range(n)))
        else:
            oks = [await one(placed + k) for k in range(n)]
        placed += n
        base = result.baseline
        h = await _settled(client, target.admin_url or target.base_url, base.tasks if base else None)
        s = Sample(name, placed, h["rss_bytes"] / 2**20, h["asyncio_tasks"], h["open_fds"], h.get("open_sockets", 0),
                   oks.count(False), round(time.monotonic() - t0, 1))
        result.samples.append(s)
        logger.info("soak: {}: {} calls, RSS {:.1f} MB, {} tasks, {} fds ({} sockets), {} failed", name, n, s.rss_mb,
                    s.tasks, s.fds, s.sockets, s.failed)

    async with httpx.AsyncClient() as client:
        h = await _settled(client, target.admin_url or target.base_url, None)
        result.samples.append(Sample("start", 0, h["rss_bytes"] / 2**20, h["asyncio_tasks"], h["open_fds"],
                                     h.get("open_sockets", 0), 0, 0.0))
        if warmup_sequential:
            await phase("warm-up: one after another", warmup_sequential, False)
        if warmup_concurrent:
            await phase("warm-up: at once", concurrent, True)
        result.baseline = result.samples[-1]
        for r in range(1, rounds + 1):
            await phase(f"round {r}: {sequential} one after another", sequential, False)
            await phase(f"round {r}: {concurrent} at once", concurrent, True)
    result.judge()
    return result


def render(result: SoakResult, meta: dict) -> str:
    lines = ["# Soak", "", *[f"- {k}: {v}" for k, v in meta.items()], "",
             f"Limits: RSS <= +{RSS_GROWTH_LIMIT_PCT:.0f} % over the baseline (after the warm-up); asyncio tasks and "
             f"open sockets back to the baseline after every phase; other open fds at most +{FD_SLACK} (the records "
             f"database's connection pool filling up); no failed call.", "",
             "| phase | calls so far | RSS MB | RSS vs baseline | asyncio tasks | open fds | of which sockets | "
             "failed calls | s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in result.samples:
        growth = f"{result.rss_growth_pct(s):+.1f} %" if result.baseline else "-"
        mark = " (baseline)" if s is result.baseline else ""
        lines.append(f"| {s.phase}{mark} | {s.calls} | {s.rss_mb:.1f} | {growth} | {s.tasks} | {s.fds} | {s.sockets} | "
                     f"{s.failed} | {s.secs} |")
    lines += ["", "Result: " + ("within the limits." if result.ok else "**FAILED**: " + "; ".join(result.problems)), ""]
    return "\n".join(lines)


def run_soak(config: Config, args) -> int:
    """``run_bot.py bench --soak`` (the bench's --turns, --url, --out, --answer-timeout apply)."""
    turn_set = load_turn_set(args.turns)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    concurrent = max(1, args.soak_concurrent)
    fake_llm = server = None
    try:
        if args.url:
            base = args.url.rstrip("/")
            auth = args.auth_token or os.environ.get("TWILIO_AUTH_TOKEN")
            host = args.public_host or config.server.public_host
            admin = args.admin_url or f"http://127.0.0.1:{config.server.admin_port}"
            target = Target(base, f"https://{host}/twilio/voice", _http_to_ws(base) + "/twilio/media", auth,
                            records_token=records_token(args), admin_url=admin.rstrip("/"))
        else:
            overrides = [*args.overrides, f"records.url='sqlite:///{(out / 'soak-records.db').resolve()}'"]
            if concurrent > config.server.max_calls:
                overrides.append(f"server.max_calls={concurrent}")
            if args.fake_llm is not False:
                from bot.testing.fake_llm import FakeLLM
                from bot.tools.bench import bench_responder

                fake_llm = FakeLLM(first_token_delay=0.15, token_delay=0.01, responder=bench_responder).start()
                overrides.append(f"llm.base_url='{fake_llm.base_url}'")
            server = ServerProcess("ours", args.config, overrides, out / "server-soak.log", pysecrets.token_hex(16))
            server.wait_ready()
            target = server.target
        t0 = time.monotonic()
        result = asyncio.run(soak(target, turn_set, rounds=max(1, args.soak_rounds), sequential=args.soak_sequential,
                                  concurrent=concurrent, answer_timeout=args.answer_timeout))
    finally:
        if server is not None:
            server.stop()
        if fake_llm is not None:
            fake_llm.stop()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "server": args.url or "run_bot.py (started here)",
            "rounds": f"{args.soak_rounds} x ({args.soak_sequential} one after another, then {concurrent} at once)",
            "turn set": str(turn_set.path), "wall time": f"{time.monotonic() - t0:.0f} s"}
    report = out / "soak.md"
    report.write_text(render(result, meta), encoding="utf-8")
    print(report.read_text(encoding="utf-8"))
    return 0 if result.ok else 1


__all__ = ["BenchError", "SoakResult", "render", "run_soak", "soak"]
