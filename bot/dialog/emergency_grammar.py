"""The emergency recogniser's second net (issue 44): a grammar over lemmas.

The GRAMMAR (``bot/data/emergency_grammar.toml``, its header describes the format) reads one turn
through Kiwi's morphological analysis (``kiwipiepy``), so a rule names what is said, not how: a body
part with a symptom (말이 어눌 + 팔을 못 들어), a substance with a swallowing verb (락스 + 마시), a
weapon with an act, a person with a state. Particles, endings, spacing and the STT's run-together
text fall away; negation (안 쉬어요, 쉬지 못해요), the past perfect (났었던) and the hypothetical
(넘어지면, 넘어질까 봐, 넘어졌을 때) are read from the endings. Every concept of a rule must be said
within ``window`` content words of each other, anywhere in the turn, with no ``unless`` word near.

The third net, the question cues, is in ``bot/dialog/emergency_cues.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import itertools
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loguru import logger

from bot import ROOT_DIR
from bot.core import kiwi
from bot.core.datafile import DataFile
from bot.core.kiwi import load_kiwi

DATA = Path(__file__).resolve().parent.parent / "data"
GRAMMAR_PATH = DATA / "emergency_grammar.toml"

# Tags that carry no content here: particles, endings, punctuation, the copula.
_SKIP_TAG = re.compile(r"^(?:J|E|S[FPSEOW]$|VCP|VCN)")
_VERBAL = re.compile(r"^(?:VV|VA|VX|XR|XSV|XSA|NNG)")  # what a negation or an ending can attach to
_NEGATORS = {"안", "못"}
_NEG_AUX = {"않", "못하"}
_PAST_PERFECT = {"었었", "았었", "였었"}
# 면: if; ᆯ까: lest; 듯: as if; 어도/더라도: even if
_IRREALIS_EC = {"면", "으면", "다면", "ᆯ까", "을까", "ᆯ지", "을지", "려면", "으려면", "듯", "듯이", "어도", "아도", "여도",
                "더라도", "라도", "어야", "아야", "여야"}  # 잘라야 해요: a need, not an event
_IRREALIS_NOUN = {"때", "경우", "만큼", "정도", "뻔", "적", "듯", "듯이"}
# 만약에 ... 쉬면: every word of the clause up to its 면 is the hypothetical (쓰러져서 숨을 안 쉬면), not only the last.
_IF = {"만약", "만일", "가령"}
_IF_END = re.compile(r"(?:면|거든)$")
_FEELING = {"떨리", "미치", "웃기", "졸리", "배고프", "목마르"}  # X어 죽겠다 (adjectives: any)
_FINE = {"괜찮", "멀쩡", "멀쩡하"}  # 괜찮았는데, 멀쩡하더니: how it was before
_PERCEIVE = {"보이", "보", "들리", "느껴지"}  # 졸리는 게 보여요: seen or heard now
_NONE_WHO = {"사람", "사람들", "분", "데"}  # 다친 사람은 없어요: the clause's verb is no one's
_LIKENESS = {"기분", "느낌"}  # X은 기분이에요: a feeling likened to an event
_STARTLED = {"놀라", "식겁", "철렁", "걱정"}
_CAUSE_EC = {"서", "어서", "아서", "여서", "니까", "으니까"}
_OUTCOME = {"지", "이기"}  # a game lost or won
_KEPT_PARTICLES = {"마다", "처럼", "밖에"}  # kept as words: 밤마다 (a habit), 유서처럼 (a likeness), 애기밖에 (only)
_ITEM_SPEC = re.compile(r"^([!?+]?)([^\s*!?+/]+)(\*?)(?:/([A-Z]+))?$")
# 려고, ᆯ래, ᆯ게, ᆯ라고: what the speaker means to do (죽을래요, 먹을라고, 끝낼게요); its 요 aside.
_WILL_ENDING = {"려고", "으려고", "려구", "으려구", "려", "으려", "ᆯ래", "을래", "ᆯ게", "을게", "ᆯ께", "을께", "ᆯ라고", "을라고",
                "ᆯ려고", "을려고", "ᆯ라", "을라", "ᆯ란다", "을란다", "ᆯ련다", "을련다", "ᆯ라구", "을라구",
                "ᆫ대", "는대", "ᆫ다고", "는다고", "ᆫ다며", "는다며", "ᆫ다", "는다",  # 뛰어내린대요, 죽는다: says they will
                "러", "으러"}  # 죽으러 간다고: goes to do it


@dataclass(frozen=True)
class Morph:
    """One content morpheme of a turn, with what its endings say about it."""

    form: str
    tag: str
    negated: bool = False  # 안 X, 못 X, X지 않, X지 못하
    unreal: bool = False  # past perfect (났었, 났던, 난 적, 난 뒤), hypothetical (나면, 날 때, 날까 봐), hyperbole (X 죽겠)
    during: bool = False  # what was being done when it happened (뉴스 보다가, 훈련 중에): no topic that holds a rule back
    will: bool = False  # what the speaker means to do: 죽을래요, 먹을라고, 끝낼게요, 뛰어내릴 거예요, 죽겠다
    live: bool = False  # a screen that carries what happens now (게임 보이스챗): set by Grammar.read, no story
    # Where its word stands in the analysed text (characters, end excluded): a regex hit is located by it.
    start: int = field(default=-1, compare=False)
    end: int = field(default=-1, compare=False)
    # A state that ended (잃으셨다가 모셔다 주셨어요): a regex hit's veto and a `freed` rule read it (a strangling that
    # ended, 졸랐다가 놨어요, still escalates by the grammar: he is still there).
    ended: bool = field(default=False, compare=False)


def _by_mistake(tokens: Sequence, k: int) -> bool:
    """잘못 (by mistake) written as one word, which Kiwi splits into 잘 + 못: not a negation."""
    return (tokens[k].form == "못" and k > 0 and tokens[k - 1].form == "잘"
            and tokens[k - 1].start + tokens[k - 1].len == tokens[k].start)


def _after_ji(tokens: Sequence, k: int) -> bool:
    """못 하 after 지, or after 지 and a particle (걷질 못해요, 쉬지를 못해요, 일어나지도 못해요): a negation."""
    return tokens[k - 1].form == "지" or (k >= 2 and tokens[k - 1].tag.startswith("J") and tokens[k - 2].form == "지")


_SYLLABLE = re.compile(r"[가-힣]")
_SPACED_SYLLABLES = 6  # a turn read out one syllable at a time: at least this many lone syllables ...
_SPACED_SHARE = 0.6  # ... making at least this share of its words
_ASKED = {"냐", "냐고", "니", "으냐", "으냐고", "냐며", "냐면서"}  # X고 싶냐(고): a question put to someone
_FILLERS = {"어", "아", "음", "으", "그", "저", "에", "응", "뭐"}  # 어 그 저 구급함: hesitation, not spelling


def respace(text: str) -> str:
    """A turn the STT wrote one syllable at a time (가 슴 이 아 파 요: a caller who speaks slowly or
    with difficulty) spaced as words (가슴이 아파요); any other turn as it is. Every net reads words:
    Kiwi reads 슴 as a noun and the regex net drops 아 and 어 as fillers."""
    words = text.split()
    lone = sum(1 for w in words if len(w) == 1 and _SYLLABLE.fullmatch(w) and w not in _FILLERS)
    if lone < _SPACED_SYLLABLES or lone < _SPACED_SHARE * len(words):
        return text
    return str(load_kiwi().space(re.sub(r"(?<=[가-힣]) +(?=[가-힣])", "", text), reset_whitespace=True))


def analyse(text: str) -> list[Morph]:
    """Content morphemes of ``text`` (Kiwi), negators folded into the word they negate."""
    return list(_analysed(text))


@dataclass
class _Reading:
    """What a content word's endings say, while its complex is read (``Morph``'s fields, and two more)."""

    negated: bool = False
    unreal: bool = False
    during: bool = False
    will: bool = False
    before: bool = False  # a past act talked about (신고했던 건): the cause told with it happened before too
    ended: bool = False


@functools.lru_cache(maxsize=64)
def kiwi_tokens(text: str) -> tuple:
    """One Kiwi tokenization per turn text: the grammar, the question cues and the learned net read it."""
    return tuple(load_kiwi().tokenize(text))


@functools.lru_cache(maxsize=64)
def _analysed(text: str) -> tuple[Morph, ...]:
    """One Kiwi analysis per turn text: the grammar and the question cues read the same turn."""
    tokens = kiwi_tokens(text)
    out: list[Morph] = []
    at: list[tuple[int, int]] = []  # each morpheme's place, beside ``out`` (which rewrites its items' readings)
    over: set[int] = set()  # the morphemes read as a state that ended
    iffy = False  # inside a clause that 만약 opened, until its 면
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i]
        if t.form in _KEPT_PARTICLES and t.tag.startswith("J"):
            out.append(Morph(t.form, t.tag))
            at.append((t.start, t.start + t.len))
            i += 1
            continue
        if _SKIP_TAG.match(t.tag) or (t.tag == "MAG" and t.form in _NEGATORS and i + 1 < n
                                      and _VERBAL.match(tokens[i + 1].tag) and not _by_mistake(tokens, i)):
            i += 1
            continue
        r = _Reading(negated=i > 0 and tokens[i - 1].tag == "MAG" and tokens[i - 1].form in _NEGATORS
                     and not _by_mistake(tokens, i - 1))
        if (t.form == "죽" and t.tag.startswith("V") and i >= 2 and tokens[i - 1].tag == "EC"
                and tokens[i - 1].form in {"어", "아", "여"}
                and (tokens[i - 2].tag.startswith("VA") or tokens[i - 2].tag == "XSA" or tokens[i - 2].form in _FEELING)):
            r.unreal = True  # 떨려 죽겠대요, 심심해 죽겠어: a feeling's hyperbole (Kiwi reads this 죽 as a verb)
            if out and out[-1].tag.startswith("V"):
                out[-1] = Morph(out[-1].form, out[-1].tag, out[-1].negated, True)
        if t.form == "중" and t.tag == "NNB" and out:  # 훈련 중에
            out[-1] = Morph(out[-1].form, out[-1].tag, out[-1].negated, out[-1].unreal, True)
        j = _read_complex(tokens, i, r)
        if iffy:  # until its 면, or the sentence's end
            r.unreal = True
            iffy = not any(u.tag == "EF" or u.tag == "EC" and _IF_END.search(u.form) for u in tokens[i + 1:j])
        # 만약에, 만약 ...; not 만약을 대비해 (just in case) nor 만약의 경우
        iffy = iffy or (t.form in _IF and t.tag.startswith("N")
                        and not (i + 1 < n and tokens[i + 1].form in {"을", "를", "의"}))
        _carry_back(out, tokens, i, r)
        out.append(Morph(t.form, t.tag, r.negated, r.unreal, r.during, r.will))
        at.append((t.start, t.start + t.len))
        if r.ended:
            over.add(len(out) - 1)
        for k in range(i + 1, j):  # auxiliaries inside the complex share its reading
            u = tokens[k]
            if u.tag == "VX" and u.form not in _NEG_AUX and u.form != "죽":
                out.append(Morph(u.form, u.tag, r.negated, r.unreal, False, r.will))
                at.append((u.start, u.start + u.len))
        i = j
    return tuple(dataclasses.replace(m, start=a, end=b, ended=m.ended or k in over)
                 for k, (m, (a, b)) in enumerate(zip(out, at, strict=True)))


def _none_who(tokens: Sequence, k: int) -> bool:
    """``tokens[k:]`` say there is none of whom a relative clause is said: 사람은 없, 분도 없, 데 없."""
    if k >= len(tokens) or tokens[k].form not in _NONE_WHO:
        return False
    k += 1 + (k + 1 < len(tokens) and tokens[k + 1].tag in {"JX", "JKS"})
    return k < len(tokens) and tokens[k].form == "없" and tokens[k].tag == "VA"


def _read_complex(tokens: Sequence, i: int, r: _Reading) -> int:
    """Read the endings, auxiliaries and a trailing 못 하 / 않 of the content word ``tokens[i]`` into
    ``r``, up to the next content word; returns that word's index."""
    t, n = tokens[i], len(tokens)
    j = i + 1
    while j < n:
        u = tokens[j]
        if u.form in _KEPT_PARTICLES and u.tag.startswith("J"):
            break
        if u.tag == "VX" and u.form in _NEG_AUX or (u.tag == "MAG" and u.form in _NEGATORS and j + 1 < n
                                                      and tokens[j + 1].form == "하" and _after_ji(tokens, j)):
            r.negated = True
            j += 2 if u.tag == "MAG" else 1
            continue
        if u.tag in {"EC", "EF"} and u.form.removesuffix("요") in _WILL_ENDING or u.tag == "EP" and u.form == "겠":
            r.will = True
        elif (u.tag == "ETM" and u.form in {"ᆯ", "을"} and j + 1 < n and tokens[j + 1].form in {"거", "것"}
              and not (j + 2 < n and tokens[j + 2].form in {"같", "처럼"})):
            r.will = True  # 뛰어내릴 거예요 (뛰어내릴 것 같아요, 것처럼: how it looks, not what is meant)
        if u.tag == "VX" and u.form == "죽":
            r.unreal = True  # 더워 죽겠어요
        elif u.tag in {"EC", "EF"} and u.form in _ASKED and tokens[j - 1].form in {"싶", "싫"}:
            r.unreal = True  # 죽고 싶냐고, 살기 싫냐고: a threat put as a question to someone, no wish of the speaker's
        elif u.tag == "EP" and u.form in _PAST_PERFECT or u.tag == "ETM" and u.form == "던":
            r.unreal = True
            # 신고했던 건, 났었는데: a past act talked about (not 지나가던 학생, a passer-by, a relative clause)
            r.before = u.tag == "EP" or j + 1 < n and tokens[j + 1].form in {"거", "것", "일"}
            # 수리하던 아버지가, 리모델링하던 벽이: the work going on when it happened, as 수리하다가
            r.during = u.tag == "ETM" and not r.before
        elif ((t.form in _STARTLED or t.tag == "XSV" and i > 0 and tokens[i - 1].form in _STARTLED) and u.tag == "EP" and u.form in {"었", "았"} and j + 1 < n
              and (tokens[j + 1].form in {"는데", "지만"} or tokens[j + 1].form == "는" and j + 2 < n
                   and tokens[j + 2].form == "데")):
            r.before = True  # 안 들어와서 놀랐는데 (…주무셨더라고요): a fright told as over, its cause with it
        elif u.tag == "ETN" and j + 1 < n and tokens[j + 1].form == "직전":
            r.unreal = True  # 떨어지기 직전이에요: about to, not yet
        elif u.tag == "ETM" and j + 1 < n and tokens[j + 1].form in _LIKENESS:
            r.unreal = True  # 독을 삼킨 기분, 갇혀 사는 느낌: how something feels, not what happened
        elif u.tag == "EC" and u.form in _IRREALIS_EC:
            r.unreal = True
        elif u.tag == "EC" and u.form == "다가" and tokens[j - 1].tag == "EP" and tokens[j - 1].form in {"었", "았", "였"}:
            r.ended = r.during = True  # 잃으셨다가 (찾았어요): a state that ended (졸랐다가 놨어요: the act ended, its danger may not)
        elif u.tag == "EC" and (u.form == "다가" or u.form == "다" and tokens[j - 1].tag in {"VV", "XSV"}
                                and tokens[j - 1].form not in {"있", "없"}
                                and not (j + 1 < n and tokens[j + 1].form in {"하", "카", "그러"})):
            # 다 on a stem: 다가 said short (리모델링하다 천장이 내려앉았어요); not a quote (잘 있다 하드래요)
            r.during = True
        elif (u.tag == "EC" and u.form == "고" and j + 2 < n and tokens[j + 1].form == "있"
              and tokens[j + 1].tag == "VX" and (tokens[j + 2].form in {"는데", "다가", "던"}
                                                 or tokens[j + 2].tag == "EP" and j + 3 < n
                                                 and tokens[j + 3].form in {"는데", "는"})):
            r.during = True  # 드라마 보고 있는데, 보고 있었는데 (불이 났어요): what was going on then, as 보다가
        elif u.tag == "ETM" and u.form in {"는", "ᆫ"} and j + 1 < n and tokens[j + 1].form in {"사이", "동안", "틈"}:
            r.during = True  # 점검하는 사이에, 통화하는 동안 (애가 약을 먹었어요): what was going on meanwhile
        elif u.tag == "EC" and u.form == "더니" and t.tag in {"VV", "XSV"} and t.form in {"하", "보"}:
            r.during = True  # 게임하더니 (경련했어요), 유튜브 보더니: what the person was doing when it began
        elif t.form in _FINE and (u.tag == "EP" or u.tag == "EC" and u.form.endswith("더니")):
            r.unreal = True  # 처음엔 괜찮다더니 지금 헛소리해요: fine before, not now
        elif u.tag == "ETM" and u.form in {"ᆯ", "을", "ㄹ"} and j + 1 < n and tokens[j + 1].form in _IRREALIS_NOUN:
            r.unreal = True
        elif u.tag == "ETM" and u.form in {"ᆯ", "을", "ㄹ"} and j + 1 < n and tokens[j + 1].form == "수":
            # 먹을 수 있는 (can: not happening), 쉴 수가 없어요 (cannot: a negation)
            after = next((w for w in tokens[j + 2:j + 4] if w.tag in {"VA", "VV", "VX"}), None)
            if after is not None and after.form == "있":
                r.unreal = True
            elif after is not None and after.form == "없":
                r.negated = True
        elif u.tag == "ETM" and u.form in {"은", "ᆫ", "는"} and j + 1 < n and tokens[j + 1].form in {"적", "뒤", "후", "이후",
                                                                                            "다음"}:
            r.unreal = True  # 갇힌 적이 있어서, 쓰러지신 뒤로: what happened before, not now
        elif (u.tag == "ETM" and u.form in {"은", "ᆫ", "는"} and j + 2 < n and tokens[j + 1].form in {"것", "거"}
              and tokens[j + 2].tag in {"JX", "JKS"} and tokens[j + 2].form in {"ᆫ", "은", "는", "이", "가"}
              and not (j + 3 < n and tokens[j + 3].form in _PERCEIVE)):
            r.unreal = True  # 떨리는 건 오한인가요, 어눌해지는 게 증상: the thing talked about, not an event
            # (목 졸리고 있는 게 보여요: what the caller sees happen is an event)
        elif u.tag == "ETM" and u.form in {"은", "ᆫ", "는"} and tokens[j - 1].tag != "EP" and _none_who(tokens, j + 1):
            # 갇힌 사람은 없고요, 다친 데는 없어요: nobody (nowhere) it is so; not 돌았는데 없어, where Kiwi cuts
            # the connective 는데 after a past ending as 는 + 데
            r.negated = True
        elif u.tag == "ETM" and j + 2 < n and tokens[j + 1].form == "줄" and tokens[j + 2].form == "알":
            r.unreal = True  # 먹은 줄 알았는데, 갇힌 줄 알고: what was believed, not what happened
        elif (u.tag == "ETM" and u.form in {"ᆯ", "을"} and j + 2 < n and tokens[j + 1].form in {"것", "거"}
              and tokens[j + 2].form == "같이"):
            r.unreal = True  # 불날 것 같이 바빠요: a likeness, not an event
        elif not (_SKIP_TAG.match(u.tag) or u.tag == "VX"):
            break
        j += 1
    return j


