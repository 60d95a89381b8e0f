"""Regex shortcuts: whole-utterance dialogue acts answered without the LLM.

The rules live in ``bot/data/shortcuts.toml``; each is a list of regexes FULL-matched against
the normalized utterance (``normalize``), so a shortcut fires only when the caller's whole turn
is that act (a greeting, a goodbye, "say that again", "get me an agent"). Anything else goes to
the model, and so does a bare yes/no, except while the dialog awaits one (``context="confirmation"``).
The acts are written as grammar: macros (verb forms, request endings, adverbs) that patterns and
other macros compose.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from loguru import logger

from bot.core.datafile import DataFile
from bot.dialog.patterns import compile_pattern, load_macros

if TYPE_CHECKING:  # pragma: no cover
    from bot.dialog.domain import Domain

Flow = Literal["continue", "end"]
Action = Literal["none", "repeat", "transfer", "confirm_yes", "confirm_no"]
FLOWS: tuple[str, ...] = ("continue", "end")
ACTIONS: tuple[str, ...] = ("none", "repeat", "transfer", "confirm_yes", "confirm_no")
# Dialog states a rule may be limited to; the dialog passes the current one to ``match``.
CONTEXTS: tuple[str, ...] = ("confirmation",)
# The dialog supplies the words for these actions, so their rules may leave ``reply`` empty.
SILENT_ACTIONS: tuple[str, ...] = ("confirm_yes", "confirm_no")
_RULE_KEYS = ("name", "reply", "intent", "flow", "action", "patterns", "category", "requires_question",
              "rejects_question", "context")


class ShortcutError(ValueError):
    """A shortcuts file that cannot be used; the message names the rule."""


@dataclass(frozen=True)
class Shortcut:
    name: str
    reply: str
    intent: str
    flow: Flow
    action: Action
    category: str = "none"


# --- normalization ----------------------------------------------------------------------------

_PUNCT_RE = re.compile(r"[^\w\s]|_")
_YES_RE = re.compile(r"^(?:네|예|넵|넹|네에|예에|네엡)+$")
_FILLERS = frozenset({"아", "어", "음", "으음", "흠", "엄", "저", "저기", "그", "에", "아아"})


def normalize(utterance: str) -> str:
    """The form patterns match: NFKC, lowercase, no punctuation, 예→네, no fillers, no repeats, no spaces."""
    text = unicodedata.normalize("NFKC", utterance).lower()
    words = _PUNCT_RE.sub(" ", text).split()
    out: list[str] = []
    for word in words:
        if _YES_RE.match(word):
            word = "네"
        elif word in _FILLERS:
            continue
        if out and out[-1] == word:
            continue
        out.append(word)
    return "".join(out)


# --- matcher ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    shortcut: Shortcut
    regex: re.Pattern[str]
    requires_question: bool
    rejects_question: bool = False
    context: str | None = None


class ShortcutMatcher:
    """First-match-wins list of compiled rules; rules of the current context are tried first."""

    def __init__(self, rules: list[_Rule]):
        self._rules = rules

    @property
    def shortcuts(self) -> list[Shortcut]:
        """Every rule's shortcut, context rules included (their reply may be empty)."""
        return [r.shortcut for r in self._rules]

    def match(self, utterance: str, context: str | None = None) -> Shortcut | None:
        """The shortcut for a whole utterance, or None (then the LLM answers).

        Args:
            utterance: The caller's whole turn as transcribed.
            context: The dialog state ("confirmation" while a read-back awaits yes/no). Rules
                declaring that context are tried before the rest ("아니요" is then a plain no,
                not part of a goodbye); rules of another context never match.
        """
        norm = normalize(utterance)
        if not norm:
            return None
        question = "?" in utterance or "？" in utterance
        ordered = [r for r in self._rules if context is not None and r.context == context]
        ordered += [r for r in self._rules if r.context is None]
        for rule in ordered:
            if (rule.requires_question and not question) or (rule.rejects_question and question):
                continue
            if rule.regex.fullmatch(norm):
                return rule.shortcut
        return None


def load_shortcuts(path: str | Path, domain: Domain | None = None) -> ShortcutMatcher:
    """Read and compile ``shortcuts.toml``; with ``domain``, rule intents/categories must exist in it.

    Raises:
        ShortcutError: a missing file, invalid TOML, a bad rule or a regex that does not compile.
    """
    source = DataFile.read(path, ShortcutError, "shortcuts file")
    source.no_unknown((), ("macros", "rules"))
    macros = load_macros(source)
    names: set[str] = set()
    rules: list[_Rule] = []
    for i in range(len(source.tables(("rules",), default=[], nonempty=False))):
        key = ("rules", i)
        source.no_unknown(key, _RULE_KEYS)
        name = source.text_value((*key, "name"))
        if name in names:
            raise source.error((*key, "name"), f"duplicate name {name!r}")
        names.add(name)
        intent = source.text_value((*key, "intent"))
        action = source.value((*key, "action"), str, f"one of {list(ACTIONS)}", default="none",
                              ok=lambda v: v in ACTIONS)
        reply = source.value((*key, "reply"), str, "a non-empty string",
                             ok=None if action in SILENT_ACTIONS else lambda v: bool(v.strip()))
        flow = source.value((*key, "flow"), str, f"one of {list(FLOWS)}", default="continue", ok=lambda v: v in FLOWS)
        context = source.value((*key, "context"), str, f"one of {list(CONTEXTS)}", default=None,
                               ok=lambda v: v in CONTEXTS)
        category = source.value((*key, "category"), str, "a string", default="none")
        requires_question, rejects_question = (source.value((*key, flag), bool, "true or false", default=False)
                                               for flag in ("requires_question", "rejects_question"))
        if domain is not None:
            if intent not in domain.intent_names:
                raise source.error((*key, "intent"), f"intent {intent!r} is not in the domain")
            if category not in domain.category_names:
                raise source.error((*key, "category"), f"category {category!r} is not in the domain")
        patterns = source.value((*key, "patterns"), list, "a non-empty list of strings",
                                ok=lambda v: bool(v) and all(isinstance(p, str) and p for p in v))
        grouped = [compile_pattern(source, (*key, "patterns", j), p, macros, group=True).pattern
                   for j, p in enumerate(patterns)]
        regex = re.compile("|".join(grouped))
        shortcut = Shortcut(name, reply.strip(), intent, flow, action, category)
        rules.append(_Rule(shortcut, regex, requires_question, rejects_question, context))
    logger.debug("loaded {} shortcut rules from {}", len(rules), source.path.name)
    return ShortcutMatcher(rules)
