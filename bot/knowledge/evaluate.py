"""Scoring a retriever on the question set ``bench/faq_eval.toml`` (used by scripts/eval_faq.py and the tests)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.datafile import DataFile
from bot.knowledge.knowledge import Knowledge

NONE = "none"


@dataclass(frozen=True)
class EvalQuestion:
    text: str
    expect: tuple[str, ...]  # acceptable ids, or ("none",)
    holdout: bool = False  # written after tuning, never tuned on

    @property
    def answerable(self) -> bool:
        return self.expect != (NONE,)

    @property
    def wants_directory(self) -> bool:
        return all(e.startswith("dept-") for e in self.expect)


def load_eval_set(path: Path | str) -> list[EvalQuestion]:
    """The ``[[q]]`` entries of an evaluation file."""
    source = DataFile.read(path, ValueError, "evaluation set")
    questions = []
    for i in range(len(source.tables(("q",), default=[], nonempty=False))):
        text = source.text_value(("q", i, "text"))
        expect = source.value(("q", i, "expect"), (str, list), "an id or a non-empty list of ids", ok=bool)
        expect = (expect,) if isinstance(expect, str) else tuple(expect)
        holdout = source.value(("q", i, "holdout"), bool, "true or false", default=False)
        questions.append(EvalQuestion(text=text, expect=expect, holdout=holdout))
    return questions


@dataclass
class EvalResult:
    """Counts over one question set; rates are over the answerable (or "none") questions."""

    answerable: int = 0
    hit1: int = 0
    hit3: int = 0
    none_total: int = 0
    none_false: int = 0  # "none" questions that got hits (the model would answer from wrong facts)
    directory_total: int = 0
    directory_right: int = 0
    directory_false: int = 0  # a directory reply on a question that did not ask for a department
    times_ms: list[float] = field(default_factory=list)
    misses: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (text, expected, got)

    @property
    def hit1_rate(self) -> float:
        return self.hit1 / self.answerable if self.answerable else 0.0

    @property
    def hit3_rate(self) -> float:
        return self.hit3 / self.answerable if self.answerable else 0.0

    def percentile_ms(self, q: float) -> float:
        ordered = sorted(self.times_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.times_ms) if self.times_ms else 0.0


def evaluate(knowledge: Knowledge, questions: list[EvalQuestion], repeats: int = 1) -> EvalResult:
    """Look every question up (``repeats`` times, for timings) and count hits."""
    result = EvalResult()
    for question in questions:
        for _ in range(repeats):
            start = time.perf_counter()
            found = knowledge.lookup(question.text, k=3)
            result.times_ms.append((time.perf_counter() - start) * 1000)
        got = [entry.id for entry, _ in found.hits]
        directory_id = found.directory_hit.id if found.directory_hit else None
        if question.answerable:
            result.answerable += 1
            result.hit1 += bool(got[:1]) and got[0] in question.expect
            result.hit3 += any(g in question.expect for g in got[:3])
            if not any(g in question.expect for g in got[:1]):
                result.misses.append((question.text, "|".join(question.expect), got))
        else:
            result.none_total += 1
            if got or directory_id:
                result.none_false += 1
                result.misses.append((question.text, NONE, got))
        if question.wants_directory:
            result.directory_total += 1
            result.directory_right += directory_id in question.expect
        elif directory_id is not None:
            result.directory_false += 1
            result.misses.append((question.text, "|".join(question.expect), [f"directory:{directory_id}"]))
    return result
