"""The emergency recogniser's fourth net (issue 44): a linear model that asks, or seconds another net.

The regex rules, the grammar and the question cues are written by hand, and on words nobody here
wrote they learn the wordings more than the meanings. This net is learned instead, from the training
tables (``bench/emergency_training*.toml``, the read held-out tables) and the line's ordinary turns:
a multinomial logistic regression over what the grammar reads in a turn (Kiwi lemmas with their
negation, unreality and intent, lemma pairs) and the character pairs and triples of the turn with its
spaces taken out (speech-to-text runs words together; a dialect respells them). A turn no hand-written
net recognised gets the kind's clarifying question when the model's weight on that kind reaches
``threshold``. Where it is nearly certain (``alone``, on a turn of ``alone_syllables`` or more) it
escalates by itself (round 15: a danger described, never named, gives the hand-written nets nothing
to read); below that a false hit costs one question, not a dispatcher.
When the grammar or the cue net asks about a kind and this net reads the same kind at ``confirm``,
two nets that share no rule agree and the turn escalates (``EmergencyRules.classify``). And where a
hand-written net escalates a long turn this net reads as ordinary at ``doubt`` (a worry that ended, a
service asked about in a danger's words), the caller is asked the kind's question instead (round 10).

Round 22: the model also reads what each word is near in meaning. Kiwi's own language model (CoNg,
in ``kiwipiepy_model``) places morphemes in a space of meanings; a word the tables never had
(주저앉다) sits near one they had (쓰러지다). The net's anchors are the content morphemes of many
training emergencies; each content morpheme of a turn adds the anchors within ``KIN_NEAR`` of it
(``KIN_TOP`` at most) as features, so weights learned on an anchor reach its neighbours.

The weights are data (``bot/data/emergency_learned.npz``), made by ``scripts/train_emergency_net.py``
from the tables named in the file, with their sha256: a test says when a table changed since.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bot.core.kiwi import load_kiwi
from bot.dialog.emergency_grammar import DATA, analyse, kiwi_tokens

LEARNED_PATH = DATA / "emergency_learned.npz"
NONE = "none"
BIAS = "*"
_SPACE = re.compile(r"\s+")
_HANGUL = re.compile(r"[가-힣]")


class LearnedNetError(ValueError):
    """A weights file that cannot be used; the message names the file and what is wrong."""


# Kiwi's vocabulary is ordered by frequency: past its first KIN_CUT morphemes the places are untrained
# (번개탄, id 35,125, sits at 0.91 from 쿵짝쿵짝 and 방충망). At cosine 0.6 most content words are neighbours.
# Five folds of the 50 training tables (round 22; 11,924 emergencies, 9,297 near misses), against no neighbours:
# the nearest anchor at 0.7 escalated 16 more emergencies and 7 fewer near misses; three anchors each, 24 more
# and 5 fewer, but one near miss escalated by this net alone (at every ``alone`` up to 0.99999).
KIN_CUT = 20_000
KIN_NEAR = 0.7
KIN_TOP = 1
KIN_MIN_ROWS = 20  # an anchor stands in at least this many training emergencies
_CONTENT = re.compile(r"(NN[GP]|V[VA](-[IR])?|MAG|XR)")


def kiwi_model() -> str:
    """The installed version of Kiwi's model: morpheme ids and their places are its own."""
    return importlib.metadata.version("kiwipiepy_model")


@dataclass(frozen=True, eq=False)  # hashed by identity: the neighbours' cache is keyed by it
class Anchors:
    """The morphemes whose neighbours the net reads, by Kiwi morpheme id (of ``model``). ``table``: every
    morpheme's neighbours, worked out once when the net is saved, so a call never measures a similarity."""

    ids: tuple[int, ...]
    names: tuple[str, ...]  # "form/tag", the features' names
    model: str
    table: dict[int, tuple[str, ...]] | None = None

    @classmethod
    def of(cls, texts: Iterable[str], min_rows: int = KIN_MIN_ROWS) -> Anchors:
        """The content morphemes of Kiwi's first ``KIN_CUT`` in at least ``min_rows`` of ``texts``."""
        counts: Counter[tuple[int, str]] = Counter()
        for text in texts:
            counts.update({(t.id, f"{t.form}/{t.tag}") for t in kiwi_tokens(text) if _content(t.id, t.tag)})
        chosen = sorted(m for m, n in counts.items() if n >= min_rows)
        return cls(tuple(i for i, _ in chosen), tuple(name for _, name in chosen), kiwi_model())

    def near(self, morpheme: int) -> tuple[str, ...]:
        """The features of the anchors within ``KIN_NEAR`` of one morpheme, nearest first."""
        if self.table is not None:
            return self.table.get(morpheme, ())
        return _near(self, morpheme)

    def tabled(self) -> Anchors:
        """These anchors with the neighbours of every content morpheme of Kiwi's first ``KIN_CUT``."""
        kiwi = load_kiwi()
        table = {}
        for i in range(KIN_CUT):
            if _content(i, kiwi.morpheme(i).tag) and (near := _near(self, i)):
                table[i] = near
        return Anchors(self.ids, self.names, self.model, table)


