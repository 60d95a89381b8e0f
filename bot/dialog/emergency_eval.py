"""Precision and recall of the emergency recogniser on an evaluation table (bench/emergency_table.toml).

Counting, per kind: a case expecting the kind and classified as it, sure or unsure, is a true
positive (an unsure verdict still gets the caller asked, not ignored); classified as anything else,
a false negative. A verdict of a kind on a case expecting another kind or "none" is a false positive
of the verdict's kind: a near miss must come back None.

With ``model_flags`` (case text -> the kind the model's ``emergency`` field named, or "none"), a case
the rules leave alone counts as the model flagged it: the two nets together, as a call runs them.

Per family (``family_scores``, issue 44's held-out tables): an emergency is ESCALATED when a sure
verdict names its kind or one of its ``accept`` kinds (the rules alone), and ESCALATED OR ASKED when
any verdict does (an unsure one gets the kind's clarifying question: the question path). A near miss
is HELD when no sure verdict fires (no false escalation) and QUIET when no verdict at all fires (no
false question either).
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
    family: str = ""  # a held-out table's family ("" in the older tables: the kind stands for it)
    accept: tuple[str, ...] = ()  # other kinds that also count as right (poison: medical or suicide)

    @property
    def group(self) -> str:
        return self.family or (self.expect if self.expect != NONE else "near misses")

    def right(self, kind: str) -> bool:
        return kind == self.expect or kind in self.accept


def load_cases(path: str | Path, kinds: set[str] | None = None) -> list[Case]:
    """The ``[[case]]`` rows of a table; with ``kinds``, every expect and accept must be one of them
    (or "none" for expect)."""
    source = DataFile.read(path, EmergencyDataError, "emergency table")
    cases = []
    for i, _row in enumerate(source.tables(("case",))):
        where = ("case", i)
        source.no_unknown(where, ("text", "expect", "sure", "family", "accept"))
        text = source.text_value((*where, "text"))
        expect = source.value((*where, "expect"), str, "a string")
        sure = source.value((*where, "sure"), bool, "true or false", default=True)
        family = source.value((*where, "family"), str, "a string", default="").strip()
        accept = tuple(source.value((*where, "accept"), list, "a list of kind names", default=[],
                                    ok=lambda v: all(isinstance(k, str) and k for k in v)))
        if kinds is not None and expect != NONE and expect not in kinds:
            raise source.error((*where, "expect"), f"expect {expect!r} is not a kind")
        if kinds is not None and (bad := [k for k in accept if k not in kinds]):
            raise source.error((*where, "accept"), f"accept {bad[0]!r} is not a kind")
        if expect == NONE and not sure:
            raise source.error((*where, "sure"), "a 'none' case cannot be unsure")
        if expect == NONE and accept:
            raise source.error((*where, "accept"), "a 'none' case accepts no kind")
        cases.append(Case(text, expect, sure, family, accept))
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
        if got != NONE and case.right(got):
            got = case.expect
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
        got = _got(verdict)
        if not (got == case.expect or case.right(got)) or (verdict is not None and verdict.sure != case.sure):
            out.append((case, verdict))
    return out


def format_table(scores: dict[str, dict[str, float]]) -> str:
    lines = [f"{'kind':<14}{'tp':>5}{'fp':>5}{'fn':>5}{'precision':>11}{'recall':>8}"]
    for name, s in scores.items():
        lines.append(f"{name:<14}{s['tp']:>5}{s['fp']:>5}{s['fn']:>5}{s['precision']:>11.1%}{s['recall']:>8.1%}")
    return "\n".join(lines)


# --- per family (held-out tables) ------------------------------------------------------------------

# The goals of issue 44 on a held-out table.
MIN_FAMILY_RECALL = 0.90  # escalated by the rules alone, per family and overall
MIN_ASKED = 1.0  # escalated or asked (the question path), overall
MIN_HELD = 0.98  # near misses with no false escalation


@dataclass
class FamilyScore:
    emergencies: int = 0
    escalated: int = 0  # a sure verdict of the right kind: the rules alone
    asked: int = 0  # escalated, or an unsure verdict of the right kind (the question path)
    near_misses: int = 0
    held: int = 0  # near misses with no sure verdict
    quiet: int = 0  # near misses with no verdict at all (no false question)
    model: int = 0  # emergencies the model's flag caught where the rules did not escalate

    def add(self, other: FamilyScore) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


def family_scores(rules: EmergencyRules, cases: list[Case],
                  model_flags: dict[str, str] | None = None) -> dict[str, FamilyScore]:
    """Per family (then "all"): emergencies escalated / escalated or asked, near misses held / quiet."""
    out: dict[str, FamilyScore] = {}
    for case in cases:
        score = out.setdefault(case.group, FamilyScore())
        verdict = rules.classify(case.text)
        if case.expect == NONE:
            score.near_misses += 1
            score.held += verdict is None or not verdict.sure
            score.quiet += verdict is None
            continue
        score.emergencies += 1
        right = verdict is not None and case.right(verdict.kind.name)
        escalated = right and verdict is not None and verdict.sure
        score.escalated += escalated
        score.asked += right
        if not escalated and model_flags and case.right(model_flags.get(case.text, NONE)):
            score.model += 1
    total = FamilyScore()
    for score in out.values():
        total.add(score)
    return dict(sorted(out.items())) | {"all": total}


def format_families(scores: dict[str, FamilyScore], model: bool = False) -> str:
    """One line a family: counts and shares, never a case's words."""
    head = (f"{'family':<22}{'emerg':>6}{'escalated':>14}{'esc.|asked':>14}{'near':>6}{'held':>14}{'quiet':>14}"
            + (f"{'+model':>14}" if model else ""))
    lines = [head]
    for name, s in scores.items():
        def cell(part: int, whole: int) -> str:
            return f"{part}/{whole} {_share(part, whole):>4.0%}" if whole else "-"
        line = (f"{name[:21]:<22}{s.emergencies:>6}{cell(s.escalated, s.emergencies):>14}"
                f"{cell(s.asked, s.emergencies):>14}{s.near_misses:>6}{cell(s.held, s.near_misses):>14}"
                f"{cell(s.quiet, s.near_misses):>14}")
        if model:
            line += f"{cell(s.escalated + s.model, s.emergencies):>14}"
        lines.append(line)
    return "\n".join(lines)


def family_failures(scores: dict[str, FamilyScore]) -> list[str]:
    """The goals a table misses, in words (empty: all met)."""
    failed = [f"{name}: escalated {_share(s.escalated, s.emergencies):.0%} < {MIN_FAMILY_RECALL:.0%}"
              for name, s in scores.items() if s.emergencies and _share(s.escalated, s.emergencies) < MIN_FAMILY_RECALL]
    total = scores["all"]
    if _share(total.asked, total.emergencies) < MIN_ASKED:
        failed.append(f"escalated or asked {_share(total.asked, total.emergencies):.1%} < {MIN_ASKED:.0%}")
    if _share(total.held, total.near_misses) < MIN_HELD:
        failed.append(f"near misses held {_share(total.held, total.near_misses):.1%} < {MIN_HELD:.0%}")
    return failed
