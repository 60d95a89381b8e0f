"""The languages a line answers in besides Korean: one data file each (bot/data/lang/<code>.toml).

A pack holds everything the bot says without the model in that language (canned replies, intake
texts, texts by SMS), its shortcut rules (bot/data/shortcuts.<code>.toml), the keypad menu line and
the instruction that asks the model for replies in that language.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.datafile import DataFile
from bot.dialog.domain import Domain
from bot.dialog.intake import Intake
from bot.dialog.shortcuts import ShortcutMatcher, load_shortcuts
from bot.dialog.state import CannedReplies
from bot.english.normalize import read_digits_en

DATA = Path(__file__).resolve().parent.parent / "data"
SMS_KEYS = ("ticket", "status")
LANGUAGE_KEYS = ("name", "menu", "switched", "instruction", "recording_notice", "tag")
# How each language reads a reception number (Korean's is the intake's default).
_DIGIT_READERS: dict[str, Callable[[str], str]] = {"en": read_digits_en}


class LanguageError(ValueError):
    """A language of line.languages cannot be used (the message names it and the file)."""


@dataclass(frozen=True)
class LanguagePack:
    code: str
    name: str
    menu: str
    switched: str
    instruction: str
    recording_notice: str
    tag: str  # the TTS language tag
    canned: CannedReplies
    intake: Intake
    shortcuts: ShortcutMatcher
    sms: dict[str, str]


def load_language(code: str, domain: Domain, data_dir: Path = DATA) -> LanguagePack:
    path = data_dir / "lang" / f"{code}.toml"
    rules = data_dir / f"shortcuts.{code}.toml"
    if not path.is_file() or not rules.is_file():
        raise LanguageError(f"line.languages: {code!r} has no replies ({path.name} and {rules.name} "
                            f"in {data_dir}/lang and {data_dir})")
    source = DataFile.read(path, LanguageError, "language file")
    for k in LANGUAGE_KEYS:
        source.value(("language", k), str, "a text")
    head = source.data["language"]
    canned = CannedReplies.from_source(source, ("replies",))
    if code not in _DIGIT_READERS:
        raise LanguageError(f"line.languages: {code!r} has no way to read reception numbers aloud yet")
    intake = Intake.from_source(source, domain, ("intake",), read_number=_DIGIT_READERS[code])
    sms = {k: source.value(("sms", k), str, "a text") for k in SMS_KEYS}  # a ticket's texts (bot/notify.py)
    return LanguagePack(code=code, canned=canned, intake=intake, shortcuts=load_shortcuts(rules, domain), sms=sms,
                        **{k: head[k] for k in LANGUAGE_KEYS})
