"""Precision and recall of the emergency recogniser on an evaluation table (bench/emergency_table.toml).

Counting, per kind: a case expecting the kind and classified as it, sure or unsure, is a true
positive (an unsure verdict still gets the caller asked, not ignored); classified as anything else,
a false negative. A verdict of a kind on a case expecting another kind or "none" is a false positive
of the verdict's kind: a near miss must come back None.

With ``model_flags`` (case text -> the kind the model's ``emergency`` field named, or "none"), a case
the rules leave alone counts as the model flagged it: the two nets together, as a call runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.core.datafile import DataFile
from bot.dialog.emergency import EmergencyDataError, EmergencyRules, Verdict

NONE = "none"


@dataclass(frozen=True)
class Case:
    text: str
    expect: str  # a kind name, or "none"
    sure: bool = True  # False: the bot should ask the kind's question


def load_cases(path: str | Path, kinds: set[str] | None = None) -> list[Case]:
    """The ``[[case]]`` rows of a table; with ``kinds``, every expect must be one of them or "none"."""
    source = DataFile.read(path, EmergencyDataError, "emergency table")
    cases = []
    for i, _row in enumerate(source.tables(("case",))):
        where = ("case", i)
        source.no_unknown(where, ("text", "expect", "sure"))
        text = source.text_value((*where, "text"))
        expect = source.value((*where, "expect"), str, "a string")
        sure = source.value((*where, "sure"), bool, "true or false", default=True)
        if kinds is not None and expect != NONE and expect not in kinds:
            raise source.error((*where, "expect"), f"expect {expect!r} is not a kind")
        if expect == NONE and not sure:
            raise source.error((*where, "sure"), "a 'none' case cannot be unsure")
        cases.append(Case(text, expect, sure))
    return cases


def _got(verdict: Verdict | None) -> str:
    return verdict.kind.name if verdict else NONE


def evaluate(rules: EmergencyRules, cases: list[Case],
             model_flags: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Per kind: tp, fp, fn, precision and recall (1.0 where nothing was there to count)."""
    counts = {name: {"tp": 0, "fp": 0, "fn": 0} for name in rules.kinds}
    for case in cases:
        got = _got(rules.classify(case.text))
        if got == NONE and model_flags:
            got = model_flags.get(case.text, NONE)
        if got == case.expect:
            if got != NONE:
                counts[got]["tp"] += 1
            continue
        if case.expect != NONE:
            counts[case.expect]["fn"] += 1
        if got != NONE:
            counts[got]["fp"] += 1
    scores: dict[str, dict[str, float]] = {}
    for name, c in counts.items():
        tp, fp, fn = c["tp"], c["fp"], c["fn"]
        scores[name] = {"tp": tp, "fp": fp, "fn": fn,
                        "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}
    return scores


def mismatches(rules: EmergencyRules, cases: list[Case]) -> list[tuple[Case, Verdict | None]]:
    """Cases whose verdict differs from the table: wrong kind, or sure where it should ask (and back)."""
    out = []
    for case in cases:
        verdict = rules.classify(case.text)
        if _got(verdict) != case.expect or (verdict is not None and verdict.sure != case.sure):
            out.append((case, verdict))
    return out


def format_table(scores: dict[str, dict[str, float]]) -> str:
    lines = [f"{'kind':<14}{'tp':>5}{'fp':>5}{'fn':>5}{'precision':>11}{'recall':>8}"]
    for name, s in scores.items():
        lines.append(f"{name:<14}{s['tp']:>5}{s['fp']:>5}{s['fn']:>5}{s['precision']:>11.1%}{s['recall']:>8.1%}")
    return "\n".join(lines)
