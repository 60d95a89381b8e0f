#!/usr/bin/env python3
"""Korean coverage: the shortcut routing table and the TTS normalizer table, per category.

Shortcuts (tests/data/shortcut_cases.tsv): for each act (a rule name, or "model" for turns the LLM
must answer), recall = cases of that act routed to it, precision = cases routed to it that are of
that act. Normalizer (tests/data/normalize_cases.tsv): exact matches per category. Exits 1 when any
figure is below 100 %, so CI can run it as is.

    python scripts/korean_coverage.py
    python scripts/korean_coverage.py --misses      # list every case that fails
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loguru import logger  # noqa: E402

from bot.config import LLMConfig  # noqa: E402
from bot.dialog.domain import load_domain  # noqa: E402
from bot.dialog.shortcuts import load_shortcuts  # noqa: E402
from bot.languages.ko.normalize import normalize_korean  # noqa: E402

SHORTCUT_CASES = ROOT / "tests/data/shortcut_cases.tsv"
NORMALIZE_CASES = ROOT / "tests/data/normalize_cases.tsv"


def read_tsv(path: Path, header: str) -> list[list[str]]:
    """The rows of a case table: tab-separated, # comments, one header line starting ``header``."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith(header + "\t"):
            continue
        rows.append(line.split("\t"))
    return rows


def _pct(hit: int, total: int) -> float:
    return 100.0 * hit / total if total else 100.0


def shortcut_coverage(misses: bool) -> bool:
    """Prints precision and recall per act; True when all are 100 %."""
    cfg = LLMConfig()
    matcher = load_shortcuts(ROOT / cfg.shortcuts_file, load_domain(ROOT / cfg.domain_file))
    expected: Counter[str] = Counter()
    routed: Counter[str] = Counter()
    right: Counter[str] = Counter()
    wrong = []
    for expect, context, utterance in read_tsv(SHORTCUT_CASES, "expect"):
        sc = matcher.match(utterance, None if context == "-" else context)
        got = sc.name if sc else "model"
        expected[expect] += 1
        routed[got] += 1
        if got == expect:
            right[expect] += 1
        else:
            wrong.append(f"  {utterance!r} ({context}): {got}, expected {expect}")
    print(f"Shortcuts: {sum(expected.values())} utterances, {expected['model']} of them for the model")
    print(f"  {'act':<16}{'cases':>6}{'recall':>10}{'precision':>11}")
    ok = True
    for act in sorted(expected | routed, key=lambda a: (a == "model", a)):
        recall, precision = _pct(right[act], expected[act]), _pct(right[act], routed[act])
        ok &= recall == precision == 100.0
        print(f"  {act:<16}{expected[act]:>6}{recall:>9.1f}%{precision:>10.1f}%")
    if misses and wrong:
        print("\n".join(wrong))
    return ok


def normalize_coverage(misses: bool) -> bool:
    """Prints exact matches per category; True when all are 100 %."""
    total: Counter[str] = Counter()
    exact: Counter[str] = Counter()
    wrong = []
    for category, written, spoken in read_tsv(NORMALIZE_CASES, "category"):
        got = normalize_korean(written)
        total[category] += 1
        if got == spoken:
            exact[category] += 1
        else:
            wrong.append(f"  [{category}] {written!r}: {got!r}, expected {spoken!r}")
    print(f"Normalizer: {sum(total.values())} cases, {sum(exact.values())} exact")
    print(f"  {'category':<16}{'cases':>6}{'exact':>10}")
    for category in sorted(total):
        print(f"  {category:<16}{total[category]:>6}{_pct(exact[category], total[category]):>9.1f}%")
    if misses and wrong:
        print("\n".join(wrong))
    return not wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--misses", action="store_true", help="list the cases that fail")
    args = parser.parse_args()
    logger.remove()  # the loaders' debug lines would interleave with the tables
    ok = shortcut_coverage(args.misses)
    print()
    ok &= normalize_coverage(args.misses)
    print("\nall 100 %" if ok else "\nBELOW 100 %")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