def _content(morpheme: int, tag: str) -> bool:
    return morpheme < KIN_CUT and _CONTENT.fullmatch(tag) is not None and _placed(morpheme)


@functools.lru_cache(maxsize=65_536)
def _placed(morpheme: int) -> bool:
    """A morpheme of the model's vocabulary; a word it does not know has its tag's empty placeholder id."""
    return bool(load_kiwi().morpheme(morpheme).form)


@functools.lru_cache(maxsize=65_536)
def _near(anchors: Anchors, morpheme: int) -> tuple[str, ...]:
    similarity = load_kiwi().morpheme_similarity
    found = [(-v, name) for i, name in zip(anchors.ids, anchors.names, strict=True)
             if (v := similarity(morpheme, i)) >= KIN_NEAR]
    return tuple("k:" + name for _, name in sorted(found)[:KIN_TOP])


def features(text: str, anchors: Anchors | None = None) -> set[str]:
    """What the model reads in one turn (the text after the grammar's dialect rewrites)."""
    morphs = analyse(text)
    out = set()
    words = []
    for m in morphs:
        word = m.form + ("!" if m.negated else "") + ("~" if m.unreal else "") + ("+" if m.will else "")
        out.add("m:" + word)
        words.append(word)
    out.update(f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False))
    out.add(BIAS)  # every turn: the prior that a turn is ordinary
    if anchors is not None:
        for t in kiwi_tokens(text):
            if _content(t.id, t.tag):
                out.update(anchors.near(t.id))
    run = _SPACE.sub("", text)
    for n in (2, 3):
        out.update(f"c{n}:{run[i:i + n]}" for i in range(len(run) - n + 1))
    return out


