"""Turning caller text and FAQ text into index terms: normalization and the two tokenizers.

Callers' words arrive from the STT with spacing errors ("가족 관계 증명서", "쓰레기봉투"),
fillers and dropped particles, so both tokenizers aim to give the same terms for the same
words however they were spaced.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Protocol

from bot.core.kiwi import load_kiwi

# Hesitation words that carry no meaning; dropped only as whole words ("음 등본" but not "음식물").
FILLERS = frozenset({"음", "어", "아", "저", "저기", "저기요", "그", "그게", "그러니까", "뭐", "에", "좀", "막", "혹시", "그냥"})
_PUNCT_RE = re.compile(r"[^\w\s]")
_SPACE_RE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC, lowercase, punctuation to spaces, fillers dropped, single spaces."""
    text = _PUNCT_RE.sub(" ", unicodedata.normalize("NFKC", text).lower())
    return " ".join(word for word in _SPACE_RE.split(text) if word and word not in FILLERS)


class Tokenizer(Protocol):
    """Text to index terms. The same tokenizer indexes the entries and reads the questions."""

    name: str

    def __call__(self, text: str) -> list[str]: ...


class CharNgramTokenizer:
    """Character 2- and 3-grams of the text with every space removed.

    Removing the spaces first makes "가족 관계 증명서" and "가족관계증명서" the same terms, and
    partial words still match ("떼려면" shares "떼려" with "떼려고"). Needs no model.
    """

    name = "char-ngram"

    def __init__(self, sizes: tuple[int, ...] = (2, 3)):
        self.sizes = sizes

    def __call__(self, text: str) -> list[str]:
        compact = normalize(text).replace(" ", "")
        terms = [compact[i:i + n] for n in self.sizes for i in range(len(compact) - n + 1)]
        # A one-syllable question ("눈") still gets a term.
        return terms or ([compact] if compact else [])


# Kiwi part-of-speech tags that carry content: nouns, numbers, foreign words, roots, verb and
# adjective stems, adverbs ("안 나와요"). Particles and endings are what callers and the STT vary most.
_KIWI_NOUN_TAGS = frozenset({"NNG", "NNP", "NR", "SL", "SN", "SH", "XR"})
_KIWI_CONTENT_TAGS = _KIWI_NOUN_TAGS | {"VV", "VA", "VV-R", "VV-I", "VA-R", "VA-I", "MAG"}
# Stems and adverbs in nearly every question ("어떻게 해야 돼요", "알 수 있을까요"): no signal.
KIWI_STOP_MORPHEMES = frozenset({
    "하", "되", "있", "없", "같", "보", "주", "알", "싶", "어떻", "어떡하", "어떻게", "가", "오", "드리",
    "좀", "너무", "그냥", "꼭", "다", "잘", "더", "왜", "지금", "이제", "않", "말", "그렇", "이렇",
})


class KiwiTokenizer:
    """Content morphemes from Kiwi's morphological analysis (``kiwipiepy``).

    "주민등록등본 떼려면" gives 주민, 등록, 등본, 떼 and the compounds 주민등록, 등록등본, so
    particles and endings never count and a compound matches whether or not it was spaced.
    A prefix is glued to its noun (재+활용 -> 재활용).
    """

    name = "kiwi"

    def __init__(self, compounds: bool = True):
        self.kiwi = load_kiwi()
        self.compounds = compounds

    def __call__(self, text: str) -> list[str]:
        terms: list[str] = []
        previous = None  # (form, word position) of the last noun, for compounds
        prefix = ""
        for token in self.kiwi.tokenize(normalize(text)):
            tag = token.tag
            if tag == "XPN":
                prefix = token.form
                continue
            form = prefix + token.form if tag in _KIWI_NOUN_TAGS else token.form
            prefix = ""
            if tag not in _KIWI_CONTENT_TAGS or form in KIWI_STOP_MORPHEMES:
                previous = None
                continue
            terms.append(form)
            if tag in _KIWI_NOUN_TAGS:
                if self.compounds and previous is not None and previous[1] == token.word_position:
                    terms.append(previous[0] + form)
                previous = (form, token.word_position)
            else:
                previous = None
        return terms


def make_tokenizer(name: str) -> Tokenizer:
    """``"char-ngram"`` or ``"kiwi"``."""
    if name == CharNgramTokenizer.name:
        return CharNgramTokenizer()
    if name == KiwiTokenizer.name:
        return KiwiTokenizer()
    raise ValueError(f"unknown retriever {name!r} (expected 'hybrid', 'kiwi' or 'char-ngram')")
