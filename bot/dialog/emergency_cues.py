"""The emergency recogniser's third net (issue 44): the question path, which only ever asks.

A turn that neither the regex rules nor the grammar recognised gets a kind's clarifying question (an
unsure verdict), never the model's ordinary answer, when it reads like that kind of emergency: the
CUE NET (``bot/data/emergency_cues.toml``, its header describes the format) reads the turn
through Kiwi as the grammar does (``analyse``) and adds up danger cues per kind, each a concept list
of lemmas (a symptom, a body part, a poison, a weapon, someone not back, a farewell, a blaze) said
as real and now, with the shared cues (now, suddenly, someone of the family) and minus the cues of
an ordinary turn (a service asked about, the news, a habit, a worry that ended well). Without the
decisive fact no rule escalates; the cues only make the line ask.

(Until issue 44's third round this net was a bank of exemplar sentences compared by character
n-grams; it asked about almost nothing the rules had missed: commit 436cf1a has the figures.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.datafile import DataFile
from bot.dialog.emergency_grammar import (
    DATA,
    GRAMMAR_PATH,
    GrammarError,
    Item,
    Morph,
    Span,
    Words,
    _find,
    _index,
    analyse,
    kept_stems,
    read_dialect,
)

CUES_PATH = DATA / "emergency_cues.toml"
EVERY_KIND = "*"
Keep = Callable[[Span], bool] | None  # which of a cue's spans count
Memo = dict[int, list[Span]] | None  # a turn's lookups, by item (_find's memo)


@dataclass(frozen=True, eq=False)  # hashed by identity: a turn's cues are keyed by it
class Cue:
    """One group of words, and what finding it says: ``weight`` toward each of ``kinds`` (``*``: every
    kind). A positive cue counts only where said as real and now (not past perfect, not hypothetical);
    a negative one (a service asked about, the news, a habit) however it is said, and with ``anywhere``
    even before a turn of the talk (a story on a screen, a worry that ended well)."""

    name: str
    kinds: tuple[str, ...]
    weight: float
    items: tuple[Item, ...]
    anywhere: bool = False
    # A pair (a door and a forcing act, a person and being gone): the cue counts only where one of
    # ``near`` stands within ``window`` content words of one of ``items``.
    near: tuple[Item, ...] = ()
    window: int = 6
    # A negative cue (a request) said before the kind's first decisive cue holds nothing back: the
    # caller began with the request and then told the danger, as before a turn of the talk.
    lead: bool = False
    # A thought said as a hypothetical counts too (뛰어내리면 다 끝날 것 같아요: what someone means to do).
    unreal: bool = False
    # The items by their first word (looked up by the turn's words, not tried one by one), and those
    # whose first word is a prefix ("떨*").
    _by_first: dict[str, list[Item]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _prefixed: list[Item] = field(default_factory=list, init=False, repr=False, compare=False)
    _near_by_first: dict[str, list[Item]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _near_prefixed: list[Item] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for item in self.items:
            if item[0].prefix:
                self._prefixed.append(item)
            else:
                self._by_first.setdefault(item[0].form, []).append(item)
        for item in self.near:
            if item[0].prefix:
                self._near_prefixed.append(item)
            else:
                self._near_by_first.setdefault(item[0].form, []).append(item)

    def _items(self, morphs: list[Morph], at: dict[str, list[int]], near: bool = False) -> list[Item]:
        """The items (or the partner words) whose first word the turn holds."""
        by_first, prefixed = (self._near_by_first, self._near_prefixed) if near else (self._by_first, self._prefixed)
        return [item for form in at for item in by_first.get(form, ())] + prefixed

    def _pairs(self, morphs: list[Morph], at: dict[str, list[int]], keep: Keep = None,
               memo: Memo = None) -> list[tuple[Span, Span]]:
        """A pair cue's word and partner, each where said, within ``window`` of each other."""
        spans = [s for item in self._items(morphs, at) for s in _find(item, morphs, at, memo) if keep is None or keep(s)]
        if not spans:
            return []
        others = [o for item in self._items(morphs, at, near=True) for o in _find(item, morphs, at, memo)
                  if not o[2] and (keep is None or keep(o))]
        return [(s, o) for s in spans for o in others
                if o[0] - s[1] <= self.window and s[0] - o[1] <= self.window and (o[0], o[1]) != (s[0], s[1])]

    def parts(self, morphs: list[Morph], at: dict[str, list[int]], memo: Memo = None) -> list[tuple[int, int]]:
        """A pair cue's own words where said together (not the words between them)."""
        return [(x[0], x[1]) for s, o in self._pairs(morphs, at, memo=memo) if self.unreal or not s[2] for x in (s, o)]

    def own(self, morphs: list[Morph], at: dict[str, list[int]], memo: Memo = None) -> list[frozenset[int]]:
        """Where a positive cue's phrases were said: the places of each phrase's own words (not the words
        said between them: 병 들고 마신 입에 락스 holds 마시 and 입, which are no part of 병 들 락스)."""
        out = []
        for item in self._items(morphs, at):
            for s in _find(item, morphs, at, memo):
                if s[2] and not self.unreal:
                    continue
                places, k = [s[0]], s[0]
                for spec in item[1:]:  # _find's own walk: each next word the nearest that fits
                    k = next(j for j in range(k + 1, s[1] + 1) if spec.matches(morphs[j]))
                    places.append(k)
                out.append(frozenset(places))
        return out

    def where(self, morphs: list[Morph], at: dict[str, list[int]], keep: Keep = None,
              memo: Memo = None) -> list[tuple[int, int]]:
        """Where in the turn the cue was said (the first and last morpheme of each span; ``keep``: which
        of its words count). What the person was doing when it happened (급식 먹다가, 산책 중에) is no
        ordinary topic."""
        spans = [(min(s[0], o[0]), max(s[1], o[1]), s[2]) for s, o in self._pairs(morphs, at, keep, memo)] if self.near \
            else [s for item in self._items(morphs, at) for s in _find(item, morphs, at, memo) if keep is None or keep(s)]
        if self.weight > 0:
            return [(s[0], s[1]) for s in spans if self.unreal or not s[2]]
        return [(s[0], s[1]) for s in spans if self.anywhere or not (morphs[s[0]].during or morphs[s[1]].during)]


