"""Abusive callers: insults, sexual harassment and threats to the staff, as rules in ``bot/data/abuse.toml``.

The Civil Petitions Act's enforcement decree (amended 2024-10-29) lets a public line warn an abusive
caller and then end the call. The dialog policy asks ``AbuseRules.classify`` after the emergency rules
(a threat to hurt someone is an emergency, never abuse): the first hit of a call is answered with a
calm warning, the second with a closing sentence and the end of the call (``end_reason = "abusive"``).

The grammar is the emergency rules' (``bot/dialog/patterns.py``): patterns SEARCHED in the normalized
turn, after blanking out negative context, so near misses (욕실, 시발점, "더워 죽겠어요", an angry
complaint with no insult in it) are ordinary turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bot import DATA_DIR
from bot.core.datafile import DataFile, Keys
from bot.dialog.patterns import compile_pattern, load_macros
from bot.dialog.shortcuts import normalize

DEFAULT_PATH = DATA_DIR / "abuse.toml"

_BLANK = "#"  # not a word character: no pattern matches across a blanked span
_TABLES = {"macros", "context", "family"}
_FAMILY_KEYS = {"patterns", "negative"}


class AbuseDataError(ValueError):
    """An abuse rules file that cannot be used; the message names the file, the line and the key."""


@dataclass(frozen=True)
class AbuseVerdict:
    family: str  # "insult", "sexual", "threat_staff"
    rule: str  # the pattern that matched, e.g. "insult.patterns[3]" (logs and records; never the caller's words)


@dataclass(frozen=True)
class _Family:
    name: str
    patterns: tuple[re.Pattern[str], ...]
    negative: tuple[re.Pattern[str], ...]


def _blank(text: str, negatives: tuple[re.Pattern[str], ...]) -> str:
    for regex in negatives:
        text = regex.sub(_BLANK, text)
    return text


class AbuseRules:
    """The compiled rules; ``classify`` is pure."""

    def __init__(self, families: list[_Family], negative: tuple[re.Pattern[str], ...]):
        self._families = families
        self._negative = negative
        self.families = tuple(f.name for f in families)

    def classify(self, text: str) -> AbuseVerdict | None:
        """The abuse in one caller turn, or None. Families are tried in file order."""
        norm = _blank(normalize(text), self._negative)
        if not norm.strip(_BLANK):
            return None
        for family in self._families:
            own = _blank(norm, family.negative)
            for i, regex in enumerate(family.patterns):
                if regex.search(own):
                    return AbuseVerdict(family.name, f"{family.name}.patterns[{i}]")
        return None

    @classmethod
    def load(cls, path: str | Path = DEFAULT_PATH) -> AbuseRules:
        """Read and compile ``abuse.toml``.

        Raises:
            AbuseDataError: a missing file, invalid TOML, a missing or unknown key, or a pattern that
                does not compile (the message names the file, the line, the key and the pattern).
        """
        source = DataFile.read(path, AbuseDataError, "abuse rules file")
        source.no_unknown((), _TABLES)
        macros = load_macros(source)
        source.table(("context",), default={})
        source.no_unknown(("context",), {"negative"})
        negative = _compile(source, ("context", "negative"), macros)
        names = source.table(("family",))
        if not names:
            raise source.error(("family",), "missing")
        families = []
        for name in names:
            key = ("family", name)
            source.table(key)
            source.no_unknown(key, _FAMILY_KEYS)
            patterns = _compile(source, (*key, "patterns"), macros)
            if not patterns:
                raise source.error((*key, "patterns"), "missing")
            families.append(_Family(name, patterns, _compile(source, (*key, "negative"), macros)))
        return cls(families, negative)


def _compile(source: DataFile, key: Keys, macros: dict[str, str]) -> tuple[re.Pattern[str], ...]:
    raw = source.value(key, list, "a list of regex strings", default=[],
                       ok=lambda v: all(isinstance(p, str) and p for p in v))
    return tuple(compile_pattern(source, (*key, i), pattern, macros) for i, pattern in enumerate(raw))
