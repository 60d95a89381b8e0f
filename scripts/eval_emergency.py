#!/usr/bin/env python3
"""Measure the emergency recogniser on bench/emergency_table.toml and bench/emergency_families.toml.

The rules alone: no model, well under a second. With ``--llm URL`` (a vLLM or llama.cpp server, or
the fake), every case is also put to the model as one caller turn with the line's own prompt and
schema, and the table is printed again for both nets: the rules, then the model's ``emergency`` flag
on what the rules left alone. Without it the two-net figure is "not measured", never assumed.

Prints precision and recall per kind, then every miss, false alarm and sure/unsure mix-up.
Exits 1 when any kind's recall (rules alone) is under 100 % or its precision under 98 %, or when
a model call failed; 2 on a bad file.

With ``--summary`` (for a held-out table nobody tuning the rules may read): per family and overall
figures only, never a row's words: emergencies escalated by the rules alone, escalated or asked (an
unsure verdict gets the kind's question), near misses held (no false escalation) and quiet (no false
question either), and the cost per turn. Exits 1 under issue 44's goals: escalated >= 90 % per family
and overall, escalated or asked 100 %, near misses held >= 98 %.

    python scripts/eval_emergency.py
    python scripts/eval_emergency.py --rules my_emergency.toml --table my_table.toml
    python scripts/eval_emergency.py --llm http://localhost:8000/v1
    python scripts/eval_emergency.py --llm local       # the laptop model (scripts/setup.sh --local-llm)
    python scripts/eval_emergency.py --table bench/emergency_heldout_a.toml --summary
    python scripts/eval_emergency.py --ordinary

With ``--ordinary``: the line's ordinary turns (ORDINARY: the bench and evaluation turns, the FAQ
questions, the shortcut and abuse routing tables' turns that are no emergency) through the same rules:
how many get an emergency verdict at all (a question or an escalation a citizen with a pothole would
hear), each listed with the net that fired (a few of these turns are emergencies: "사람이 쓰러졌어요"
in the shortcut table routes to the model, not to a shortcut, and escalates here, rightly).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.core.errors import StartupError  # noqa: E402
from bot.dialog.emergency import DEFAULT_PATH, EmergencyDataError, EmergencyRules  # noqa: E402
from bot.dialog.emergency_eval import (  # noqa: E402
    Case,
    evaluate,
    family_failures,
    family_scores,
    format_families,
    format_table,
    load_cases,
    mismatches,
)

CONCURRENCY = 4  # model calls at once (a server URL; the laptop model serves one at a time: 1)


@dataclass
class ModelRun:
    """The model's answers: its ``emergency`` flag per text, the calls that failed (never a "none"), the
    seconds each answered call took, and which model answered (``plumbing``: not the production model)."""

    model: str
    plumbing: bool = False
    flags: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # text -> why
    seconds: list[float] = field(default_factory=list)
    at_once: int = 1  # calls in flight together
    warm_up: str = ""  # the uncounted first call that evaluates the static prompt (the laptop model)

    def banner(self) -> str:
        if self.plumbing:
            return (f"the model: {self.model}: PLUMBING ONLY, a 0.5B laptop model's flags say nothing about the "
                    "production model; its figure stays not measured")
        return f"the model: {self.model}"

    def timing(self) -> str:
        n = len(self.seconds)
        if not n:
            return self.warm_up + f"seconds per call: no call answered ({len(self.failed)} failed)"
        s = sorted(self.seconds)
        p90 = s[min(n - 1, round(0.9 * (n - 1)))]
        return (self.warm_up + f"seconds per call (answered, {self.at_once} at once): "
                f"p50 {statistics.median(s):.1f} s, p90 {p90:.1f} s, max {s[-1]:.1f} s ({n} calls); "
                f"calls failed: {len(self.failed)}")


async def model_flags(config, texts: list[str], kinds: set[str], run: ModelRun, concurrency: int,
                      warm_up: bool = False) -> ModelRun:
    """Each text as one caller turn to the model of ``config.llm``: its ``emergency`` field, into ``run``.
    A call that raises, times out, or answers without a valid flag is a failure, never a "none".
    ``warm_up``: one uncounted call first, as the bot's startup check makes (a CPU model evaluates the
    ~2,000-token static prompt once, 20-40 s on 2 idle cores, 4-5 min on 2 busy ones, and reuses it after)."""
    from openai import AsyncOpenAI

    from bot.config import Secrets
    from bot.dialog.domain import EMERGENCY_FIELD, NO_EMERGENCY, load_domain, render_system_prompt

    base_url = config.llm.base_url
    domain = load_domain(config.path(config.llm.domain_file))
    prompt = render_system_prompt(config.path(config.llm.prompt_file).read_text(encoding="utf-8"), domain)
    client = AsyncOpenAI(base_url=base_url, api_key=Secrets.from_env(config).llm_api_key or "EMPTY", max_retries=0,
                         timeout=config.llm.total_timeout_ms / 1000.0)
    gate = asyncio.Semaphore(concurrency)
    run.at_once = concurrency

    def turn(text: str, timeout: float | None = None):
        """One caller turn, as the line asks it (the line's prompt and schema)."""
        return (client.with_options(timeout=timeout) if timeout else client).chat.completions.create(
            model=config.llm.model, temperature=config.llm.temperature, max_tokens=config.llm.max_tokens,
            messages=[{"role": "system", "content": prompt}, {"role": "user", "content": text}],
            response_format=domain.response_format(config.llm.dialect, config.llm.reply_max_chars))

    async def ask(text: str) -> None:
        async with gate:
            start = time.perf_counter()
            try:
                answer = await turn(text)
                flag = json.loads(answer.choices[0].message.content or "{}").get(EMERGENCY_FIELD)
            except Exception as e:  # noqa: BLE001 - counted and printed: a failed call is not a "none"
                run.failed[text] = f"{type(e).__name__}: {e}"
                return
            run.seconds.append(time.perf_counter() - start)
            if flag != NO_EMERGENCY and flag not in kinds:
                run.failed[text] = f"no valid {EMERGENCY_FIELD!r} field in the answer: {flag!r}"
            else:
                run.flags[text] = flag

    try:
        if warm_up:
            start = time.perf_counter()
            try:
                await turn("여보세요", timeout=max(600.0, config.llm.total_timeout_ms / 1000.0))
                run.warm_up = f"warm-up call (the static prompt, not counted): {time.perf_counter() - start:.1f} s\n"
            except Exception as e:  # noqa: BLE001 - the counted calls then show what the model does
                run.warm_up = f"warm-up call failed after {time.perf_counter() - start:.1f} s: {type(e).__name__}\n"
        await asyncio.gather(*(ask(t) for t in dict.fromkeys(texts)))
    finally:
        await client.close()
    return run


def judged(llm: str, texts: list[str], kinds: set[str], overrides: tuple[str, ...] = ()) -> ModelRun:
    """The model's flags from a server URL, or from ``local``: the laptop model (llama.cpp, started here
    as the bot starts it with ``llm.backend = "local"``; ``scripts/setup.sh --local-llm`` installs it)."""
    from bot.config import load_config
    from bot.modelfiles.local_llm import serving_llm

    if llm != "local":
        config = load_config(overrides=[*overrides, f"llm.base_url='{llm}'"])
        run = ModelRun(f"{config.llm.model} at {llm}{settings(config, overrides)}")
        return asyncio.run(model_flags(config, texts, kinds, run, CONCURRENCY))
    with serving_llm(load_config(overrides=[*overrides, "llm.backend='local'"])) as handle:
        config = handle.ready()
        run = ModelRun(f"{config.llm.model} (llm.backend = \"local\": llama.cpp on {os.cpu_count()} CPU cores of "
                       f"{platform.node()}, one call at a time){settings(config, overrides)}", plumbing=True)
        return asyncio.run(model_flags(config, texts, kinds, run, 1, warm_up=True))


def settings(config, overrides: tuple[str, ...]) -> str:
    """The call's limit, and the overrides the figures were measured with."""
    return (f"; {config.llm.total_timeout_ms / 1000:.0f} s a call at most"
            + (f"; --set {' --set '.join(overrides)}" if overrides else ""))


def limited(cases: list[Case], limit: int) -> list[Case]:
    """The first ``limit`` emergencies and the first ``limit`` near misses, in table order."""
    emergencies = [i for i, c in enumerate(cases) if c.expect != "none"][:limit]
    near = [i for i, c in enumerate(cases) if c.expect == "none"][:limit]
    keep = set(emergencies + near)
    return [c for i, c in enumerate(cases) if i in keep]


TABLES = [ROOT / "bench/emergency_table.toml", ROOT / "bench/emergency_families.toml"]
MIN_RECALL = 1.0
MIN_PRECISION = 0.98


ORDINARY = [ROOT / "bench/turns.toml", ROOT / "bench/eval_turns.toml", ROOT / "bench/faq_eval.toml",
            ROOT / "tests/data/shortcut_cases.tsv", ROOT / "tests/data/shortcut_dialect_cases.tsv",
            ROOT / "tests/data/abuse_cases.tsv"]


def ordinary_turns(paths: list[Path] = ORDINARY) -> list[str]:
    """The caller turns of the routing tables that are not emergencies, each once, in file order."""
    texts: list[str] = []
    for path in paths:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            rows = data.get("turns", []) + data.get("q", [])
            rows += [t for d in data.get("dialogs", []) for t in d.get("turns", [])]
            texts += [r["text"] for r in rows]
        else:  # a tab-separated routing table: the utterance last, "emergency" rows left out
            for line in path.read_text(encoding="utf-8").splitlines():
                cols = line.split("\t")
                if line.startswith("#") or len(cols) < 2 or cols[0] in {"expect", "emergency"}:
                    continue
                texts.append(cols[-1])
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


def ordinary(rules: EmergencyRules) -> int:
    """How many ordinary turns get an emergency verdict, and which (these tables are the line's own)."""
    texts = ordinary_turns()
    hits = [(t, v) for t in texts if (v := rules.classify(t)) is not None]
    asked = [h for h in hits if not h[1].sure]
    print(f"{len(texts)} ordinary turns: {len(asked)} asked an emergency question, {len(hits) - len(asked)} escalated")
    for text, verdict in hits:
        print(f"  {'escalated' if verdict.sure else 'asked'} {verdict.kind.name} [{verdict.rule}]: {text}")
    print("\n" + cost_per_turn(rules, texts))
    return 0


def cost_per_turn(rules: EmergencyRules, texts: list[str]) -> str:
    """What classifying one turn costs on this machine (after one warm-up turn)."""
    rules.classify(texts[0])
    times = []
    for text in texts:
        start = time.perf_counter()
        rules.classify(text)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return (f"cost per turn: mean {statistics.fmean(times):.2f} ms, p95 {times[int(0.95 * (len(times) - 1))]:.2f} ms, "
            f"max {times[-1]:.2f} ms ({len(times)} turns)")


def summary(rules: EmergencyRules, cases: list[Case], llm: str | None, overrides: tuple[str, ...] = ()) -> int:
    """Figures only: a held-out table's rows are never printed (not even a miss)."""
    run = judged(llm, [c.text for c in cases], set(rules.kinds), overrides) if llm else None
    scores = family_scores(rules, cases)
    print("escalated: a sure verdict of the right kind (the rules alone); esc.|asked: or the kind's question;")
    print("held: near misses with no false escalation; quiet: nor a false question"
          + ("; +model: escalated by the rules or the model's flag" if llm else "") + "\n")
    if run is not None and not run.failed:
        print(format_families(family_scores(rules, cases, run.flags), model=True))
    else:
        print(format_families(scores))
    if run is not None:
        answered = [c for c in cases if c.text not in run.failed]
        if run.failed:  # a failed call is no "none": the two nets are figured on the answered cases only
            print(f"\nrules + the model's flag, on the {len(answered)} cases whose call answered "
                  f"({len(run.failed)} failed calls left out):")
            print(format_families(family_scores(rules, answered, run.flags), model=True))
        print("\n" + model_lines(rules, cases, run, rows=False))
    print("\n" + cost_per_turn(rules, [c.text for c in cases]))
    if run is None:
        print("rules + the model's flag: not measured (give --llm URL of a model server)")
    elif run.failed:
        print(f"NOT JUDGED: {len(run.failed)} model calls failed")  # the texts stay unprinted
    failed = family_failures(scores)
    if failed:
        print("\nFAIL: " + "; ".join(failed))
        return 1
    print("\nall goals met")
    return 1 if run is not None and run.failed else 0


def model_lines(rules: EmergencyRules, cases: list[Case], run: ModelRun, rows: bool) -> str:
    """Which model, its false escalations, the failed calls per kind or family, seconds per call."""
    near = [c for c in cases if c.expect == "none" and c.text in run.flags
            and ((v := rules.classify(c.text)) is None or not v.sure)]
    flagged = sum(run.flags[c.text] != "none" for c in near)
    failed = Counter(c.group for c in cases if c.text in run.failed)
    lines = [run.banner(),
             f"near misses the rules held that the model's flag would escalate: {flagged} of {len(near)} answered",
             f"calls failed: {len(run.failed)} of {len(dict.fromkeys(c.text for c in cases))} (left out of the "
             "two-net figures, never counted as 'none')"
             + (": " + ", ".join(f"{g} {n}" for g, n in sorted(failed.items())) if failed else ""),
             run.timing()]
    if rows and run.failed:
        text, why = next(iter(run.failed.items()))
        lines.append(f"e.g. {text}: {why}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", default=DEFAULT_PATH, type=Path)
    parser.add_argument("--table", action="append", type=Path,
                        help="an evaluation table (repeatable; default: both shipped tables)")
    parser.add_argument("--llm", metavar="URL",
                        help="an OpenAI-compatible server, or 'local' (the laptop model, started here): also measure "
                             "rules + the model's flag")
    parser.add_argument("--summary", action="store_true",
                        help="per family and overall figures only, never a row (a held-out table)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="a config override for the model's calls (as run_bot.py --set), e.g. "
                             "llm.local_timeout_ms=120000; the output names each")
    parser.add_argument("--limit", type=int, metavar="N",
                        help="only the first N emergencies and the first N near misses (a slow model)")
    parser.add_argument("--ordinary", action="store_true",
                        help="the line's ordinary turns (routing tables): how many get an emergency verdict")
    args = parser.parse_args()
    tables = args.table or TABLES
    try:
        rules = EmergencyRules.load(args.rules)
        if args.ordinary:
            return ordinary(rules)
        cases = [case for table in tables for case in load_cases(table, set(rules.kinds))]
    except EmergencyDataError as e:
        print(e, file=sys.stderr)
        return 2
    if args.limit is not None:
        if args.limit < 1:
            parser.error("--limit takes a count of 1 or more")
        whole = len(cases)
        cases = limited(cases, args.limit)
        print(f"--limit {args.limit}: the first {args.limit} emergencies and the first {args.limit} near misses "
              f"only, {len(cases)} of {whole} cases: every figure below is for these")
    none = sum(c.expect == "none" for c in cases)
    print(f"{len(cases)} cases: {len(cases) - none} emergencies, {none} near misses\n")
    try:
        if args.summary:
            return summary(rules, cases, args.llm, tuple(args.overrides))
        return report(rules, cases, args.llm, tuple(args.overrides))
    except StartupError as e:  # the local model is not installed (or did not start): nothing was judged
        print(f"NOT JUDGED: {e}", file=sys.stderr)
        return 2


def report(rules: EmergencyRules, cases: list[Case], llm: str | None, overrides: tuple[str, ...] = ()) -> int:
    """Every row: per kind, then each mismatch (for the shipped and training tables)."""
    scores = evaluate(rules, cases)
    print("rules alone (0 model calls):")
    print(format_table(scores))
    wrong = mismatches(rules, cases)
    if wrong:
        print("\nmismatches (expected -> got):")
        for case, verdict in wrong:
            want = case.expect + ("" if case.sure or case.expect == "none" else " (unsure)")
            got = "none" if verdict is None else verdict.kind.name + ("" if verdict.sure else " (unsure)")
            print(f"  {case.text} | {want} -> {got}" + (f" [{verdict.rule}]" if verdict else ""))
    code = 0
    if llm:
        run = judged(llm, [c.text for c in cases], set(rules.kinds), overrides)
        answered = [c for c in cases if c.text not in run.failed]
        part = f", on the {len(answered)} of {len(cases)} cases whose call answered" if run.failed else ""
        if run.failed:  # a failed call is no "none": both nets are figured on the answered cases only
            print(f"\nrules alone{part}:")
            print(format_table(evaluate(rules, answered)))
        print(f"\nrules + the model's flag ({len(run.flags)} model answers from {llm}{part}):")
        print(format_table(evaluate(rules, answered, run.flags)))
        missed = [c.text for c in cases if c.expect != "none" and rules.classify(c.text) is None]
        caught = sum(run.flags.get(t, "none") != "none" for t in missed)
        lost = sum(t in run.failed for t in missed)
        print(f"the model caught {caught} of the {len(missed)} emergencies the rules missed"
              + (f" ({lost} of them not judged: the call failed)" if lost else ""))
        print("\n" + model_lines(rules, cases, run, rows=True))
        if run.failed:
            print(f"\nNOT JUDGED: {len(run.failed)} model calls failed")
            code = 1
    else:
        print("\nrules + the model's flag: not measured (give --llm URL of a model server)")
    failed = [n for n, s in scores.items() if s["recall"] < MIN_RECALL or s["precision"] < MIN_PRECISION]
    if failed:
        print(f"\nFAIL: {', '.join(failed)} under recall {MIN_RECALL:.0%} / precision {MIN_PRECISION:.0%}")
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