@dataclass(frozen=True)
class QuestionCues:
    """The question path (``emergency_cues.toml``): danger cues over Kiwi lemmas: the kind with the most weight of its own cues (cues that speak for
    it alone) gets its question when all its cues (shared ones and penalties added) reach ``threshold``.

    A negative cue said before a turn of the talk (``turns``: 근데, 아니, 그리고, 지금) holds nothing back:
    the caller began with a request and then told the danger ("주차 문의인데요 근데 지금 ...")."""

    cues: tuple[Cue, ...]
    threshold: float
    turns: tuple[Item, ...] = ()
    core: float = 0.0  # a kind needs one own cue of at least this weight
    dialect: tuple[tuple[re.Pattern[str], str], ...] = ()  # rewrites after the grammar's own
    # (a, b, cue): where both kinds reach the threshold, a's question, not b's (the cause before its
    # harm); with a cue name, only where that cue was found (someone hitting her, not a fall).
    prefer: tuple[tuple[str, str, str], ...] = ()

    def scores(self, text: str) -> dict[str, tuple[float, float]]:
        """Each kind with an own positive cue in the turn: the weight of its own cues, and its score."""
        return self._read(text)[0]

    def _analyse(self, text: str) -> tuple[str, list[Morph], dict[str, list[int]], dict[int, list[Span]], list[Span]]:
        """The turn with dialect endings rewritten, its morphemes, their index, the lookups' memo and
        where the talk turns in it."""
        for pattern, replacement in self.dialect:
            text = pattern.sub(replacement, text)
        morphs = analyse(text)
        at = _index(morphs)
        memo: dict[int, list[Span]] = {}  # each item looked up once a turn
        return text, morphs, at, memo, [s for item in self.turns for s in _find(item, morphs, at, memo)]

    def _read(self, text: str) -> tuple[dict[str, tuple[float, float]], set[str]]:
        """The scores, and the names of the cues found."""
        _, morphs, at, memo, turned_at = self._analyse(text)
        turns = [s[0] for s in turned_at]
        said = {cue: spans for cue in self.cues if (spans := cue.where(morphs, at, memo=memo))}
        # The danger's own words hold no ordinary word: 어디 in 어디 갔는지 몰라요, 괜찮 in 아까는 괜찮았는데.
        # (A phrase of the danger, longer than the word: 담배 said alone is a poison and a smoker's smoke
        # both; a pair's span holds the words between its two, which are not its own.)
        # A pair's own two words hold it too (줄 알 in 설탕인 줄 알고 잡쉈어요, 담배 in 담배를 먹었어요).
        danger = [(span, cue.kinds) for cue, spans in said.items() if cue.weight > 0 and not cue.near for span in spans]
        # Nor a word of another kind: 불 in 애가 불덩이예요 (a fever), 병 in 농약 한 병 (a poison, not a
        # weapon), 떨어지 in 구멍으로 떨어졌어요 (a pair's own word: someone in a pit, not a fall): the longer
        # phrase is the decisive fact, the word inside it a side word.
        phrases = [(places, cue.kinds) for cue in said if cue.weight > 0 and not cue.near
                   for places in cue.own(morphs, at, memo) if len(places) > 1]
        pairs = [((min(p[0], o[0]), max(p[1], o[1])), cue.kinds, {(p[0], p[1]), (o[0], o[1])})
                 for cue in said if cue.weight > 0 and cue.near for p, o in cue._pairs(morphs, at, memo=memo)]
        for cue in [cue for cue in said if cue.weight > 0 and cue.kinds != (EVERY_KIND,)]:
            if all(set(cue.kinds) & set(k) or k == (EVERY_KIND,) for _, k, *_ in [*phrases, *pairs]):
                continue  # no other kind's phrase to stand inside
            mine = set(cue.own(morphs, at, memo)) if not cue.near else set()  # a phrase of both kinds is neither's side

            def keep(s: Span, kinds: tuple[str, ...] = cue.kinds, mine: set[frozenset[int]] = mine) -> bool:
                def inside(c: int, d: int, k: tuple[str, ...]) -> bool:
                    return c <= s[0] and s[1] <= d and d - c > s[1] - s[0] and not set(kinds) & set(k) and k != (EVERY_KIND,)
                return not any({s[0], s[1]} < places and places not in mine and not set(kinds) & set(k)
                               and k != (EVERY_KIND,) for places, k in phrases) and \
                    not any(inside(c, d, k) and (s[0], s[1]) in parts for (c, d), k, parts in pairs)
            if not (spans := cue.where(morphs, at, keep, memo)):
                del said[cue]
            else:
                said[cue] = spans
        danger_spans = [span for span, _ in danger]
        own_words = {part for cue in said if cue.weight > 0 and cue.near for part in cue.parts(morphs, at, memo)}
        for cue in [cue for cue in said if cue.weight < 0]:
            said[cue] = [(a, b) for a, b in said[cue] if (a, b) not in own_words
                         and not any(c <= a and b <= d and d - c > b - a for c, d in danger_spans)]
            if not said[cue]:
                del said[cue]
        own: dict[str, float] = {}
        first: dict[str, int] = {}  # where each kind's first decisive cue stands
        last: dict[str, int] = {}  # and its last
        for cue, spans in said.items():
            if cue.weight > 0 and len(cue.kinds) == 1 and cue.kinds != (EVERY_KIND,):
                kind = cue.kinds[0]
                own[kind] = own.get(kind, 0.0) + cue.weight
                if cue.weight >= self.core:
                    first[kind] = min(first.get(kind, len(morphs)), min(a for a, _ in spans))
                    last[kind] = max(last.get(kind, -1), max(a for a, _ in spans))
        out = {}
        for kind, weight in own.items():
            if kind not in first:
                continue
            # A turn of the talk turns toward the danger only where the danger follows it (지금 물어봐도
            # 되나요 after a story is no turn: the talk went back to the request).
            turned = max((t for t in turns if t < last[kind]), default=-1)
            out[kind] = (weight, sum(cue.weight for cue, spans in said.items()
                                     if (cue.kinds == (EVERY_KIND,) or kind in cue.kinds)
                                     and (cue.weight > 0 or cue.anywhere
                                          or max(b for _, b in spans) > (max(turned, first[kind] - 1) if cue.lead else turned))))
        return out, {cue.name for cue in said}

    def after_turn(self, text: str) -> str | None:
        """What follows the last turn of the talk (``turns``: 근데, 잠깐, 지금) in the turn, dialect endings
        rewritten; None where the talk does not turn."""
        text, morphs, _, _, turned_at = self._analyse(text)
        return text[max(morphs[s[1]].end for s in turned_at):] if turned_at else None

    def doubted(self, text: str, kind: str) -> bool:
        """A negative group counted against ``kind`` in the turn (a story, a figure of speech, a
        request after the danger): the question stands, but no other net may turn it into an escalation."""
        weight, score = self.scores(text).get(kind, (0.0, 0.0))
        return score < weight

    def classify(self, text: str) -> str | None:
        """The kind whose question the turn gets, or None (``text``: the turn, dialect endings made
        standard as for the grammar)."""
        scores, found = self._read(text)
        if not scores:
            return None
        kind = max(scores, key=lambda k: scores[k])
        if scores[kind][1] < self.threshold:
            return None
        for first, over, cue in self.prefer:  # someone hitting her, and her injury: the question about who
            if kind == over and first in scores and scores[first][1] >= self.threshold and (not cue or cue in found):
                return first
        return kind

    @classmethod
    def load(cls, path: str | Path = CUES_PATH, kinds: set[str] | None = None,
             grammar: str | Path | None = None) -> QuestionCues:
        """Read ``emergency_cues.toml``: threshold, turns, [concept] lists and [[cue]] groups; a
        word may name a concept of the grammar file (``grammar``, by default the one beside ``path``).

        Raises:
            GrammarError: a missing file, bad TOML, an unknown key or kind, or a concept never defined.
        """
        source = DataFile.read(path, GrammarError, "emergency question cues")
        beside = Path(path).parent / GRAMMAR_PATH.name
        with kept_stems():
            return _load_cues(source, kinds, grammar or (beside if beside.is_file() else None))


