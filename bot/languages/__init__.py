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


def known() -> list[str]:
    """Every language with a folder here."""
    return sorted(p.name for p in HOME.iterdir() if (p / "__init__.py").is_file())


@cache
def get(code: str) -> Language:
    """The language of a code ("ko", "en", "vi", "ru")."""
    if not code.isalpha() or not (HOME / code / "__init__.py").is_file():
        raise UnknownLanguage(f"no language folder bot/languages/{code}/ (known: {', '.join(known())})")
    return importlib.import_module(f"{__name__}.{code}").LANGUAGE


__all__ = ["HOME", "TTS_LANGUAGES", "Language", "UnknownLanguage", "get", "known", "tagged", "untag"]
