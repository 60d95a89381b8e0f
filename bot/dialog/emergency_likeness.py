"""The emergency recogniser's third net (issue 44): a likeness to known emergencies, which only asks.

The LIKENESS (``bot/data/emergency_exemplars.toml``) is a bank of short emergencies and near misses:
a turn (its negative context blanked as for the regex net) whose character n-grams cover enough of
an emergency exemplar's, more than of any near miss's, gets that kind's clarifying question (an
unsure verdict), never the model's ordinary answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bot.core.datafile import DataFile
from bot.dialog.emergency_grammar import DATA, GrammarError

EXEMPLARS_PATH = DATA / "emergency_exemplars.toml"


def _grams(text: str) -> Counter[str]:
    """Character 2- and 3-grams of the text without spaces or punctuation; a blanked span ("#") of the
    regex net's negative context breaks them, so "가로등 불" or last year's fire adds nothing."""
    compact = re.sub(r"[^\w#]", "", text.lower())
    return Counter(g for n in (2, 3) for i in range(len(compact) - n + 1) if "#" not in (g := compact[i:i + n]))


@dataclass(frozen=True)
class Likeness:
    """Exemplars as character 2- and 3-grams, weighted by rarity across the bank (idf, squared).

    A turn's score against an exemplar is the weighted share of the exemplar's terms the turn holds
    (how much of the exemplar was said, wherever in the turn), so a danger said in the middle of
    another request scores as high as said alone.
    """

    exemplars: tuple[tuple[str, Counter[str], float], ...]  # kind or "none", grams, total weight
    idf: dict[str, float]
    threshold: float
    margin: float

    def nearest(self, text: str) -> tuple[str, float, float]:
        """The best emergency kind, its score, and the best near miss's score."""
        grams = _grams(text)
        best: dict[str, float] = {}
        for kind, ex, total in self.exemplars:
            got = sum(self.idf[g] for g in ex if g in grams) / total
            if got > best.get(kind, 0.0):
                best[kind] = got
        none = best.pop("none", 0.0)
        if not best:
            return "none", 0.0, none
        kind = max(best, key=lambda k: best[k])
        return kind, best[kind], none

    def classify(self, text: str) -> str | None:
        kind, score, none = self.nearest(text)
        return kind if kind != "none" and score >= self.threshold and score >= none + self.margin else None

    @classmethod
    def load(cls, path: str | Path = EXEMPLARS_PATH, kinds: set[str] | None = None) -> Likeness:
        """Read ``emergency_exemplars.toml``: threshold, margin, and per kind (and "none") a list."""
        source = DataFile.read(path, GrammarError, "emergency exemplars")
        source.no_unknown((), {"threshold", "margin", "exemplars"})
        threshold = source.value(("threshold",), float, "a number between 0 and 1", ok=lambda v: 0 < v <= 1)
        margin = source.value(("margin",), float, "a number", default=0.0)
        table = source.table(("exemplars",))
        rows: list[tuple[str, Counter[str]]] = []
        for kind in table:
            if kind != "none" and kinds is not None and kind not in kinds:
                raise source.error(("exemplars", kind), f"{kind!r} is not a kind of emergency.toml")
            texts = source.value(("exemplars", kind), list, "a list of sentences",
                                 ok=lambda v: all(isinstance(s, str) and s.strip() for s in v))
            rows.extend((kind, _grams(t)) for t in texts)
        if not rows:
            raise source.error(("exemplars",), "empty")
        df: Counter[str] = Counter()
        for _, grams in rows:
            df.update(grams.keys())
        # Squared, so a syllable pair every polite ending shares (주세, 싶어) weighs next to nothing.
        idf = {g: math.log(len(rows) / c) ** 2 for g, c in df.items()}
        exemplars = tuple((kind, grams, sum(idf[g] for g in grams) or 1.0) for kind, grams in rows)
        return cls(exemplars, idf, threshold, margin)