def _load_cues(source: DataFile, kinds: set[str] | None, grammar: str | Path | None) -> QuestionCues:
    """The cue net: threshold, turns, concept lists, and [[cue]] groups."""
    source.no_unknown((), {"threshold", "core", "turns", "dialect", "prefer", "concept", "cue"})
    dialect = read_dialect(source)
    threshold = source.value(("threshold",), (int, float), "a positive number", ok=lambda v: v > 0)
    core = source.value(("core",), (int, float), "a number", default=0)
    turns = source.value(("turns",), list, "a list of words", default=[],
                         ok=lambda v: all(isinstance(w, str) and w.strip() for w in v))
    prefer = source.value(("prefer",), list, "a list of [kind, kind] or [kind, kind, cue name] lists", default=[],
                          ok=lambda v: all(isinstance(p, list) and len(p) in (2, 3) and all(isinstance(k, str) for k in p)
                                           for p in v))
    if kinds is not None and (bad := [k for pair in prefer for k in pair[:2] if k not in kinds]):
        raise source.error(("prefer",), f"{bad[0]!r} is not a kind of emergency.toml")
    names = {cue.get("name") for cue in source.tables(("cue",))}
    if bad := [p[2] for p in prefer if len(p) == 3 and p[2] not in names]:
        raise source.error(("prefer",), f"{bad[0]!r} is not the name of a [[cue]]")
    words = Words(source, {})
    if grammar is not None:  # the grammar's concepts may be named too
        words.concepts.update(DataFile.read(grammar, GrammarError, "emergency grammar").table(("concept",), default={}))
    words.read_concepts()
    items = words.items

    cues = []
    for i, _ in enumerate(source.tables(("cue",))):
        key: tuple[str | int, ...] = ("cue", i)
        source.no_unknown(key, {"name", "kinds", "weight", "words", "anywhere", "near", "window", "lead",
                                "unreal"})
        name = source.value((*key, "name"), str, "a name")
        named = tuple(source.value((*key, "kinds"), list, 'a non-empty list of kind names (or ["*"])',
                                   ok=lambda v: bool(v) and all(isinstance(k, str) for k in v)))
        if named != (EVERY_KIND,) and kinds is not None and (bad := [k for k in named if k not in kinds]):
            raise source.error((*key, "kinds"), f"{bad[0]!r} is not a kind of emergency.toml")
        weight = source.value((*key, "weight"), (int, float), "a non-zero number", ok=lambda v: v != 0)
        words = source.value((*key, "words"), list, "a non-empty list of words",
                             ok=lambda v: bool(v) and all(isinstance(s, str) and s.strip() for s in v))
        anywhere = source.value((*key, "anywhere"), bool, "true or false", default=False)
        near = source.value((*key, "near"), list, "a list of words", default=[],
                            ok=lambda v: all(isinstance(s, str) and s.strip() for s in v))
        window = source.value((*key, "window"), int, "a positive whole number", default=6, ok=lambda v: v > 0)
        lead = source.value((*key, "lead"), bool, "true or false", default=False)
        unreal = source.value((*key, "unreal"), bool, "true or false", default=False)
        cues.append(Cue(name, named, float(weight), items((*key, "words"), words), anywhere,
                        items((*key, "near"), near) if near else (), window, lead, unreal))
    return QuestionCues(tuple(cues), float(threshold), items(("turns",), turns), float(core), dialect,
                        tuple((p[0], p[1], p[2] if len(p) == 3 else "") for p in prefer))