def _carry_back(out: list[Morph], tokens: Sequence, i: int, r: _Reading) -> None:
    """What the reading of ``tokens[i]`` says of the words already read before it (``out``), rewritten
    in place; a negated 아무 makes ``r`` unreal."""
    t = tokens[i]
    # A serial verb (굴러 떨어질까 봐, 넘어져 다칠까 봐, 못 하게 되면) shares the reading of the verb it leads into.
    if r.unreal and out and out[-1].tag.startswith("V") and tokens[i - 1].tag == "EC" and tokens[i - 1].form in {"어", "아", "게"}:
        out[-1] = Morph(out[-1].form, out[-1].tag, out[-1].negated, True)
    # 경기를 하면, 신고를 할 때: a light verb's hypothetical is its noun's too.
    if (r.unreal and t.form == "하" and t.tag == "VV" and out and out[-1].tag.startswith("N") and i > 0
            and tokens[i - 1].tag.startswith("J")):
        out[-1] = Morph(out[-1].form, out[-1].tag, out[-1].negated, True, out[-1].during)
    # 어눌해도, 걱정하면: the ending after a derivational 하 says how the root before it is meant.
    if (t.tag in {"XSV", "XSA"} and out and i > 0 and tokens[i - 1].tag in {"XR", "NNG"}
            and tokens[i - 1].start + tokens[i - 1].len == t.start and (r.negated or r.unreal)):
        root = out[-1]
        out[-1] = Morph(root.form, root.tag, root.negated or r.negated, root.unreal or r.unreal)
    if r.negated and out and out[-1].form == "아무" and out[-1].tag == "NP" and t.form != "말리":
        # 아무도 안 와요: nobody came is no one's state (the help's, not a person's gone missing); 아무도 못
        # 말려요 is what goes on unstopped.
        r.unreal = True
    # 냄새 나서 신고했던 건: the cause of what happened before happened before too.
    head = i - 1 if t.tag in {"XSV", "XSA"} and i > 0 and tokens[i - 1].tag in {"XR", "NNG"} else i
    if (r.before and head > 0 and tokens[head - 1].tag == "EC" and tokens[head - 1].form in _CAUSE_EC
            and len(out) >= (2 if head < i else 1) and out[head - i - 1].tag.startswith("V")):
        k = head - i - 1
        out[k] = Morph(out[k].form, out[k].tag, out[k].negated, True, out[k].during, out[k].will)
        # 안 움직이는 것 같아서 놀랐는데 (괜찮았어요): what only seemed so, the fright's cause, with it
        if out[k].form == "같" and len(out) >= 3 - k and out[k - 1].form == "것" and out[k - 2].tag.startswith("V"):
            out[k - 2] = dataclasses.replace(out[k - 2], unreal=True)
    if r.during and out and out[-1].tag.startswith("N"):  # 뉴스 보다가, 연습하다가: the activity's noun too
        out[-1] = Morph(out[-1].form, out[-1].tag, out[-1].negated, out[-1].unreal, True)
    # 게임 지고, 경기 이기고: a game lost or won was being played, no story on a screen (게임 지고 빡친
    # 손님이 커터칼을 들었어요: a regex hit is not read as a scene of the game).
    if t.form in _OUTCOME and t.tag == "VV" and out and out[-1].tag == "NNG" and tokens[i - 1].tag != "JKS":
        out[-1] = Morph(out[-1].form, out[-1].tag, out[-1].negated, out[-1].unreal, True, out[-1].will)


