"""The languages a line speaks: one folder each, ``bot/languages/<code>/``.

A folder holds ``__init__.py`` with ``LANGUAGE`` (a ``bot.languages.base.Language``: normalizer,
digit reading, calendar phrases, TTS tag, Twilio voice), ``language.toml`` (every fixed sentence
in that language) and ``shortcuts.toml`` (its shortcut rules). Korean is the line's first language
and its words live in ``bot/data/``; its folder holds only the code. Adding a language is one folder
and its code in ``line.languages`` (docs/languages.md); folders outside the checkout (a city's own
language, without a fork) are found through ``line.language_dirs`` (``add_home``).
"""

from __future__ import annotations

import importlib
import sys
from functools import cache
from pathlib import Path

from bot.languages.base import Language

HOME = Path(__file__).resolve().parent
# The line's first language (config: line.languages[0]): where a call starts, and what a record
# without a language was said in.
FIRST = "ko"
# What the line's voice can speak: Supertonic 3's language tags (its SDK's SUPPORTED_LANGUAGES, 1.3.1;
# `na` is its fallback for unknown text, not a language). No Chinese: a line cannot list "zh".
TTS_LANGUAGES = frozenset(
    "en ko ja ar bg cs da de el es et fi fr hi hr hu id it lt lv nl pl pt ro ru sk sl sv tr uk vi".split())


class UnknownLanguage(ValueError):
    """No folder for that language code."""


def tagged(text: str, code: str) -> str:
    """A sentence said in ``code`` whatever the call's language (``<en>…</en>``: the TTS reads the tag)."""
    return f"<{code}>{text}</{code}>"


def untag(text: str) -> tuple[str | None, str]:
    """(the sentence's own language or None, its text) of a sentence that may be ``tagged``."""
    if len(text) > 9 and text[0] == "<" and text[3] == ">" and text.endswith(f"</{text[1:3]}>"):
        return text[1:3], text[4:-5]
    return None, text


def homes() -> list[Path]:
    """Where language folders are looked for: this package first, then each ``add_home``."""
    return [Path(p).resolve() for p in __path__]


def _codes(home: Path) -> set[str]:
    return {p.name for p in home.iterdir() if p.name.isalpha() and (p / "__init__.py").is_file()}


def add_home(folder: Path) -> None:
    """Look for languages in ``folder`` too (its ``<code>/`` folders become ``bot.languages.<code>``:
    Python's package path does the finding). A code already served by another home is refused, so a
    folder never silently replaces a language."""
    folder = folder.resolve()
    if folder in homes():
        return
    if not folder.is_dir():
        raise UnknownLanguage(f"{folder} is not a folder")
    for home in homes():
        if clash := sorted(_codes(folder) & _codes(home)):
            raise UnknownLanguage(f"{folder}/{clash[0]}/ would replace {home}/{clash[0]}/: one home per language")
    __path__.append(str(folder))


def remove_home(folder: Path) -> None:
    """Forget a home added by ``add_home`` and the languages loaded from it (tests, reloads)."""
    folder = folder.resolve()
    if folder == HOME or str(folder) not in __path__:
        return
    for code in _codes(folder):
        for name in [m for m in sys.modules if m == f"{__name__}.{code}" or m.startswith(f"{__name__}.{code}.")]:
            del sys.modules[name]
    __path__.remove(str(folder))
    get.cache_clear()


def known() -> list[str]:
    """Every language with a folder in a home."""
    return sorted(set().union(*(_codes(home) for home in homes())))


@cache
def get(code: str) -> Language:
    """The language of a code ("ko", "en", "vi", "ru", or one in an added home)."""
    if not code.isalpha() or code not in known():
        extra = "".join(f" nor {home}/{code}/" for home in homes()[1:])  # line.language_dirs
        raise UnknownLanguage(f"no language folder bot/languages/{code}/{extra} (known: {', '.join(known())})")
    return importlib.import_module(f"{__name__}.{code}").LANGUAGE


__all__ = ["FIRST", "HOME", "TTS_LANGUAGES", "Language", "UnknownLanguage", "add_home", "get", "homes", "known", "remove_home",
           "tagged", "untag"]
