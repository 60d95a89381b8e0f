"""The languages a line speaks: one folder each, ``bot/languages/<code>/``.

A folder holds ``__init__.py`` with ``LANGUAGE`` (a ``bot.languages.base.Language``: normalizer,
digit reading, calendar phrases, TTS tag, Twilio voice), ``language.toml`` (every fixed sentence
in that language) and ``shortcuts.toml`` (its shortcut rules). Korean is the line's first language
and its words live in ``bot/data/``; its folder holds only the code. Adding a language is one folder
and its code in ``line.languages`` (docs/languages.md).
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from bot.languages.base import Language

HOME = Path(__file__).resolve().parent


class UnknownLanguage(ValueError):
    """No folder for that language code."""


def known() -> list[str]:
    """Every language with a folder here."""
    return sorted(p.name for p in HOME.iterdir() if (p / "__init__.py").is_file())


@cache
def get(code: str) -> Language:
    """The language of a code ("ko", "en", "vi", "ru")."""
    if not code.isalpha() or not (HOME / code / "__init__.py").is_file():
        raise UnknownLanguage(f"no language folder bot/languages/{code}/ (known: {', '.join(known())})")
    return importlib.import_module(f"{__name__}.{code}").LANGUAGE


__all__ = ["HOME", "Language", "UnknownLanguage", "get", "known"]