class GrammarError(ValueError):
    """An emergency grammar or question-cue file that cannot be used; the message names the key."""


@dataclass(frozen=True)
class _Spec:
    form: str
    prefix: bool  # "떨*": any form that starts with 떨
    negated: bool | None  # True: "!쉬" (안 쉬어요); None: "?쉬" (either); False: plain (not negated)
    tag: str = ""  # "차/V": only as a verb (kick), not the noun (a car)
    will: bool = False  # "+죽": only as what the speaker means to do (죽을래요, 죽으려고)

    def matches(self, m: Morph) -> bool:
        if not (m.form.startswith(self.form) if self.prefix else m.form == self.form):
            return False
        if self.tag and not m.tag.startswith(self.tag):
            return False
        if self.will and not m.will:
            return False
        return self.negated is None or m.negated == self.negated


Item = tuple[_Spec, ...]


def read_dialect(source: DataFile) -> tuple[tuple[re.Pattern[str], str], ...]:
    """A data file's ``dialect``: [regex, replacement] pairs, applied in order before the analysis."""
    dialect = []
    for i, pair in enumerate(source.value(("dialect",), list, "a list of [regex, replacement] pairs", default=[])):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise source.error(("dialect", i), "expected [regex, replacement]")
        try:
            dialect.append((re.compile(pair[0]), pair[1]))
        except re.error as e:
            raise source.error(("dialect", i), f"bad regex {pair[0]!r}: {e}") from e
    return tuple(dialect)


