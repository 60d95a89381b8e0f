"""The languages a line answers in besides Korean: each one folder, bot/languages/<code>/.

A pack holds everything the bot says without the model in that language (canned replies, intake
texts, texts by SMS: the folder's language.toml), its shortcut rules (shortcuts.toml), the keypad
menu line and the instruction that asks the model for replies in that language; its code (the
normalizer, digits, the calendar's phrases) is the folder's ``LANGUAGE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot import DATA_DIR, languages
from bot.core.datafile import DataFile
from bot.dialog.domain import Domain
from bot.dialog.intake import Intake
from bot.dialog.shortcuts import ShortcutMatcher, load_shortcuts
from bot.dialog.state import CannedReplies

SMS_KEYS = ("ticket", "status")
LANGUAGE_KEYS = ("name", "menu", "switched", "instruction", "recording_notice", "ai_notice", "tag")


class LanguageError(ValueError):
    """A language of line.languages cannot be used (the message names it and the file)."""


UNSERVED = DATA_DIR / "unserved.toml"


def unserved_notice(line_languages: list[str], path: Path = UNSERVED) -> tuple[str, ...]:
    """What a caller heard in a language the line does not serve is told once: one sentence per
    language of the file, in its order (Korean, then English; each but the line's first ``tagged``, so
    the TTS reads it in its own language), each naming the line's languages in its own words
    (``bot/data/unserved.toml``; the names are each language's ``names``)."""
    source = DataFile.read(path, LanguageError, "unserved-language file")
    number = source.value(("number",), str, "a phone number of digits", ok=str.isdigit)  # where to call: data
    said = []
    for code in [k for k in source.data if k != "number"]:
        template, lang = source.text_value((code,)), languages.get(code)
        listed = lang.list_names([languages.get(served).names[code] for served in line_languages])
        # Digit by digit, said as one number: "일삼사오", "one three four five".
        text = template.format(languages=listed, number=lang.say_number(number))
        said.append(text if code == languages.FIRST else languages.tagged(text, code))
    return tuple(said)


@dataclass(frozen=True)
class LanguagePack:
    code: str
    name: str
    menu: str
    switched: str
    instruction: str
    recording_notice: str
    ai_notice: str  # said right after a switch to this language: an AI answers (issue 47)
    tag: str  # the TTS language tag
    canned: CannedReplies
    intake: Intake
    shortcuts: ShortcutMatcher
    sms: dict[str, str]


def load_language(code: str, domain: Domain, folder: Path | None = None) -> LanguagePack:
    """A language's pack from its folder (``folder``: another copy of its data files, for tests)."""
    try:
        lang = languages.get(code)
    except languages.UnknownLanguage as e:
        raise LanguageError(f"line.languages: {code!r}: {e}") from None
    folder = folder or lang.folder
    path, rules = folder / "language.toml", folder / "shortcuts.toml"
    if not path.is_file() or not rules.is_file():
        raise LanguageError(f"line.languages: {code!r} has no replies ({path.name} and {rules.name} in {folder})")
    source = DataFile.read(path, LanguageError, "language file")
    for k in LANGUAGE_KEYS:
        source.value(("language", k), str, "a text")
    head = source.data["language"]
    canned = CannedReplies.from_source(source, ("replies",))
    intake = Intake.from_source(source, domain, ("intake",), read_number=lang.read_digits)
    sms = {k: source.value(("sms", k), str, "a text") for k in SMS_KEYS}  # a ticket's texts (bot/aftercall/notify.py)
    return LanguagePack(code=code, canned=canned, intake=intake, shortcuts=load_shortcuts(rules, domain), sms=sms,
                        **{k: head[k] for k in LANGUAGE_KEYS})
