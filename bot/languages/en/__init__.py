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


class English(Language, code="en", name="English", label="EN", names={"ko": "영어", "en": "English"}, tag="en",
              say_voice="en-US", holiday_locale="en_US", closed_day="a closed day", now="now",
              always="around the clock, every day", spans="from {start} to {end}",
              pauses=("with a lunch break {span}", "with a break {span}"),
              openings=("at {time}", "tomorrow at {time}", "on {date}, at {time}")):
    normalize = staticmethod(normalize_english)
    read_digits = staticmethod(read_digits_en)
    time = staticmethod(spoken_time)
    date = staticmethod(spoken_date)

    def list_names(self, names: list[str]) -> str:
        return f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else ", ".join(names)

    def weekdays(self, days: tuple[int, ...]) -> str:
        return _GROUPS.get(days) or "on " + ", ".join(DAYS[d] + "s" for d in days)


LANGUAGE = English()
