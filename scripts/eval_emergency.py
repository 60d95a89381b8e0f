#!/usr/bin/env python3
"""Measure the emergency recogniser on bench/emergency_table.toml and bench/emergency_families.toml.

No model, well under a second.

Prints precision and recall per kind, then every miss, false alarm and sure/unsure mix-up.
Exits 1 when any kind's recall is under 100 % or its precision under 98 %, 2 on a bad file.

    python scripts/eval_emergency.py
    python scripts/eval_emergency.py --rules my_emergency.toml --table my_table.toml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.dialog.emergency import DEFAULT_PATH, EmergencyDataError, EmergencyRules  # noqa: E402
from bot.dialog.emergency_eval import evaluate, format_table, load_cases, mismatches  # noqa: E402

TABLES = [ROOT / "bench/emergency_table.toml", ROOT / "bench/emergency_families.toml"]
MIN_RECALL = 1.0
MIN_PRECISION = 0.98


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", default=DEFAULT_PATH, type=Path)
    parser.add_argument("--table", action="append", type=Path,
                        help="an evaluation table (repeatable; default: both shipped tables)")
    args = parser.parse_args()
    tables = args.table or TABLES

    try:
        rules = EmergencyRules.load(args.rules)
        cases = [case for table in tables for case in load_cases(table, set(rules.kinds))]
    except EmergencyDataError as e:
        print(e, file=sys.stderr)
        return 2
    none = sum(c.expect == "none" for c in cases)
    print(f"{len(cases)} cases: {len(cases) - none} emergencies, {none} near misses\n")
    scores = evaluate(rules, cases)
    print(format_table(scores))
    wrong = mismatches(rules, cases)
    if wrong:
        print("\nmismatches (expected -> got):")
        for case, verdict in wrong:
            want = case.expect + ("" if case.sure or case.expect == "none" else " (unsure)")
            got = "none" if verdict is None else verdict.kind.name + ("" if verdict.sure else " (unsure)")
            print(f"  {case.text} | {want} -> {got}" + (f" [{verdict.rule}]" if verdict else ""))
    failed = [n for n, s in scores.items() if s["recall"] < MIN_RECALL or s["precision"] < MIN_PRECISION]
    if failed:
        print(f"\nFAIL: {', '.join(failed)} under recall {MIN_RECALL:.0%} / precision {MIN_PRECISION:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
