"""English."""

from __future__ import annotations

import datetime as dt

from bot.languages.base import Language
from bot.languages.en.normalize import normalize_english, read_digits_en

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_GROUPS = {(0, 1, 2, 3, 4): "on weekdays", (5, 6): "on weekends", tuple(range(7)): "every day"}


def spoken_time(hour: int, minute: int = 0) -> str:
    """"9 AM", "noon", "1:30 PM", "midnight" (no "a.m.": a sentence's period would double it)."""
    hour %= 24
    if minute == 0 and hour in (0, 12):
        return "midnight" if hour == 0 else "noon"
    clock = hour % 12 or 12
    return f"{clock}{f':{minute:02d}' if minute else ''} {'AM' if hour < 12 else 'PM'}"


def spoken_date(day: dt.date) -> str:
    """"Monday, September 28"."""
    return f"{DAYS[day.weekday()]}, {MONTHS[day.month - 1]} {day.day}"


class English(Language):
    code = "en"
    name = "English"
    label = "EN"
    names = {"ko": "영어", "en": "English"}
    tag = "en"
    say_voice = "en-US"
    holiday_locale = "en_US"
    closed_day = "a closed day"
    now = "now"
    always = "around the clock, every day"

    def normalize(self, text: str) -> str:
        return normalize_english(text)

    def read_digits(self, number: str) -> str:
        return read_digits_en(number)

    def list_names(self, names: list[str]) -> str:
        return f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else ", ".join(names)

    def time(self, hour: int, minute: int = 0) -> str:
        return spoken_time(hour, minute)

    def date(self, day: dt.date) -> str:
        return spoken_date(day)

    def weekdays(self, days: tuple[int, ...]) -> str:
        return _GROUPS.get(days) or "on " + ", ".join(DAYS[d] + "s" for d in days)

    def span(self, start: str, end: str) -> str:
        return f"from {start} to {end}"

    def pause(self, span: str, lunch: bool) -> str:
        return f"with a {'lunch ' if lunch else ''}break {span}"

    def opening(self, time: str, days_ahead: int, day: dt.date) -> str:
        when = f"at {time}"
        return when if days_ahead == 0 else f"tomorrow {when}" if days_ahead == 1 else f"on {spoken_date(day)}, {when}"


LANGUAGE = English()
