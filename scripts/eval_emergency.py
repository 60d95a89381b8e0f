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
import statistics
import sys
import time
import tomllib
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

CONCURRENCY = 4  # model calls at once


async def model_flags(config, texts: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each text as one caller turn to the model of ``config.llm``: its ``emergency`` field; and the failures."""
    from openai import AsyncOpenAI

    from bot.config import Secrets
    from bot.dialog.domain import EMERGENCY_FIELD, NO_EMERGENCY, load_domain, render_system_prompt

    base_url = config.llm.base_url
    domain = load_domain(config.path(config.llm.domain_file))
    prompt = render_system_prompt(config.path(config.llm.prompt_file).read_text(encoding="utf-8"), domain)
    client = AsyncOpenAI(base_url=base_url, api_key=Secrets.from_env(config).llm_api_key or "EMPTY", max_retries=0,
                         timeout=config.llm.total_timeout_ms / 1000.0)
    gate = asyncio.Semaphore(CONCURRENCY)
    flags: dict[str, str] = {}
    failed: list[str] = []

    async def ask(text: str) -> None:
        async with gate:
            try:
                answer = await client.chat.completions.create(
                    model=config.llm.model, temperature=config.llm.temperature, max_tokens=config.llm.max_tokens,
                    messages=[{"role": "system", "content": prompt}, {"role": "user", "content": text}],
                    response_format=domain.response_format(config.llm.dialect, config.llm.reply_max_chars))
                flags[text] = json.loads(answer.choices[0].message.content or "{}").get(EMERGENCY_FIELD, NO_EMERGENCY)
            except Exception as e:  # noqa: BLE001 - counted and printed: a failed call is not a "none"
                failed.append(f"{text}: {type(e).__name__}: {e}")

    try:
        await asyncio.gather(*(ask(t) for t in texts))
    finally:
        await client.close()
    return flags, failed

def judged(llm: str, texts: list[str]) -> tuple[dict[str, str], list[str]]:
    """The model's flags from a server URL, or from ``local``: the laptop model (llama.cpp, started here
    as the bot starts it with ``llm.backend = "local"``; ``scripts/setup.sh --local-llm`` installs it)."""
    from bot.config import load_config
    from bot.modelfiles.local_llm import serving_llm

    if llm != "local":
        return asyncio.run(model_flags(load_config(overrides=[f"llm.base_url='{llm}'"]), texts))
    with serving_llm(load_config(overrides=["llm.backend='local'"])) as handle:
        return asyncio.run(model_flags(handle.ready(), texts))


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


def summary(rules: EmergencyRules, cases: list[Case], llm: str | None) -> int:
    """Figures only: a held-out table's rows are never printed (not even a miss)."""
    flags: dict[str, str] = {}
    errors: list[str] = []
    if llm:
        flags, errors = judged(llm, [c.text for c in cases])
    scores = family_scores(rules, cases, flags or None)
    print("escalated: a sure verdict of the right kind (the rules alone); esc.|asked: or the kind's question;")
    print("held: near misses with no false escalation; quiet: nor a false question"
          + ("; +model: escalated by the rules or the model's flag" if llm else "") + "\n")
    print(format_families(scores, model=bool(llm)))
    print("\n" + cost_per_turn(rules, [c.text for c in cases]))
    if not llm:
        print("rules + the model's flag: not measured (give --llm URL of a model server)")
    elif errors:
        print(f"NOT JUDGED: {len(errors)} model calls failed")  # the texts stay unprinted
    failed = family_failures(scores)
    if failed:
        print("\nFAIL: " + "; ".join(failed))
        return 1
    print("\nall goals met")
    return 1 if errors else 0


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
    parser.add_argument("--ordinary", action="store_true",
                        help="the line's ordinary turns (routing tables): how many get an emergency verdict")
    args = parser.parse_args()
    tables = args.table or TABLES
    if args.ordinary:
        try:
            return ordinary(EmergencyRules.load(args.rules))
        except EmergencyDataError as e:
            print(e, file=sys.stderr)
            return 2

    try:
        rules = EmergencyRules.load(args.rules)
        cases = [case for table in tables for case in load_cases(table, set(rules.kinds))]
    except EmergencyDataError as e:
        print(e, file=sys.stderr)
        return 2
    none = sum(c.expect == "none" for c in cases)
    print(f"{len(cases)} cases: {len(cases) - none} emergencies, {none} near misses\n")
    try:
        if args.summary:
            return summary(rules, cases, args.llm)
        return report(rules, cases, args.llm)
    except StartupError as e:  # the local model is not installed (or did not start): nothing was judged
        print(f"NOT JUDGED: {e}", file=sys.stderr)
        return 2


def report(rules: EmergencyRules, cases: list[Case], llm: str | None) -> int:
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
        flags, errors = judged(llm, [c.text for c in cases])
        print(f"\nrules + the model's flag ({len(flags)} model answers from {llm}):")
        print(format_table(evaluate(rules, cases, flags)))
        missed = [c.text for c in cases if c.expect != "none" and rules.classify(c.text) is None]
        caught = sum(flags.get(t, "none") != "none" for t in missed)
        print(f"the model caught {caught} of the {len(missed)} emergencies the rules missed")
        if errors:
            print(f"\nNOT JUDGED: {len(errors)} model calls failed, e.g. {errors[0]}")
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
