"""Regex shortcuts: whole-utterance dialogue acts answered without the LLM.

The rules live in ``bot/data/shortcuts.toml``; each is a list of regexes FULL-matched against
the normalized utterance (``normalize``), so a shortcut fires only when the caller's whole turn
is that act (a greeting, a goodbye, "say that again", "get me an agent"). Anything else, and
every yes/no acknowledgement, goes to the model.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bot.datafile import read_toml

if TYPE_CHECKING:  # pragma: no cover
    from bot.dialog.domain import Domain

Flow = Literal["continue", "end"]
Action = Literal["none", "repeat", "transfer"]
FLOWS: tuple[str, ...] = ("continue", "end")
ACTIONS: tuple[str, ...] = ("none", "repeat", "transfer")


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

_MACRO_RE = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class _Rule:
    shortcut: Shortcut
    regex: re.Pattern[str]
    requires_question: bool


class ShortcutMatcher:
    """First-match-wins list of compiled rules."""

    def __init__(self, rules: list[_Rule]):
        self._rules = rules

    @property
    def shortcuts(self) -> list[Shortcut]:
        return [r.shortcut for r in self._rules]

    def match(self, utterance: str) -> Shortcut | None:
        """The shortcut for a whole utterance, or None (then the LLM answers)."""
        norm = normalize(utterance)
        if not norm:
            return None
        question = "?" in utterance or "？" in utterance
        for rule in self._rules:
            if rule.requires_question and not question:
                continue
            if rule.regex.fullmatch(norm):
                return rule.shortcut
        return None


def _expand(pattern: str, macros: dict[str, str], where: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in macros:
            raise ShortcutError(f"{where}: unknown macro ${{{m.group(1)}}}")
        return f"(?:{macros[m.group(1)]})"

    return _MACRO_RE.sub(sub, pattern)


def load_shortcuts(path: str | Path, domain: "Domain | None" = None) -> ShortcutMatcher:
    """Read and compile ``shortcuts.toml``; with ``domain``, rule intents/categories must exist in it.

    Raises:
        ShortcutError: a missing file, invalid TOML, a bad rule or a regex that does not compile.
    """
    path = Path(path)
    raw = read_toml(path, ShortcutError, "shortcuts file")
    unknown = sorted(set(raw) - {"macros", "rules"})
    if unknown:
        raise ShortcutError(f"{path}: unknown table {unknown[0]!r}")
    macros = raw.get("macros", {})
    if not isinstance(macros, dict) or not all(isinstance(v, str) for v in macros.values()):
        raise ShortcutError(f"{path}: [macros] must map names to regex strings")
    rules_raw = raw.get("rules", [])
    if not isinstance(rules_raw, list):
        raise ShortcutError(f"{path}: [[rules]] must be an array of tables")
    allowed = {"name", "reply", "intent", "flow", "action", "patterns", "category", "requires_question"}
    names: set[str] = set()
    rules: list[_Rule] = []
    for i, item in enumerate(rules_raw):
        where = f"{path}: rules[{i}]"
        if not isinstance(item, dict):
            raise ShortcutError(f"{where}: expected a table")
        bad = sorted(set(item) - allowed)
        if bad:
            raise ShortcutError(f"{where}: unknown key {bad[0]!r}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ShortcutError(f"{where}: name must be a non-empty string")
        where = f"{path}: rule {name!r}"
        if name in names:
            raise ShortcutError(f"{where}: duplicate name")
        names.add(name)
        for key in ("reply", "intent"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise ShortcutError(f"{where}: {key} must be a non-empty string")
        flow = item.get("flow", "continue")
        action = item.get("action", "none")
        category = item.get("category", "none")
        requires_question = item.get("requires_question", False)
        if flow not in FLOWS:
            raise ShortcutError(f"{where}: flow {flow!r} is not one of {list(FLOWS)}")
        if action not in ACTIONS:
            raise ShortcutError(f"{where}: action {action!r} is not one of {list(ACTIONS)}")
        if not isinstance(category, str):
            raise ShortcutError(f"{where}: category must be a string")
        if not isinstance(requires_question, bool):
            raise ShortcutError(f"{where}: requires_question must be true or false")
        if domain is not None:
            if item["intent"] not in domain.intent_names:
                raise ShortcutError(f"{where}: intent {item['intent']!r} is not in the domain")
            if category not in domain.category_names:
                raise ShortcutError(f"{where}: category {category!r} is not in the domain")
        patterns = item.get("patterns")
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p for p in patterns):
            raise ShortcutError(f"{where}: patterns must be a non-empty list of strings")
        expanded = []
        for p in patterns:
            if re.search(r"\s", p):
                raise ShortcutError(f"{where}: pattern {p!r} has whitespace (the normalized form has none)")
            expanded.append(f"(?:{_expand(p, macros, where)})")
        try:
            regex = re.compile("|".join(expanded))
        except re.error as e:
            raise ShortcutError(f"{where}: bad regex: {e}") from e
        shortcut = Shortcut(name, item["reply"].strip(), item["intent"], flow, action, category)
        rules.append(_Rule(shortcut, regex, requires_question))
    return ShortcutMatcher(rules)