@dataclass(frozen=True, eq=False)  # its weights are arrays: one net equals only itself
class LearnedNet:
    """Weights per feature and class (``classes[0]`` is "none"); ``classify`` is pure."""

    vocabulary: dict[str, int]
    weights: np.ndarray  # float32 [features, classes]
    classes: tuple[str, ...]
    threshold: float
    min_syllables: int  # a shorter turn ("아뇨", "뭐라고요") is left to the rules: too little to read
    confirm: float  # the weight on another net's kind that turns its question into an escalation
    sources: tuple[tuple[str, str], ...] = ()  # (table, sha256) it was trained on
    doubt: float | None = None  # the weight on "none" that turns another net's escalation into its question
    doubt_syllables: int = 20  # a shorter turn is never doubted ("미아 신고하려고요": plain words, few features)
    alone: float | None = None  # the weight on a kind at which this net escalates where no other net asks
    alone_syllables: int = 20  # a shorter turn is only asked ("가스 냄새는 안 나는데 보일러가 이상해요")
    anchors: Anchors | None = None  # None: a net that reads no word's neighbours

    def scores(self, text: str) -> np.ndarray:
        """The model's probability per class for one turn."""
        rows = [i for f in features(text, self.anchors) if (i := self.vocabulary.get(f)) is not None]
        logits = self.weights[rows].sum(axis=0) if rows else np.zeros(len(self.classes), np.float32)
        e = np.exp(logits - logits.max())
        return e / e.sum()

    def readable(self, text: str) -> bool:
        """Long enough for this net to read (``min_syllables`` Hangul syllables)."""
        return len(_HANGUL.findall(text)) >= self.min_syllables

    def likeliest(self, text: str) -> tuple[str, float] | None:
        """The emergency kind the net weighs most and its weight; None for a turn too short to read."""
        if not self.readable(text):
            return None
        p = self.scores(text)
        best = 1 + int(p[1:].argmax())
        return self.classes[best], float(p[best])

    def classify(self, text: str) -> str | None:
        """The kind to ask about, or None."""
        likeliest = self.likeliest(text)
        return likeliest[0] if likeliest is not None and likeliest[1] >= self.threshold else None

    def confirms(self, text: str, kind: str) -> bool:
        """Another net's question of ``kind`` that this net reads as that kind too (at ``confirm``)."""
        if not self.readable(text) or kind not in self.classes:
            return False
        return bool(self.scores(text)[self.classes.index(kind)] >= self.confirm)

    def escalates(self, text: str, kind: str) -> bool:
        """A turn only this net reads, as ``kind`` at ``alone``: escalated, not asked (round 15)."""
        if self.alone is None or kind not in self.classes or len(_HANGUL.findall(text)) < self.alone_syllables:
            return False
        return bool(self.scores(text)[self.classes.index(kind)] >= self.alone)

    def doubts(self, text: str) -> bool:
        """A sure verdict of another net that this net reads as an ordinary turn (at ``doubt``): the
        caller is asked the kind's question instead (round 10: a worry that ended, a service asked about)."""
        if self.doubt is None or len(_HANGUL.findall(text)) < self.doubt_syllables:
            return False
        return bool(self.scores(text)[0] >= self.doubt)

    def save(self, path: str | Path) -> None:
        words = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        arrays: dict[str, Any] = dict(
            features=np.array(words), weights=self.weights.astype(np.float16), classes=np.array(self.classes),
            threshold=np.float32(self.threshold), min_syllables=np.int32(self.min_syllables),
            confirm=np.float32(self.confirm), doubt=np.float32(np.nan if self.doubt is None else self.doubt),
            doubt_syllables=np.int32(self.doubt_syllables),
            alone=np.float32(np.nan if self.alone is None else self.alone), alone_syllables=np.int32(self.alone_syllables),
            sources=np.array([f"{name}\t{digest}" for name, digest in self.sources]), **_anchor_arrays(self.anchors))
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | Path = LEARNED_PATH, kinds: set[str] | None = None) -> LearnedNet:
        """Read a weights file; ``kinds`` are the emergency file's kinds (each class must be one).

        Raises:
            LearnedNetError: a missing or unreadable file, a missing array, or an unknown kind.
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                words, weights, classes = z["features"], z["weights"], z["classes"]
                threshold, min_syllables, sources = float(z["threshold"]), int(z["min_syllables"]), z["sources"]
                confirm = float(z["confirm"])
                doubt, doubt_syllables = float(z["doubt"]), int(z["doubt_syllables"])
                alone, alone_syllables = float(z["alone"]), int(z["alone_syllables"])
                anchors = _anchors(path, z)
        except (OSError, ValueError, KeyError) as e:
            raise LearnedNetError(f"{path}: not a weights file of the learned emergency net ({e})") from e
        names = tuple(str(c) for c in classes)
        if not names or names[0] != NONE or weights.shape != (len(words), len(names)):
            raise LearnedNetError(f"{path}: classes {names} and weights {weights.shape} do not fit")
        if kinds is not None and (unknown := set(names[1:]) - kinds):
            raise LearnedNetError(f"{path}: classes {sorted(unknown)} are not kinds of the emergency file")
        return cls({str(w): i for i, w in enumerate(words)}, weights.astype(np.float32), names, threshold,
                   min_syllables, confirm, tuple(_source(str(s)) for s in sources),
                   None if math.isnan(doubt) else doubt, doubt_syllables, None if math.isnan(alone) else alone,
                   alone_syllables, anchors)


def _anchors(path: str | Path, z: Any) -> Anchors | None:
    """The file's anchors; a net made with another Kiwi model would read other morphemes by the same ids."""
    if "anchor_ids" not in z or not len(z["anchor_ids"]):
        return None
    model, installed = str(z["kiwi_model"]), kiwi_model()
    if model != installed:
        raise LearnedNetError(f"{path}: made with kiwipiepy_model {model}, {installed} is installed: "
                              "retrain it (python scripts/train_emergency_net.py)")
    ids, names = tuple(int(i) for i in z["anchor_ids"]), tuple(str(n) for n in z["anchor_names"])
    near_ids, near = z["near_ids"], z["near"]
    if len(ids) != len(names) or len(near_ids) != len(near):
        raise LearnedNetError(f"{path}: anchors or their neighbours do not fit ({len(ids)} ids, {len(names)} names; "
                              f"{len(near_ids)} morphemes, {len(near)} neighbour lists)")
    return Anchors(ids, names, model, {int(i): tuple(str(n).split()) for i, n in zip(near_ids, near, strict=True)})