@dataclass
class Words:
    """Concept lists by name, and WORDs (see the grammar file's header) read into items; equal items
    are one object, so one turn looks each up once. ``source``: the file whose keys errors name."""

    source: DataFile
    concepts: dict[str, list[str]]
    same: dict[Item, Item] = field(default_factory=dict)

    def read_concepts(self) -> None:
        """The source's own [concept] lists (over any of the same name already known)."""
        for name in self.source.table(("concept",), default={}):
            self.concepts[name] = self.source.value(("concept", name), list, "a list of words",
                                                    ok=lambda v: all(isinstance(s, str) and s.strip() for s in v))

    def items(self, key: tuple[str | int, ...], words: list[str], seen: tuple[str, ...] = ()) -> tuple[Item, ...]:
        out: list[Item] = []
        for word in words:
            if word.startswith("@") and " " not in word:
                ref = word[1:]
                if ref not in self.concepts or ref in seen:
                    raise self.source.error(key, f"concept {ref!r} is not defined (or refers to itself)")
                out.extend(self.items(("concept", ref), self.concepts[ref], (*seen, ref)))
                continue
            # A part "@name" inside a word stands for each word of that concept: "@limb !들" is a
            # body part with a verb (팔을 못 들어요, 오른팔을 못 들어요, 양손을 못 들어요).
            choices: list[tuple[Item, ...]] = []
            for part in word.split():
                if part.startswith("@"):
                    choices.append(self.items(key, [part], seen))
                    continue
                m = _ITEM_SPEC.match(part)
                if m is None:
                    raise self.source.error(key, f"bad word {word!r}")
                neg = {"!": True, "?": None}.get(m.group(1), False)
                spec = _Spec(m.group(2), bool(m.group(3)), neg, m.group(4) or "", m.group(1) == "+")
                choice: tuple[Item, ...] = ((spec,),)
                if not (spec.prefix or spec.tag) and (split := _split_stem(spec.form)):
                    # Kiwi reads 없어지다 as 없 + 지, 뛰어나오다 as 뛰 + 나오: the word as Kiwi will see it, too.
                    choice += (tuple(_Spec(f, False, neg, tag, spec.will) for f, tag in split),)
                choices.append(choice)
            for parts in itertools.product(*choices):
                specs = tuple(spec for part in parts for spec in part)
                out.append(self.same.setdefault(specs, specs))
        return tuple(out)


