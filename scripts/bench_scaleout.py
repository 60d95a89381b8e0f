#!/usr/bin/env python3
"""One worker vs two workers, both behind nginx, the same simulated calls: one report.

    .venv/bin/python scripts/bench_scaleout.py --calls 8 --out bench-scaleout [--config C] [--set k=v ...]

Setup 1: ``run_bot.py serve`` (one worker) behind nginx. Setup 2: ``run_bot.py serve --workers 2``
behind the same nginx configuration (round-robin, WebSocket upgrade), ``server.line_max_calls`` =
``--calls``. Both on a fresh records database of the same kind (a throwaway PostgreSQL from Debian's
binaries when installed, else SQLite), both against one fake vLLM in this process (first token 150 ms,
as ``run_bot.py bench``), one after the other, never at once. The calls are exactly what
``run_bot.py bench --url http://<nginx>`` places (``bot.tools.bench.run_bench_calls``).

Writes ``OUT/report.md``: a comparison table (voice-to-voice and caller TTFA p50/p90/p99, the share
of calls per worker) and then the bench's full section for each setup; ``OUT/latency.png``,
``OUT/turns.jsonl`` and the servers' logs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PUBLIC_HOST = "bench.example.org"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=8, help="concurrent calls (default 8)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--workers", type=int, default=2, help="workers of the second setup (default 2)")
    p.add_argument("--out", default="bench-scaleout")
    p.add_argument("--turns", default=None, help="turn set TOML (default bench/turns.toml)")
    p.add_argument("--config", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--database", choices=["postgresql", "sqlite"], default=None,
                   help="records database of both setups (default: PostgreSQL when installed)")
    p.add_argument("--answer-timeout", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    from loguru import logger

    from bot.config import load_config
    from bot.testing.fake_llm import FakeLLM
    from bot.testing.nginx import NginxProxy, free_port_run, wait_workers_ready
    from bot.testing.process import BotProcess
    from bot.tools.bench import Target, bench_responder, load_turn_set, machine_meta, plot_cdfs, run_bench_calls

    config = load_config(args.config, args.overrides)
    turn_set = load_turn_set(args.turns)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = args.calls
    pg = None
    if args.database != "sqlite":
        from bot.testing.postgres import PostgresServer, PostgresUnavailable

        try:
            pg = PostgresServer().start()
        except PostgresUnavailable as e:
            if args.database == "postgresql":
                raise
            logger.warning("bench-scaleout: no PostgreSQL ({}); SQLite for both setups", e)
    fake = FakeLLM(first_token_delay=0.15, token_delay=0.01, responder=bench_responder).start()
    runs, setups = [], []
    try:
        for workers in (1, args.workers):
            name = f"{workers} worker{'s' if workers > 1 else ''}"
            url = (pg.create_database(f"bench_{uuid.uuid4().hex[:10]}") if pg
                   else f"sqlite:///{(out / 'records' / f'w{workers}.db').resolve()}")
            base = free_port_run(workers)
            ports = [base + i for i in range(workers)]
            auth = secrets.token_hex(16)
            sets = [*args.overrides, f"llm.base_url='{fake.base_url}'", f"records.url='{url}'",
                    f"server.public_host='{PUBLIC_HOST}'", f"server.max_calls={n}",
                    f"server.line_max_calls={n if workers > 1 else 0}"]
            if workers > 1:
                entry = (str(ROOT / "run_bot.py"), "serve", "--workers", str(workers))
                sets.append("records.worker='bench'")
            else:
                entry = None
                sets.append("records.worker='bench-0'")
            proc = BotProcess(sets, {"TWILIO_AUTH_TOKEN": auth, "TWILIO_ACCOUNT_SID": None, "STREAM_TOKEN_KEY": None},
                              out / f"server-{workers}w.log", entry=entry, config_path=args.config, port=base,
                              admin_port=free_port_run(workers))
            try:
                logger.info("bench-scaleout: {} on ports {} (log {})", name, ports, proc.log_path)
                wait_workers_ready(proc, ports, timeout=300)
                with NginxProxy(ports) as proxy:
                    target = Target(proxy.base_url, f"https://{PUBLIC_HOST}/twilio/voice", proxy.ws_url, auth,
                                    records_token=proc.records_token)
                    run = asyncio.run(run_bench_calls(name, target, turn_set, n, seed=args.seed,
                                                      answer_timeout=args.answer_timeout,
                                                      progress=not args.no_progress, rounds=args.rounds))
                    run.url = f"{proxy.base_url} (nginx) -> {', '.join(f'127.0.0.1:{p}' for p in ports)}"
            finally:
                proc.stop()
            runs.append(run)
            setups.append((name, workers))
    finally:
        fake.stop()
        if pg is not None:
            pg.stop()

    meta = machine_meta(n, turn_set, ["scripts/bench_scaleout.py", *(argv if argv is not None else sys.argv[1:])])
    meta["rounds"] = args.rounds
    meta["LLM"] = "fake vLLM (bot/testing/fake_llm.py): first token 150 ms, 3 chars per 10 ms"
    meta["records database"] = "PostgreSQL (throwaway, Debian's binaries)" if pg else "SQLite (WAL)"
    meta["proxy"] = "nginx (bot/testing/nginx.py = deploy/nginx.conf): round-robin, WebSocket upgrade"
    report = render(runs, setups, meta, config.latency)
    (out / "report.md").write_text(report, encoding="utf-8")
    plot_cdfs(runs, out / "latency.png")
    with (out / "turns.jsonl").open("w", encoding="utf-8") as f:
        for run in runs:
            for row in run.rows():
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(report)
    print(f"wrote {out / 'report.md'}, {out / 'latency.png'}, {out / 'turns.jsonl'}", file=sys.stderr)
    return 0


def render(runs, setups, meta, budgets) -> str:
    from bot.tools.bench import RunStats, calls_per_worker
    from bot.tools.bench.report import _hatch_lines, _machine_lines, _run_section
    from bot.tools.bench.stats import _dist, _f

    stats = [RunStats.of(r) for r in runs]
    lines = ["# Scale-out bench: one worker vs several, behind nginx", "", "Escape hatches:", "",
             *_hatch_lines(runs[0].environment if runs else {}), "", "Machine and run:", "", *_machine_lines(meta), "",
             "| setup | calls (answered / all) | turns with a voice-to-voice figure | voice-to-voice p50 / p90 / p99 ms | caller TTFA p50 / p90 / p99 ms "
             f"| over {budgets.total_ms} ms | calls per worker | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for st, (name, _workers) in zip(stats, setups):
        v, c = _dist(st.v2v), _dist(st.caller_ttfa)
        share = calls_per_worker(st.run)
        total = sum(share.values()) or 1
        share_text = ", ".join(f"{w} {k} ({100 * k / total:.0f} %)" for w, k in sorted(share.items())) or "-"
        answered = sum(1 for call in st.run.calls if call.greeting_ms is not None)
        over = sum(x > budgets.total_ms for x in st.v2v)
        lines.append(f"| {name} | {answered} / {len(st.run.calls)} | {len(st.v2v)} | {_f(v['p50'])} / {_f(v['p90'])} / "
                     f"{_f(v['p99'])} | {_f(c['p50'])} / {_f(c['p90'])} / {_f(c['p99'])} | {over}/{len(st.v2v)} | "
                     f"{share_text} | {st.run.wall_secs:.0f} |")
    lines += ["", "All workers of a setup share the machine's cores: on a CPU-only box a second worker adds a second "
              "Whisper and TTS, not a second CPU (docs/scaling.md).", ""]
    for st in stats:
        lines += _run_section(st, budgets)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