def _anchor_arrays(anchors: Anchors | None) -> dict[str, np.ndarray]:
    """What ``save`` writes of the anchors: their ids and names, Kiwi's model, each morpheme's neighbours."""
    if anchors is None or not anchors.ids:
        return {"anchor_ids": np.zeros(0, np.int32)}
    table = (anchors if anchors.table is not None else anchors.tabled()).table or {}
    return {"anchor_ids": np.array(anchors.ids, np.int32), "anchor_names": np.array(anchors.names, dtype=str),
            "kiwi_model": np.array(anchors.model), "near_ids": np.array(sorted(table), np.int32),
            "near": np.array([" ".join(table[i]) for i in sorted(table)], dtype=str)}


def _source(line: str) -> tuple[str, str]:
    name, _, digest = line.partition("\t")
    return name, digest


def train(rows: Sequence[tuple[str, str]], classes: Sequence[str], *, threshold: float, min_syllables: int,
          confirm: float = 1.0, doubt: float | None = None, alone: float | None = None, alone_syllables: int = 20,
          epochs: int = 8, rate: float = 0.5, l2: float = 1e-4, seed: int = 0, orders: int = 1,
          sources: Iterable[tuple[str, str]] = (), anchors: Anchors | None = None,
          featurize: Callable[[str], set[str]] | None = None) -> LearnedNet:
    """Fit the net on ``(text, kind or "none")`` rows: AdaGrad on the softmax loss, seeded (the same
    rows give the same weights). Features seen in one row only are left out (they name a row, not a
    meaning). With ``orders`` > 1 the rows are fitted that many times, each in its own seeded order
    (seed, seed + 1, ...), and the weights averaged: one pass's weights on a turn between two groups
    of rows (a worry that ended well, a relative's call relaying a crime) follow the rows it met last.
    The net reads ``anchors``' neighbours (round 22); ``featurize`` (default: ``features`` with them) must too."""
    read = [(featurize or functools.partial(features, anchors=anchors))(text) for text, _ in rows]
    seen: dict[str, int] = {}
    for fs in read:
        for f in fs:
            seen[f] = seen.get(f, 0) + 1
    vocabulary = {f: i for i, f in enumerate(sorted(f for f, n in seen.items() if n >= 2))}
    x = [np.array(sorted(vocabulary[f] for f in fs if f in vocabulary), np.int64) for fs in read]
    y = [classes.index(kind) for _, kind in rows]
    w = np.zeros((len(vocabulary), len(classes)), np.float32)
    for k in range(orders):
        w += _fit(x, y, len(vocabulary), len(classes), epochs, rate, l2, seed + k)
    w /= orders
    assert math.isfinite(float(w.sum()))
    return LearnedNet(vocabulary, w, tuple(classes), threshold, min_syllables, confirm, tuple(sources), doubt,
                      alone=alone, alone_syllables=alone_syllables, anchors=anchors)


def _fit(x: list[np.ndarray], y: list[int], features: int, classes: int, epochs: int, rate: float, l2: float,
         seed: int) -> np.ndarray:
    """One seeded pass order's weights [features, classes]."""
    w = np.zeros((features, classes), np.float32)
    g2 = np.full_like(w, 1e-6)
    order = list(range(len(x)))
    shuffle = random.Random(seed).shuffle
    for _ in range(epochs):
        shuffle(order)
        for i in order:
            if not len(x[i]):
                continue
            s = w[x[i]].sum(axis=0)
            p = np.exp(s - s.max())
            p /= p.sum()
            p[y[i]] -= 1.0
            grad = p[None, :] + l2 * w[x[i]]
            g2[x[i]] += grad * grad
            w[x[i]] -= rate * grad / np.sqrt(g2[x[i]])
    return w
