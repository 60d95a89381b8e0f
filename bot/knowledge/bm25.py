"""Okapi BM25 over a few hundred short documents, with weighted fields.

Small enough to score every posting of the question's terms on each lookup (well under a
millisecond for the city's FAQ), so there is no approximate search to tune.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence


class BM25Index:
    """BM25 scores of documents given as weighted term counts.

    A document maps term -> weighted frequency (a float), so a keyword field can count
    double without repeating its text.
    """

    def __init__(self, docs: Sequence[Mapping[str, float]], *, k1: float = 1.2, b: float = 0.5):
        if not docs:
            raise ValueError("BM25Index needs at least one document")
        self.size = len(docs)
        lengths = [sum(doc.values()) for doc in docs]
        average = sum(lengths) / len(lengths) or 1.0
        df: Counter[str] = Counter()
        for doc in docs:
            df.update(doc.keys())
        self.idf = {term: self._idf(count) for term, count in df.items()}
        # A term no entry contains weighs as much as the rarest possible one: an off-topic
        # question ("전기 요금") is then mostly unmatched weight and scores low.
        self.unknown_idf = self._idf(0)
        # Precomputed BM25 term weight per posting; a lookup only sums.
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for index, (doc, length) in enumerate(zip(docs, lengths)):
            norm = k1 * (1 - b + b * length / average)
            for term, tf in doc.items():
                self.postings[term].append((index, self.idf[term] * tf * (k1 + 1) / (tf + norm)))

    def _idf(self, df: int) -> float:
        return math.log(1 + (self.size - df + 0.5) / (df + 0.5))

    def scores(self, terms: Iterable[str]) -> tuple[dict[int, float], float]:
        """Raw BM25 score per matching document, and the question's total term weight.

        The total (sum of the idf of the question's distinct terms, unknown terms included) is
        what a document matching every term once would roughly score divided by ``k1 + 1``;
        ``score / total`` is comparable between questions, which the "no answer" cut needs.
        """
        unique = set(terms)
        scores: dict[int, float] = defaultdict(float)
        total = 0.0
        for term in unique:
            total += self.idf.get(term, self.unknown_idf)
            for index, weight in self.postings.get(term, ()):
                scores[index] += weight
        return scores, total
