"""Lexical lookup of the city's facts for one caller turn, before the model call.

``Knowledge.lookup`` finds the FAQ entries and departments that match what the caller said;
``render_facts`` turns them into a short block for the prompt, so the one model call answers
from the city's own facts (or says it does not know when nothing matched). A plain request for
a department's phone number or hours is answered from the directory alone (``directory_hit``).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loguru import logger

from bot.knowledge.bm25 import BM25Index
from bot.knowledge.data import Department, Directory, Entry, FaqEntry, load_directory, load_faq
from bot.knowledge.text import Tokenizer, make_tokenizer, normalize

# Retrievers made of several indexes: (tokenizer name, weight of its normalized score).
_RETRIEVERS: dict[str, tuple[tuple[str, float], ...]] = {
    "hybrid": (("kiwi", 1.0), ("char-ngram", 2.0)),  # char scores run about half of Kiwi's
}
# "No answer" cut per retriever (their scores are on different scales), each set in a gap
# between the answerable and the unanswerable questions of bench/faq_eval.toml.
DEFAULT_MIN_SCORE: dict[str, float] = {"hybrid": 0.7, "kiwi": 0.5, "char-ngram": 0.1}


# What may follow a department's name in the same word ("청소과에", "세무과는요").
_PARTICLES = frozenset({
    "은", "는", "이", "가", "을", "를", "에", "에서", "의", "도", "요", "좀", "로", "으로", "랑", "이랑",
    "하고", "에요", "이에요", "예요", "은요", "는요", "이요", "쪽", "쪽에", "하고요", "말이에요",
})


@dataclass(frozen=True)
class FieldWeights:
    """How much a term counts in each field of an entry (BM25 term frequency multiplier)."""

    question: float = 1.0
    keywords: float = 2.0  # the words callers use, written for retrieval
    answer: float = 0.3  # long and full of shared words ("행정복지센터"): a weak signal
    name: float = 2.0  # department name and aliases
    handles: float = 1.0
    ask: float = 0.5  # "전화번호 연락처 부서": lifts departments on phone-number questions


@dataclass(frozen=True)
class KnowledgeOptions:
    """Retrieval settings. The defaults were chosen on ``bench/faq_eval.toml``."""

    # "hybrid" (both below, scores added), "kiwi" (morphemes, kiwipiepy) or "char-ngram" (no
    # model). Hybrid ranks best on bench/faq_eval.toml; scripts/eval_faq.py compares them.
    retriever: str = "hybrid"
    k1: float = 1.2
    b: float = 0.5
    weights: FieldWeights = field(default_factory=FieldWeights)
    # "No answer" cut on the top entry's score (BM25 / the question's total term weight);
    # None: the retriever's DEFAULT_MIN_SCORE.
    min_score: float | None = None
    # A follow-up turn ("수수료는요?") leans towards the topic of the call so far.
    category_boost: float = 0.15


@dataclass(frozen=True)
class Lookup:
    """What one lookup found.

    Attributes:
        hits: Up to k (entry, score) pairs, best first; empty when nothing scored above the cut.
            The score is the match before the call-topic boost, so a boosted entry can rank
            above one with a higher score.
        directory_hit: The department when the turn asks for a department's phone number or
            hours and exactly one department matches; answer it with ``directory_reply``.
        ms: Time the lookup took, in milliseconds.
    """

    hits: list[tuple[Entry, float]]
    directory_hit: Department | None
    ms: float


class Knowledge:
    """The FAQ and the department directory, indexed for lookup. Immutable after ``load``."""

    def __init__(self, faq: Iterable[FaqEntry], directory: Directory, options: KnowledgeOptions | None = None):
        self.options = options or KnowledgeOptions()
        self.faq = tuple(faq)
        self.directory = directory
        self.entries: tuple[Entry, ...] = self.faq + directory.departments
        # (tokenizer, index, weight of its normalized score)
        self._indexes: list[tuple[Tokenizer, BM25Index, float]] = []
        for name, weight in _RETRIEVERS.get(self.options.retriever, ((self.options.retriever, 1.0),)):
            tokenizer = make_tokenizer(name)
            docs = [self._document(e, tokenizer) for e in self.entries]
            self._indexes.append((tokenizer, BM25Index(docs, k1=self.options.k1, b=self.options.b), weight))
        given = self.options.min_score
        self._min_score: float = DEFAULT_MIN_SCORE.get(self.options.retriever, 0.5) if given is None else given
        self._ask_words = tuple(w.replace(" ", "") for w in directory.ask_words)
        # Spaceless spoken name -> department, longest names first ("상하수도사업소" before "수도사업소").
        names = {n.replace(" ", ""): d for d in directory.departments for n in (d.name, *d.aliases)}
        self._names = sorted(names.items(), key=lambda item: -len(item[0]))

    @classmethod
    def load(cls, faq_path: Path | str, directory_path: Path | str, options: KnowledgeOptions | None = None,
             categories: Iterable[str] | None = None) -> Knowledge:
        """Read, check and index both files. Blocking (file I/O; the Kiwi retriever loads a model).

        Args:
            faq_path: ``bot/data/faq.toml``.
            directory_path: ``bot/data/directory.toml``.
            options: Retrieval settings.
            categories: When given, the allowed FAQ ``category`` names (domain.toml categories).

        Raises:
            KnowledgeDataError: A file is missing or wrong; the message is ``path:line: ...``.
        """
        faq = load_faq(faq_path, categories)
        directory = load_directory(directory_path)  # ids cannot clash: "faq-..." vs "dept-..."
        knowledge = cls(faq, directory, options)
        logger.info("Knowledge: {} FAQ entries, {} departments, retriever {}",
                    len(faq), len(directory.departments), knowledge.options.retriever)
        return knowledge

    def _document(self, entry: Entry, tokenize: Tokenizer) -> dict[str, float]:
        w = self.options.weights
        doc: defaultdict[str, float] = defaultdict(float)

        def add(texts: Iterable[str], weight: float) -> None:
            for text in texts:
                for term in tokenize(text):
                    doc[term] += weight

        if isinstance(entry, FaqEntry):
            add([entry.question], w.question)
            add(entry.keywords, w.keywords)
            add([entry.answer], w.answer)
        else:
            add([entry.name, *entry.aliases], w.name)
            add(entry.handles, w.handles)
            add(["전화번호 연락처 부서 담당"], w.ask)
        return doc

    def lookup(self, text: str, slots: Mapping[str, str | None] | None = None, k: int = 3) -> Lookup:
        """The entries that answer ``text`` (one caller turn), best first.

        Fast enough for the event loop: well under a millisecond on the shipped data.

        Args:
            text: What the caller said, as transcribed.
            slots: The call's known slots; ``category`` (a domain.toml category) favours that
                topic's entries when scores are close. Other slots are not used.
            k: How many hits at most.
        """
        start = time.perf_counter()
        scores = self.scores(text)
        hits: list[tuple[Entry, float]] = []
        if scores:
            category = (slots or {}).get("category")
            ranked = []
            for index, score in scores.items():
                entry = self.entries[index]
                boost = 1 + self.options.category_boost if category and getattr(entry, "category", None) == category else 1
                ranked.append((score * boost, score, index))
            ranked.sort(key=lambda item: (-item[0], item[2]))
            # The cut looks at the unboosted score: the call's topic alone never makes an answer.
            if max(item[1] for item in ranked) >= self._min_score:
                hits = [(self.entries[index], round(score, 4)) for _, score, index in ranked[:k]]
        directory_hit = self._directory_hit(text, hits)
        return Lookup(hits=hits, directory_hit=directory_hit, ms=(time.perf_counter() - start) * 1000)

    def scores(self, text: str) -> dict[int, float]:
        """Normalized score per matching entry index (BM25 / the question's total term weight)."""
        combined: dict[int, float] = {}
        for tokenize, index, weight in self._indexes:
            raw, total = index.scores(tokenize(text))
            if total <= 0:
                continue
            for position, score in raw.items():
                combined[position] = combined.get(position, 0.0) + weight * score / total
        return combined

    def _directory_hit(self, text: str, hits: list[tuple[Entry, float]]) -> Department | None:
        words = normalize(text).split()
        compact = "".join(words)
        if not any(word in compact for word in self._ask_words):
            return None
        named = self._named_departments(words)
        if len(named) == 1:
            return named[0]
        # No department named ("쓰레기 담당 부서 전화번호"): take the best hit when it is a department.
        # Two named ("보건소랑 세무과 번호"): not one clear answer; the model asks or gives both.
        if not named and hits and isinstance(hits[0][0], Department):
            return hits[0][0]
        return None

    def _named_departments(self, words: list[str]) -> list[Department]:
        """The departments whose names the caller said."""
        compact = "".join(words)
        starts = [0]
        for word in words:
            starts.append(starts[-1] + len(word))
        found: list[tuple[str, Department]] = []
        for name, dept in self._names:
            # A shorter name inside a longer one already found ("수도사업소" in "상하수도사업소") is the same mention.
            if any(name in longer for longer, _ in found):
                continue
            if any(self._is_mention(compact, starts, m.start(), m.end()) for m in re.finditer(re.escape(name), compact)):
                found.append((name, dept))
        return list({dept.id: dept for _, dept in found}.values())

    def _is_mention(self, compact: str, starts: list[int], begin: int, end: int) -> bool:
        """A name said as a word: it starts a word (spaces inside it may be missing) and the rest
        of its last word is a particle or an ask word ("세무과에", "청소과전화번호"), so "주차 과태료"
        is not "주차과"."""
        if begin not in starts:
            return False
        word_end = next((s for s in starts if s >= end), len(compact))
        rest = compact[end:word_end]
        return not rest or rest in _PARTICLES or any(rest.startswith(w) for w in self._ask_words)


def render_facts(hits: list[tuple[Entry, float]]) -> str:
    """The hits as a compact block for the prompt, one ``[id] fact`` line each ("" when none)."""
    return "\n".join(f"[{entry.id}] {entry.fact}" for entry, _ in hits)


def directory_reply(entry: Department) -> str:
    """What the agent says for a department's phone number and hours (digits left for the TTS normalizer)."""
    return f"{entry.name} 전화번호는 {entry.phone}입니다. 운영 시간은 {entry.hours}입니다."
