"""What a language of the line must give: one small protocol, filled by each folder's ``LANGUAGE``.

Everything language-specific that is code lives behind it: how the TTS text is normalized, how a
reception number is read digit by digit, the calendar's spoken hours and openings, the holiday
names, Twilio's ``<Say>`` voice and the TTS tag. The words the bot says (replies, intake texts, SMS,
shortcut rules) are the folder's data files, ``language.toml`` and ``shortcuts.toml``.
"""

from __future__ import annotations

import datetime as dt
import inspect
import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar


class Language(ABC):
    """One language; subclasses fill the class attributes and the small hooks below.

    A pack gives its words as the class statement's keywords (``class English(Language, code="en",
    spans="from {start} to {end}", ...)``) and its code as the hooks; the phrases' shapes live here.
    """

    code: ClassVar[str]  # ISO 639-1, as Whisper and line.languages write it
    name: ClassVar[str]  # its own name ("Tiếng Việt"), for logs
    label: ClassVar[str]  # the desk's short label ("VI")
    names: ClassVar[dict[str, str]]  # its name in Korean and in English (the desk; the 1345 notice)
    tag: ClassVar[str | None]  # Supertonic's language tag; None: the voice cannot speak it
    say_voice: ClassVar[str]  # Twilio <Say language=...> for an answering machine
    holiday_locale: ClassVar[str | None] = None  # the `holidays` package's language for KR, if it has one
    closed_day: ClassVar[str]  # the name of an extra closed day
    now: ClassVar[str]  # "지금", "now": the desk opens at once
    always: ClassVar[str]  # hours of a line that never closes
    holiday_names: ClassVar[dict[str, str]] = {}  # English KR holiday name -> this language's (no locale)
    # The calendar's phrases: {start}/{end} of a span; a pause's (lunch, other break) around {span};
    # an opening (today, tomorrow, another day) with {time} and {date}; a shift's {days} and {span}.
    spans: ClassVar[str]
    pauses: ClassVar[tuple[str, str]]
    openings: ClassVar[tuple[str, str, str]]
    shifts: ClassVar[str] = "{days} {span}"
    joiner: ClassVar[str] = ", "  # between the hours' parts

    def __init_subclass__(cls, **words: Any) -> None:
        """The pack's words given as the class statement's keywords become its class attributes."""
        super().__init_subclass__()
        for key, value in words.items():
            if key not in Language.__annotations__:
                raise TypeError(f"{cls.__name__}: {key!r} is no attribute of a Language")
            setattr(cls, key, value)

    @property
    def folder(self) -> Path:
        """Where its data files live (the package folder)."""
        return Path(inspect.getfile(type(self))).resolve().parent

    # --- what the TTS reads ---------------------------------------------------------------------

    @abstractmethod
    def normalize(self, text: str) -> str:
        """Text as the TTS should read it (numbers, times, dates, money, phone numbers)."""

    @abstractmethod
    def read_digits(self, number: str) -> str:
        """A reception or phone number read digit by digit, with pauses."""

    def say_number(self, number: str) -> str:
        """A number read digit by digit but said as one ("one three four five")."""
        return self.read_digits(number).replace(", ", " ")

    def list_names(self, names: list[str]) -> str:
        """Names in a row, as a sentence lists them."""
        return ", ".join(names)

    def digit_words(self) -> dict[str, str]:
        """A digit said as a word -> the digit ("공" -> "0"): runs of them are masked in logs like numerals."""
        return {}

    def spoken_digits(self, text: str) -> str | None:
        """The digits of an utterance that is only a number (a reception number said), else None."""
        rest = re.sub(r"[\s,.\-?!~]", "", text)
        return rest if rest.isdigit() else None

    # --- the calendar's phrases -----------------------------------------------------------------

    @abstractmethod
    def time(self, hour: int, minute: int = 0) -> str:
        """A clock time as said ("오전 9시", "9 AM")."""

    @abstractmethod
    def date(self, day: dt.date) -> str:
        """A date with its weekday ("9월 28일 월요일", "Monday, September 28")."""

    @abstractmethod
    def weekdays(self, days: tuple[int, ...]) -> str:
        """A group of weekdays (0 = Monday): "평일", "on weekdays", or the days named."""

    def span(self, start: str, end: str) -> str:
        """From one spoken time to another ("오전 9시부터 오후 6시까지")."""
        return self.spans.format(start=start, end=end)

    def shift(self, days: str, span: str) -> str:
        """Days and their span ("평일 오전 9시부터 …")."""
        return self.shifts.format(days=days, span=span)

    def pause(self, span: str, lunch: bool) -> str:
        """A break in the day ("점심시간 낮 12시부터 오후 1시까지")."""
        return self.pauses[0 if lunch else 1].format(span=span)

    def opening(self, time: str, days_ahead: int, day: dt.date) -> str:
        """When the desk opens next: today at ``time``, tomorrow, or on ``day``."""
        phrase = self.openings[days_ahead] if days_ahead in (0, 1) else self.openings[2]
        return phrase.format(time=time, date=self.date(day))

    def join(self, parts: list[str]) -> str:
        """The hours' parts in one phrase."""
        return self.joiner.join(parts)

    def holiday(self, english_name: str) -> str:
        """A KR holiday's name in this language, where the `holidays` package has no locale for it."""
        return self.holiday_names.get(english_name, english_name)
