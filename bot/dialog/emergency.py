"""Emergency and distress recogniser: the first rule the dialog policy checks, with no model call.

The grammar lives in ``bot/data/emergency.toml`` (its header describes the format): per kind, regex
patterns SEARCHED in the normalized utterance (an emergency can come mid-sentence), split into
``sure`` (say the number now) and ``unsure`` (ask one clarifying question), plus NEGATIVE CONTEXT:
spans blanked out before searching, because a complaint line reuses the same words (불 as a light,
불법, "더워 죽겠어요", last year's fire, "119 전화번호").

Beside it, when their files sit next to ``emergency.toml`` (issue 44, bot/dialog/emergency_grammar.py):
a GRAMMAR over lemmas (``emergency_grammar.toml``: a symptom with a body part, a substance with a
swallowing verb ...), which escalates like a regex hit; and the QUESTION CUES (danger cues per kind
over the same lemmas, ``emergency_cues.toml``, bot/dialog/emergency_cues.py), which only ever
ask the kind's clarifying question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from loguru import logger

from bot.core.datafile import DataFile, Keys
from bot.dialog.emergency_cues import CUES_PATH, QuestionCues
from bot.dialog.emergency_grammar import GRAMMAR_PATH, Grammar, GrammarError, GrammarRule, analyse, respace
from bot.dialog.emergency_learned import LEARNED_PATH, LearnedNet, LearnedNetError
from bot.dialog.patterns import compile_pattern, load_macros
from bot.dialog.shortcuts import normalize

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "data" / "emergency.toml"

# What a blanked span becomes: not a word character, so no pattern matches across it.
_BLANK = "#"
_NUMBER_RE = re.compile(r"\d{3,4}")
_TABLES = {"macros", "context", "answer", "kind"}
_ANSWER_KEYS = {"yes", "no"}
_CONTEXT_KEYS = {"negative", "hedge", "aside", "taken_back"}
_ABSENT = object()
_KIND_KEYS = {"number", "sentences", "question", "ends_call", "sure", "unsure", "negative", "stay", "will_call",
              "closing"}


class EmergencyDataError(ValueError):
    """An emergency data file (or evaluation table) that cannot be used; the message names the key."""


@dataclass(frozen=True)
class EmergencyKind:
    name: str  # "fire", "medical", "crime", "missing_child", "gas", "rescue", "suicide"
    number: str  # "119", "112", "109"
    sentences: tuple[str, ...]  # what the bot says; the first names the number
    question: str  # asked instead when the verdict is unsure
    ends_call: bool = False  # the line never hangs up on an emergency by itself
    # A crisis the line stays in (suicide): until the caller says they will call (``will_call``,
    # then ``closing``), a goodbye gets ``stay`` instead of the end of the call.
    stay: tuple[str, ...] = ()
    closing: tuple[str, ...] = ()
    will_call: tuple[re.Pattern[str], ...] = ()

    def will_call_now(self, text: str) -> bool:
        """The caller says they will call the number (searched in the normalized turn)."""
        said = normalize(text)
        return any(r.search(said) for r in self.will_call)


@dataclass(frozen=True)
class Verdict:
    kind: EmergencyKind
    sure: bool  # False: ask kind.question instead of escalating
    rule: str  # what matched, e.g. "fire.sure[0]", "grammar:medical.stroke", "like:crime" (never the caller's words)


@dataclass(frozen=True)
class _Grammar:
    kind: EmergencyKind
    sure: tuple[tuple[str, re.Pattern[str]], ...]
    unsure: tuple[tuple[str, re.Pattern[str]], ...]
    negative: tuple[re.Pattern[str], ...]


def _blank(text: str, negatives: tuple[re.Pattern[str], ...]) -> str:
    for regex in negatives:
        text = regex.sub(_BLANK, text)
    return text


def _first(patterns: tuple[tuple[str, re.Pattern[str]], ...], text: str) -> str | None:
    return next((rule for rule, regex in patterns if regex.search(text)), None)


@dataclass(eq=False)  # compared and hashed as one object, as before
class EmergencyRules:
    """The compiled nets; ``classify`` is pure (regex about 0.1 ms a turn, the grammar's Kiwi analysis
    about 1 ms: ``scripts/eval_emergency.py --summary`` prints it)."""

    grammars: list[_Grammar]
    negative: tuple[re.Pattern[str], ...]
    hedge: tuple[re.Pattern[str], ...]
    yes: tuple[re.Pattern[str], ...] = ()
    no: tuple[re.Pattern[str], ...] = ()
    lemmas: Grammar | None = None
    question_cues: QuestionCues | None = None
    aside: tuple[re.Pattern[str], ...] = ()
    learned: LearnedNet | None = None
    taken_back: tuple[re.Pattern[str], ...] = ()
    kinds: dict[str, EmergencyKind] = field(init=False)

    def __post_init__(self) -> None:
        self.kinds = {g.kind.name: g.kind for g in self.grammars}

    def classify(self, text: str) -> Verdict | None:
        """The emergency in one caller turn, or None (then the other rules and the model go on).

        The regex kinds are tried in file order, then the lemma grammar: a sure hit of either beats
        an unsure one. A hedge ("같기도", "인지 모르겠") anywhere makes a sure hit unsure: the caller
        is asked first. With no hit, a turn with the danger cues of a kind (the question cues) is asked too.
        A regex hit of one kind and a grammar rule marked ``overrides`` of another: the grammar's kind
        (it read who and what: a child who swallowed pills is poisoned, not suicidal). A sure grammar
        rule of another kind that the learned net also reads as the likelier kind wins too (two nets to one).
        A sure regex hit that the grammar reads as no event now (``Grammar.against``: past, hypothetical,
        ended, on a screen, a figure of speech) is asked, not escalated, unless another hit of its kind stands.
        Before a topic change ([context].aside: "그건 그렇고", "그거 말고") the turn was an aside: only
        what follows it is read. A turn written one syllable at a time is read spaced as words.
        A long turn no hand-written net reads that the learned net is nearly certain of
        (``LearnedNet.escalates``) escalates; a hedged one is asked.
        A sure verdict of the hand-written nets that the learned net reads as an ordinary turn
        (``LearnedNet.doubts``) is asked instead, unless the danger is told after a turn of the talk
        ("주차 문의인데요 근데 지금 ...": the request's words outweigh the danger's in that net).
        """
        text, norm, hedged = self._read(text)
        verdict = self._verdict(text, norm, hedged)
        if verdict is None or not verdict.sure or self.learned is None or verdict.rule.endswith(("+learned", "+alone")):
            return verdict
        said = self.standard(text)
        if self.learned.doubts(said) and not self._told_after_a_turn(said, verdict.kind.name):
            return Verdict(verdict.kind, False, f"{verdict.rule}-doubted")
        return verdict

    def _told_after_a_turn(self, said: str, kind: str) -> bool:
        """The hand-written nets read ``kind`` in what follows the turn's last turn of the talk
        (``QuestionCues.after_turn``); not where the danger came before it ("열경기를 했었는데요 지금은
        괜찮아요 근데 유치원 서류에 ...")."""
        after = self.question_cues.after_turn(said) if self.question_cues is not None else None
        again = self._verdict(*self._read(after), net=False) if after else None
        return again is not None and again.kind.name == kind

    def _verdict(self, text: str, norm: str, hedged: bool, net: bool = True) -> Verdict | None:
        """``classify`` of a turn ``_read`` read, before the learned net's doubt (``net=False``: nor its
        question or second opinion)."""
        learned = self.learned if net else None
        if not norm.strip(_BLANK):
            return None
        unsure: Verdict | None = None
        for g in self.grammars:
            own = _blank(norm, g.negative)
            if rule := _first(g.sure, own):
                if self.lemmas is not None and (hit := self.lemmas.classify(text, overriding=True)) is not None \
                        and hit.sure and hit.kind != g.kind.name:
                    return Verdict(self.kinds[hit.kind], not hedged, f"grammar:{hit.name}")
                if (hit := self._second_kind(text, g.kind.name, learned)) is not None:
                    return Verdict(self.kinds[hit.kind], not hedged, f"grammar:{hit.name}/two-nets")
                if hedged or (why := self._vetoed(g, own, text)) is None:  # a hedge asks already
                    return Verdict(g.kind, not hedged, rule)
                if unsure is None:  # no event now, as the grammar reads it: the kind's question at most
                    unsure = Verdict(g.kind, False, f"{rule}-{why}")
                continue
            if unsure is None and (rule := _first(g.unsure, own)):
                unsure = Verdict(g.kind, False, rule)
        if self.lemmas is not None and (hit := self.lemmas.classify(text)) is not None:
            if hit.sure or unsure is None:
                return Verdict(self.kinds[hit.kind], hit.sure and not hedged, f"grammar:{hit.name}")
        said = self.standard(text)
        if unsure is None and self.question_cues is not None and (kind := self.question_cues.classify(said)):
            unsure = Verdict(self.kinds[kind], False, f"like:{kind}")
        if unsure is None and learned is not None and (kind := learned.classify(said)):
            if not hedged and learned.escalates(said, kind):  # nearly certain where no other net reads a thing
                return Verdict(self.kinds[kind], True, f"learned:{kind}+alone")
            unsure = Verdict(self.kinds[kind], False, f"learned:{kind}")
        elif unsure is not None and net and self._confirmed(unsure, said, hedged):
            return Verdict(unsure.kind, True, f"{unsure.rule}+learned")
        return unsure

    def _second_kind(self, text: str, kind: str, learned: LearnedNet | None) -> GrammarRule | None:
        """A sure grammar rule of another kind than a sure regex hit's ``kind``, which the learned net
        reads as the likelier one: two nets against one ("불러도 대답이 없어요" is a symptom, but of a
        child who is gone). None where the nets do not say so, and for a kind whose danger is a thought
        (suicide): a fistful of pills taken is the crisis line's unless a rule marked ``overrides`` read who
        took them (a toddler)."""
        if learned is None or self.lemmas is None or kind in self.lemmas.thoughts:
            return None
        hit = self.lemmas.classify(text, besides=kind)
        if hit is None or not hit.sure:
            return None
        likeliest = learned.likeliest(self.standard(text))
        return hit if likeliest is not None and likeliest[0] == hit.kind else None

    def _read(self, text: str) -> tuple[str, str, bool]:
        """The turn as ``classify`` reads it: after the aside, respaced for the grammar; that text
        normalized with the negatives blanked out (what the regex nets and the hedges search); and whether
        it is hedged: a hedge in it, or a report taken back ([context].taken_back, searched before the
        negatives blank the harmless end that says so)."""
        text = self.after_aside(text)
        if self.lemmas is not None:
            text = respace(text)
        plain = normalize(text)
        norm = _blank(plain, self.negative)
        hedged = any(h.search(norm) for h in self.hedge) or any(t.search(plain) for t in self.taken_back)
        return text, norm, hedged

    def hedged(self, text: str) -> bool:
        """A hedge in the turn ("같기도", "인지 모르겠") or a report taken back: every verdict of ``classify``
        is then a question."""
        return self._read(text)[2]

    def _vetoed(self, g: _Grammar, own: str, text: str) -> str | None:
        """Why every sure hit of ``g`` in the turn is no event now, as the grammar reads it (a past or
        hypothetical event, a story on a screen, a figure of speech); None when one of them stands."""
        if self.lemmas is None:
            return None
        why = None
        for _, regex in g.sure:
            for m in regex.finditer(own):
                if (why := self.lemmas.against(text, m.group(), thought=g.kind.name in self.lemmas.thoughts)) is None:
                    return None
        return why

    def _confirmed(self, unsure: Verdict, said: str, hedged: bool) -> bool:
        """A question of the grammar or the cues that the learned net reads as the same kind: two nets
        that share no rule agree, so the caller hears the number now. The regex net's own questions stay
        questions: they are written for turns too vague to act on ("타는 냄새가 나요")."""
        if hedged or self.learned is None or not unsure.rule.startswith(("grammar:", "like:")):
            return False
        if unsure.rule.startswith("like:") and self.question_cues is not None \
                and self.question_cues.doubted(said, unsure.kind.name):
            return False  # the cue net asked despite a story or a figure of speech it read
        return self.learned.confirms(said, unsure.kind.name)

    def standard(self, text: str) -> str:
        """The turn as the lemma nets read it: dialect endings rewritten (``classify`` cuts the aside first)."""
        return self.lemmas.standard(text) if self.lemmas is not None else text

    def after_aside(self, text: str) -> str:
        """What follows the last topic change in the turn (all of it when there is none)."""
        for regex in self.aside:
            for m in regex.finditer(text):
                if m.end() < len(text):
                    text = text[m.end():]
        return text

    def affirms(self, text: str) -> bool:
        """A yes to a kind's question ([answer]): the raw turn opens with a yes and holds no no."""
        said = text.strip()
        return any(r.match(said) for r in self.yes) and not any(r.search(said) for r in self.no)

    @classmethod
    def load(cls, path: str | Path = DEFAULT_PATH, grammar: str | Path | None = None,
             cues: str | Path | None = None, nets: bool = True, learned_net: bool = True) -> EmergencyRules:
        """Read and compile ``emergency.toml``, and the grammar and question-cue files beside it (or given).

        With ``nets=False`` the regex net alone (the recogniser before issue 44, for comparison); with
        ``learned_net=False`` every net but the learned one (what its trainer reads beside it).

        Raises:
            EmergencyDataError: a missing file, invalid TOML, a missing or unknown key, or a pattern
                that does not compile (the message names the file, the key and the pattern).
        """
        source = DataFile.read(path, EmergencyDataError, "emergency file")
        source.no_unknown((), _TABLES)
        macros = load_macros(source)
        source.table(("context",), default={})
        source.no_unknown(("context",), _CONTEXT_KEYS)
        negative = _compile(source, ("context", "negative"), macros)
        hedge = _compile(source, ("context", "hedge"), macros)
        aside = _compile(source, ("context", "aside"), macros)
        taken_back = _compile(source, ("context", "taken_back"), macros)
        source.table(("answer",), default={})
        source.no_unknown(("answer",), _ANSWER_KEYS)
        yes = _compile(source, ("answer", "yes"), macros)
        no = _compile(source, ("answer", "no"), macros)
        kinds = source.table(("kind",))
        if not kinds:
            raise source.error(("kind",), "missing")
        grammars = [_kind(source, name, macros) for name in kinds]
        names = {g.kind.name for g in grammars}
        beside = Path(path).parent
        lemmas = question_cues = learned = None
        try:
            if nets and (grammar or (beside / GRAMMAR_PATH.name).is_file()):
                lemmas = Grammar.load(grammar or beside / GRAMMAR_PATH.name, names)
                analyse("불이 났어요")  # build Kiwi now, not on a caller's first turn
            if nets and (cues or (beside / CUES_PATH.name).is_file()):
                question_cues = QuestionCues.load(cues or beside / CUES_PATH.name, names)
            if nets and learned_net and (beside / LEARNED_PATH.name).is_file():
                learned = LearnedNet.load(beside / LEARNED_PATH.name, names)
        except (GrammarError, LearnedNetError) as e:
            raise EmergencyDataError(str(e)) from e
        logger.debug("loaded {} emergency kinds from {} ({} grammar rules, {} question cues)", len(grammars),
                     source.path.name, len(lemmas.rules) if lemmas else 0,
                     len(question_cues.cues) if question_cues else 0)
        return cls(grammars, negative, hedge, yes, no, lemmas, question_cues, aside, learned, taken_back)


# --- loading -----------------------------------------------------------------------------------


def _compile(source: DataFile, key: Keys, macros: dict[str, str], required: bool = False) -> tuple[re.Pattern[str], ...]:
    """The regexes of one pattern list; errors name ``key[i]`` and the pattern."""
    raw = source.value(key, list, "a list of regex strings", default=_ABSENT if required else [],
                       ok=lambda v: all(isinstance(p, str) and p for p in v))
    if raw is _ABSENT or (required and raw == []):
        raise source.error(key, "missing")
    return tuple(compile_pattern(source, (*key, i), pattern, macros) for i, pattern in enumerate(raw))


def _kind(source: DataFile, name: str, macros: dict[str, str]) -> _Grammar:
    key = ("kind", name)
    source.table(key)
    source.no_unknown(key, _KIND_KEYS)
    number = source.value((*key, "number"), str, "a string of 3-4 digits", ok=_NUMBER_RE.fullmatch)
    sentences = source.value((*key, "sentences"), list, "a non-empty list of sentences",
                             ok=lambda v: bool(v) and all(isinstance(s, str) and s.strip() for s in v))
    if number not in sentences[0]:
        # The number is what the caller must hear first; a reply that buries it is a data bug.
        raise source.error((*key, "sentences"), f"the first sentence must name {number}")
    question = source.text_value((*key, "question"))
    ends_call = source.value((*key, "ends_call"), bool, "true or false", default=False)

    def texts(field: str) -> tuple[str, ...]:
        value = source.value((*key, field), list, "a list of sentences", default=[],
                             ok=lambda v: all(isinstance(s, str) and s.strip() for s in v))
        return tuple(s.strip() for s in value)

    stay, closing = texts("stay"), texts("closing")
    will_call = _compile(source, (*key, "will_call"), macros)
    if bool(stay) != bool(will_call) or bool(closing) != bool(will_call):
        raise source.error(key, "stay, will_call and closing go together (a crisis the line stays in)")
    kind = EmergencyKind(name, number, tuple(s.strip() for s in sentences), question.strip(), ends_call,
                         stay, closing, will_call)

    def rules(level: str, required: bool = False) -> tuple[tuple[str, re.Pattern[str]], ...]:
        regexes = _compile(source, (*key, level), macros, required)
        return tuple((f"{name}.{level}[{i}]", r) for i, r in enumerate(regexes))

    negative = _compile(source, (*key, "negative"), macros)
    return _Grammar(kind, rules("sure", True), rules("unsure"), negative)
