#!/usr/bin/env python3
"""Measure the FAQ / department retrievers on bench/faq_eval.toml.

For each retriever: hit@1 and hit@3 on answerable questions, false answers on "none"
questions, directory replies (right / false) and lookup time p50/p99 (each question looked up
``--repeats`` times after a warm-up). A few seconds; the Kiwi retriever loads its model first.

    python scripts/eval_faq.py                      # both retrievers
    python scripts/eval_faq.py --retriever kiwi --misses
    python scripts/eval_faq.py --min-score 0.4      # try another "no answer" cut
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.knowledge import Knowledge, KnowledgeOptions  # noqa: E402
from bot.knowledge.evaluate import evaluate, load_eval_set  # noqa: E402

RETRIEVERS = ("char-ngram", "kiwi", "hybrid")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faq", default=ROOT / "bot/data/faq.toml", type=Path)
    parser.add_argument("--directory", default=ROOT / "bot/data/directory.toml", type=Path)
    parser.add_argument("--eval", default=ROOT / "bench/faq_eval.toml", type=Path)
    parser.add_argument("--retriever", choices=RETRIEVERS, action="append", help="default: all")
    parser.add_argument("--min-score", type=float, help="override the 'no answer' cut")
    parser.add_argument("--repeats", type=int, default=20, help="lookups per question for the timings")
    parser.add_argument("--misses", action="store_true", help="list the questions each retriever got wrong")
    args = parser.parse_args()

    questions = load_eval_set(args.eval)
    sets = {"tuned": [q for q in questions if not q.holdout], "held-out": [q for q in questions if q.holdout]}
    for label, subset in sets.items():
        answerable = sum(q.answerable for q in subset)
        print(f"{label}: {len(subset)} questions, {answerable} answerable, {len(subset) - answerable} 'none'")
    print()
    rows = []
    for name in args.retriever or RETRIEVERS:
        options = KnowledgeOptions(retriever=name)
        if args.min_score is not None:
            options = dataclasses.replace(options, min_score=args.min_score)
        knowledge = Knowledge.load(args.faq, args.directory, options)
        evaluate(knowledge, questions[:10])  # warm-up
        for label, subset in sets.items():
            result = evaluate(knowledge, subset, repeats=args.repeats)
            rows.append((name, label, result))
            if args.misses:
                print(f"--- {name}, {label}: misses (text | expected | got)")
                for text, expected, got in result.misses:
                    print(f"  {text} | {expected} | {', '.join(got) or '-'}")
                print()

    header = f"{'retriever':<11} {'set':<9} {'hit@1':>7} {'hit@3':>7} {'none: false':>12} {'dir: right':>11} {'dir: false':>11} {'p50 ms':>7} {'p99 ms':>7}"
    print(header)
    print("-" * len(header))
    for name, label, r in rows:
        print(f"{name:<11} {label:<9} {r.hit1_rate:>7.1%} {r.hit3_rate:>7.1%} {f'{r.none_false}/{r.none_total}':>12} "
              f"{f'{r.directory_right}/{r.directory_total}':>11} {r.directory_false:>11} "
              f"{r.p50_ms:>7.3f} {r.percentile_ms(0.99):>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