def _split_stem(form: str) -> tuple[tuple[str, str], ...]:
    """The two stems (and their tags) Kiwi reads a compound verb as (없어지 -> 없 지, 굴러떨어지 -> 구르 떨어지), or ()."""
    if (known := _STEMS.get(form)) is not None:
        return known
    split: tuple[tuple[str, str], ...] = ()
    if len(form) >= 2 and form[-1] not in "다고게러":
        morphs = analyse(form + "다")
        if (len(morphs) == 2 and all(m.tag.startswith("V") for m in morphs) and morphs[0].form != form
                and (morphs[1].tag.startswith("VX") or len(form) >= 4)):
            split = tuple((m.form, m.tag[:2]) for m in morphs)
    _STEMS[form] = split
    return split


_STEMS: dict[str, tuple[tuple[str, str], ...]] = {}  # _split_stem's answers, this process's and the cache's


class StemCache:
    """``_split_stem``'s answers kept across starts (``cache/emergency_stems.json``).

    Loading the grammar and the cues asks Kiwi about ~2,900 of their words: on 2 CPU cores the dialog
    assets load in 3.1 s with the file, 3.9-4.0 s without (a worker starts in ~9.5 s). The answers
    depend only on Kiwi, its model, this module and ``bot/core/kiwi.py``: the file is keyed by their
    versions and the two files' digest. Another key, a damaged or unwritable file: analysed again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.key = self._key()
        self.read = 0

    @staticmethod
    def _key() -> str:
        versions = []
        for name in ("kiwipiepy", "kiwipiepy_model"):
            try:
                versions.append(f"{name} {importlib.metadata.version(name)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{name} ?")
        code = hashlib.sha256()
        for module in (Path(__file__), Path(kiwi.__file__)):  # how a word is read, and the analyzer's options
            code.update(module.read_bytes())
        return " ".join(versions) + " " + code.hexdigest()[:16]

    def load(self) -> None:
        """Into ``_STEMS``: the file's answers, where its key is this process's."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("key") != self.key:
                return
            stems = {form: tuple((f, t) for f, t in split) for form, split in data["stems"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return
        self.read = len(stems)
        _STEMS.update({k: v for k, v in stems.items() if k not in _STEMS})

    def save(self) -> None:
        """``_STEMS`` to the file (atomically: workers start side by side), when it holds more than was read."""
        stems = dict(_STEMS)  # a copy: a load on another thread may add to it
        if len(stems) <= self.read:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"key": self.key, "stems": stems}, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as e:
            logger.debug("emergency grammar: stems not cached in {} ({})", self.path, e)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


STEMS_PATH = ROOT_DIR / "cache" / "emergency_stems.json"


@contextlib.contextmanager
def kept_stems() -> Iterator[None]:
    """Around a load that reads words (the grammar, the question cues): the kept stems read before, written after."""
    cache = StemCache(STEMS_PATH)
    cache.load()
    yield
    cache.save()


Span = tuple[int, int, bool]  # first and last morpheme index, any of them unreal

_GAP = 2  # content words allowed between two morphemes of one item ("목을 꽉 졸랐어요")


def _index(morphs: list[Morph]) -> dict[str, list[int]]:
    """Where each form stands in the turn (so an item is looked up, not scanned for)."""
    where: dict[str, list[int]] = {}
    for k, m in enumerate(morphs):
        where.setdefault(m.form, []).append(k)
    return where


def _find(item: Item, morphs: list[Morph], where: dict[str, list[int]],
          memo: dict[int, list[Span]] | None = None) -> list[Span]:
    """Where ``item`` is said in the turn; ``memo`` keeps what one turn's rules already looked up (the
    concepts share many items: a chest pain is in the heart's rules and in the question path's). Keyed by
    the item's id: ``Grammar.load`` makes equal items one object."""
    if memo is not None:
        if (hit := memo.get(id(item))) is None:
            hit = memo[id(item)] = _find(item, morphs, where)
        return hit
    spans = []
    first = item[0]
    starts = ([k for form, ks in where.items() if form.startswith(first.form) for k in ks] if first.prefix
              else where.get(first.form, ()))
    for start in starts:
        m = morphs[start]
        if not first.matches(m):
            continue
        at, unreal = start, m.unreal
        for spec in item[1:]:
            nxt = next((k for k in range(at + 1, min(at + 2 + _GAP, len(morphs))) if spec.matches(morphs[k])), None)
            if nxt is None:
                break
            at, unreal = nxt, unreal or morphs[nxt].unreal
        else:
            spans.append((start, at, unreal))
    return spans


@dataclass(frozen=True)
class GrammarRule:
    kind: str
    name: str  # "medical.stroke"
    concepts: tuple[tuple[Item, ...], ...]  # each must be found (any of its items)
    unless: tuple[Item, ...]  # none of these within `reach` of the match
    window: int
    sure: bool
    anywhere: tuple[Item, ...] = ()  # none of these anywhere in the turn
    overrides: bool = False  # its kind wins over a regex hit of another kind
    topical: int = 0  # the first `topical` unless items are [context].unless (topics: the news, a service)
    # Signs of one picture, `least` of them said together (a stroke: speech, face, arm, sight, gait):
    # which two a caller names differs from call to call, so a rule lists them once, not pair by pair.
    some: tuple[tuple[Item, ...], ...] = ()
    least: int = 0
    freed: bool = False  # a state said as ended (갇혔다가 열어 줬어요) is no match: the person is out
    ordered: bool = False  # the `all` concepts said in their listed order (불이 나요, not 소리가 나요 불은 켜져 있고요)
    _index: dict[int, tuple[dict[str, list[Item]], tuple[Item, ...]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Each concept's items by their first form: a turn's few words pick the candidates, so a long
        # concept costs a few lookups, not a scan of every item.
        index = {id(items): _by_first(items) for items in (*self.concepts, *self.some, self.anywhere)}
        object.__setattr__(self, "_index", index)

    def _spans(self, items: tuple[Item, ...], morphs: list[Morph], where: dict[str, list[int]],
               memo: dict[int, list[Span]] | None) -> list[Span]:
        by_first, prefixed = self._index[id(items)]
        if len(where) < len(by_first):
            candidates = [item for form in where if form in by_first for item in by_first[form]]
        else:
            candidates = [item for form, its in by_first.items() if form in where for item in its]
        return [s for item in (*candidates, *prefixed) for s in _find(item, morphs, where, memo)]

    def match(self, morphs: list[Morph], reach: int, where: dict[str, list[int]],
              memo: dict[int, list[Span]] | None = None) -> bool:
        found = []
        for items in self.concepts:
            spans = [s for s in self._spans(items, morphs, where, memo) if not s[2]
                     and not (self.freed and (morphs[s[0]].ended or morphs[s[1]].ended))]
            if not spans:
                return False
            found.append(spans)
        signs = [spans for items in self.some
                 if (spans := [s for s in self._spans(items, morphs, where, memo) if not s[2]])]
        if len(signs) < self.least:
            return False
        if any(not (s[2] or morphs[s[0]].live) for s in self._spans(self.anywhere, morphs, where, memo)):
            return False  # 찾아 주실 수 있나요 is no 찾아 줬어요: only a real one holds it back (nor a live screen)
        # A topic that was only what the person was doing (뉴스 보다가, 훈련 중에) holds nothing back.
        # Nor does a "fine" that was only before (괜찮다더니 지금 ...).
        blocks = [s[0] for n, item in enumerate(self.unless) for s in _find(item, morphs, where, memo)
                  if (n >= self.topical or not (morphs[s[0]].during or morphs[s[1]].during))
                  and not (s[2] and morphs[s[0]].form in _FINE)]
        for chosen in itertools.combinations(signs, self.least):
            for combo in itertools.product(*found, *chosen):
                if len({s[:2] for s in combo[len(found):]}) < self.least:
                    continue  # one phrase is one sign, however many pictures list it
                if self.ordered and any(a[1] >= b[0] for a, b in itertools.pairwise(combo[:len(found)])):
                    continue
                lo, hi = min(s[0] for s in combo), max(s[1] for s in combo)
                if hi - lo <= self.window and not any(lo - reach <= b <= hi + reach for b in blocks):
                    return True
        return False


_PREDICATE = re.compile(r"^(?:V|XSV|XSA)")  # what a hit's reading is read from


def _located(text: str, said: str, morphs: list[Morph]) -> list[int]:
    """The morphemes of ``said`` (a regex hit in the normalized turn: lowercase, no spaces or
    punctuation) in ``text``'s analysis; [] when the hit is not found there."""
    kept = [(k, ch) for k, ch in enumerate(text.lower()) if ch.isalnum()]
    squashed = "".join(ch for _, ch in kept)
    if not said or (c := squashed.find(said)) < 0:
        return []
    a, b = kept[c][0], kept[c + len(said) - 1][0] + 1
    return [k for k, m in enumerate(morphs) if m.start < b and a < m.end]


def _by_first(items: tuple[Item, ...]) -> tuple[dict[str, list[Item]], tuple[Item, ...]]:
    """The items keyed by their first form, and those whose first form is a prefix ("떨*")."""
    by_first: dict[str, list[Item]] = {}
    for item in items:
        if not item[0].prefix:
            by_first.setdefault(item[0].form, []).append(item)
    return by_first, tuple(item for item in items if item[0].prefix)


class Grammar:
    """The rules of ``emergency_grammar.toml``; ``classify`` is one Kiwi analysis and a scan."""

    def __init__(self, rules: list[GrammarRule], reach: int,
                 dialect: tuple[tuple[re.Pattern[str], str], ...] = (),
                 anywhere: tuple[Item, ...] = (), veto: tuple[Item, ...] = (), thoughts: frozenset[str] = frozenset(),
                 then: tuple[Item, ...] = (), now: tuple[Item, ...] = (), live: tuple[Item, ...] = ()):
        # A sure rule marked ``overrides`` is tried first: it read who and what (a weapon used on someone
        # who now bleeds is a crime in progress, not only an injury), so it also wins over the other rules.
        self.rules = sorted(rules, key=lambda r: not (r.sure and r.overrides))
        self.reach = reach
        self.dialect = dialect  # endings Kiwi does not know, rewritten to standard ones first
        self.anywhere = anywhere  # [context].anywhere: a story on a screen
        self.veto = veto  # [context].veto: a figure of speech, a threat of no harm, near a regex hit
        self.thoughts = thoughts  # [context].thoughts: kinds whose danger is a thought (suicide)
        self.then, self.now = then, now  # [context].then: a day gone by; [context].now: what says it is now
        self.live = live  # [context].live: a channel that carries what happens now (보이스챗, 라이브, 영상 통화)

    def against(self, text: str, said: str, thought: bool = False) -> str | None:
        """Why a regex hit is no event now, as the grammar reads the turn; None when it sees nothing
        against it (then the hit escalates). ``said``: the hit, as matched in the normalized turn.

        "unreal": the hit's predicate (its last verb, or for a noun the verb after it) is read as past
        perfect, hypothetical, believed or likened (쓰러지셨던, 중풍으로 쓰러지셨던); "ended": a state that
        ended (잃으셨다가 모셔다 주셨어요);
        "story": a story on a screen in the turn (공포영화), not what the person was doing (영화 보다가);
        "figure": a [context].veto phrase within reach of the hit (분위기가 불타오르네요);
        "past": a [context].then day within reach of a done act, and no [context].now word in the turn.
        ``thought``: a kind whose danger is a thought (뛰어내리면 다 끝날 것 같아요): a hypothetical or a
        wish is its danger, not a reading against it; only a state that ended is."""
        text = self.standard(text)
        morphs = self.read(text)
        if not (hit := _located(text, said, morphs)):
            return None  # the hit's words are not where the analysis can find them: no reading against it
        where = _index(morphs)
        if any(not (morphs[s[0]].during or morphs[s[1]].during or morphs[s[0]].live) for item in self.anywhere
               for s in _find(item, morphs, where)):
            return "story"
        lo, hi = hit[0], hit[-1]
        # The predicate the hit's last word belongs to: that word itself, or the verb after it (불러도 대답이 없어요).
        head = next((k for k in range(hi, min(hi + 2 + _GAP, len(morphs))) if _PREDICATE.match(morphs[k].tag)), None)
        if head is not None and morphs[head].ended:
            return "ended"
        if head is not None and morphs[head].unreal and not thought:
            return "unreal"
        if any(s[1] >= lo - self.reach and s[0] <= hi + self.reach for item in self.veto
               for s in _find(item, morphs, where)):
            return "figure"
        # A done act on a day gone by (누가 깨고 갔어요 어젯밤에요), with nothing said as now; 어젯밤부터 is now.
        if (head is not None and not morphs[head].negated
                and not any(_find(item, morphs, where) for item in self.now)
                and any(s[1] >= lo - self.reach and s[0] <= hi + self.reach
                        and not text[morphs[s[1]].end:].lstrip().startswith("부터")
                        for item in self.then for s in _find(item, morphs, where))):
            return "past"
        return None

    def read(self, text: str) -> list[Morph]:
        """The analysis of a standard ``text``, a screen read as live where a [context].live channel
        follows it (게임 보이스챗, 유튜브 라이브 보는데): what the caller was using, as 게임하다가, while a real
        person on the other end is heard or seen now; no story on it."""
        morphs = analyse(text)
        where = _index(morphs)
        lives = [s[0] for item in self.live for s in _find(item, morphs, where)]
        if not lives:
            return morphs
        for item in self.anywhere:
            for s in _find(item, morphs, where):
                if any(s[0] < at <= s[1] + 2 for at in lives):
                    for k in {s[0], s[1]}:
                        morphs[k] = dataclasses.replace(morphs[k], live=True)
        return morphs

    def standard(self, text: str) -> str:
        """The turn with the [dialect] rewrites applied (먹어부렀어라 -> 먹어버렸어요)."""
        for pattern, replacement in self.dialect:
            text = pattern.sub(replacement, text)
        return text

    def classify(self, text: str, overriding: bool = False, besides: str | None = None) -> GrammarRule | None:
        """The first sure rule that holds, else the first unsure one, else None (``overriding``: among
        the rules marked ``overrides`` only; ``besides``: among the rules of another kind than this)."""
        morphs = self.read(self.standard(text))
        where = _index(morphs)
        memo: dict[int, list[Span]] = {}
        unsure = None
        for rule in self.rules:
            if (overriding and not rule.overrides) or rule.kind == besides:
                continue
            if (rule.sure or unsure is None) and rule.match(morphs, self.reach, where, memo):
                if rule.sure:
                    return rule
                unsure = rule
        return unsure

    @classmethod
    def load(cls, path: str | Path = GRAMMAR_PATH, kinds: set[str] | None = None) -> Grammar:
        """Read ``emergency_grammar.toml``: [concept] lists and [[rule]] tables.

        Raises:
            GrammarError: a missing file, bad TOML, an unknown key or kind, or a concept never defined.
        """
        source = DataFile.read(path, GrammarError, "emergency grammar")
        with kept_stems():
            return cls._from_source(source, kinds)

    @classmethod
    def _from_source(cls, source: DataFile, kinds: set[str] | None) -> Grammar:
        source.no_unknown((), {"concept", "rule", "context", "dialect"})
        dialect = read_dialect(source)
        source.table(("concept",))  # required here
        words = Words(source, {})
        words.read_concepts()
        items = words.items

        source.table(("context",), default={})
        source.no_unknown(("context",), {"unless", "reach", "anywhere", "veto", "thoughts", "then", "now", "freed",
                                         "live"})
        reach = source.value(("context", "reach"), int, "a whole number", default=4)
        common = source.value(("context", "unless"), list, "a list of concept names", default=[])
        anywhere = items(("context", "anywhere"),
                         ["@" + c for c in source.value(("context", "anywhere"), list, "a list of concept names",
                                                        default=[])])
        veto = items(("context", "veto"), ["@" + c for c in source.value(("context", "veto"), list,
                                                                      "a list of concept names", default=[])])
        then, now, out, live = (items(("context", key), ["@" + c for c in source.value(("context", key), list,
                                                                                      "a list of concept names", default=[])])
                                for key in ("then", "now", "freed", "live"))
        thoughts = frozenset(source.value(("context", "thoughts"), list, "a list of kind names", default=[],
                                          ok=lambda v: all(isinstance(k, str) and (kinds is None or k in kinds) for k in v)))
        rules = []
        for i, _ in enumerate(source.tables(("rule",))):
            key: tuple[str | int, ...] = ("rule", i)
            source.no_unknown(key, {"kind", "name", "all", "some", "least", "unless", "window", "sure", "own", "anywhere",
                                    "overrides", "freed", "ordered"})
            kind = source.value((*key, "kind"), str, "a kind name")
            if kinds is not None and kind not in kinds:
                raise source.error((*key, "kind"), f"kind {kind!r} is not a kind of emergency.toml")
            name = source.value((*key, "name"), str, "a name")
            some = source.value((*key, "some"), list, "a list of concept names", default=[],
                                ok=lambda v: all(isinstance(s, str) for s in v))
            least = source.value((*key, "least"), int, "a whole number", default=2 if some else 0)
            if some and not 1 <= least <= len(some):
                raise source.error((*key, "least"), f"must be from 1 to {len(some)} (the length of `some`), not {least}")
            needed = source.value((*key, "all"), list, "a non-empty list of concept names (or `some`)",
                                  default=[], ok=lambda v: all(isinstance(s, str) for s in v))
            if not needed and not some:
                raise source.error((*key, "all"), "a rule needs `all` or `some`")
            unless = source.value((*key, "unless"), list, "a list of concept names", default=[])
            own = source.value((*key, "own"), bool, "true or false", default=False)  # no shared unless
            window = source.value((*key, "window"), int, "a whole number", default=10)
            sure = source.value((*key, "sure"), bool, "true or false", default=True)
            far = source.value((*key, "anywhere"), list, "a list of concept names", default=[])
            overrides = source.value((*key, "overrides"), bool, "true or false", default=False)
            freed = source.value((*key, "freed"), bool, "true or false", default=False)
            ordered = source.value((*key, "ordered"), bool, "true or false", default=False)
            # The topics (a service, the news) come first, the shared ones and a rule's own listing of them
            # alike: what was only being done when it happened (집 수리 중이라) holds neither back.
            topic_names = list(dict.fromkeys([*([] if own else common), *(c for c in unless if c in common)]))
            topics = items((*key, "unless"), ["@" + c for c in topic_names])
            rules.append(GrammarRule(
                kind, f"{kind}.{name}",
                tuple(items((*key, "all"), [c if c.startswith("@") else "@" + c]) for c in needed),
                topics + items((*key, "unless"), ["@" + c for c in unless if c not in common]),
                window, sure, anywhere + (out if freed else ()) + items((*key, "anywhere"), ["@" + c for c in far]),
                overrides, len(topics),
                tuple(items((*key, "some"), [c if c.startswith("@") else "@" + c]) for c in some), least, freed,
                ordered))
        return cls(rules, reach, tuple(dialect), anywhere, veto, thoughts, then, now, live)

