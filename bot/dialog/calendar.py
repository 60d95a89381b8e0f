"""When the line (and each department) is open: weekly hours, breaks, Korea's public holidays, extra closed days.

Holidays come from the `holidays` package's KR calendar (lunar 설날/추석, 대체 휴일, election days), never a
hand-written list. Every verdict is taken in the line's time zone (Asia/Seoul), whatever the server's is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import holidays

from bot import languages
from bot.config import LineConfig

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# The `holidays` package's KR calendar names its holidays in these; another language translates the English.
HOLIDAY_FALLBACK = "en_US"
SEARCH_DAYS = 60  # next_opening gives up after this: a line closed longer is a config mistake

_SPEC = re.compile(r"(?P<days>[a-z]{3}(?:-[a-z]{3})?(?:,[a-z]{3}(?:-[a-z]{3})?)*)\s+(?P<span>\S+)")
_SPAN = re.compile(r"(\d{2}):(\d{2})-(\d{2}):(\d{2})")

Span = tuple[int, int]  # minutes since midnight, [start, end)


class CalendarError(ValueError):
    """A bad hours, breaks, time zone or closed-day spec; the message names the key and the value."""


def _span(text: str, where: str, expected: str) -> Span:
    m = _SPAN.fullmatch(text)
    if not m:
        raise CalendarError(f"{where}: expected {expected!r}")
    h1, m1, h2, m2 = map(int, m.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if m1 > 59 or m2 > 59 or start >= 24 * 60 or end > 24 * 60:
        raise CalendarError(f"{where}: times run from 00:00 to 24:00")
    if start >= end:
        raise CalendarError(f"{where}: it must end after it starts (no spans past midnight)")
    return start, end


def _days(text: str, where: str) -> list[int]:
    out = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        for name in (first, last or first):
            if name not in DAYS:
                raise CalendarError(f"{where}: unknown day {name!r} (use {', '.join(DAYS)})")
        a, b = DAYS.index(first), DAYS.index(last or first)
        out += [(a + i) % 7 for i in range((b - a) % 7 + 1)]  # "sat-mon" wraps over the week's end
    return out


@dataclass(frozen=True)
class Hours:
    """Weekly opening hours: one span (or none) per weekday, Monday first, and breaks on every open day."""

    days: tuple[Span | None, ...]
    breaks: tuple[Span, ...] = ()
    always: bool = False  # "24/7": open every minute, holidays included

    @classmethod
    def parse(cls, specs: Sequence[str], breaks: Sequence[str] = (), *, key: str = "line.hours") -> Hours:
        """``["mon-fri 09:00-18:00", "thu 09:00-20:00", "sat closed"]``: a later spec replaces a day."""
        bkey = key[: -len("hours")] + "breaks" if key.endswith("hours") else f"{key}.breaks"
        specs, breaks = list(specs), list(breaks)
        for k, items in ((key, specs), (bkey, breaks)):
            for i, v in enumerate(items):
                if not isinstance(v, str):
                    raise CalendarError(f"{k}[{i}]: {v!r}: expected a string")
        if not specs:
            raise CalendarError(f"{key}: expected at least one spec like 'mon-fri 09:00-18:00' (or '24/7')")
        if "24/7" in (s.strip() for s in specs):
            if len(specs) > 1:
                raise CalendarError(f"{key}: {specs!r}: '24/7' must be the only spec")
            if breaks:
                raise CalendarError(f"{bkey}: {breaks!r}: a '24/7' line has no breaks (set breaks = [])")
            return cls(days=((0, 24 * 60),) * 7, always=True)
        days: list[Span | None] = [None] * 7
        for i, spec in enumerate(specs):
            where = f"{key}[{i}]: {spec!r}"
            m = _SPEC.fullmatch(spec.strip().lower())
            if not m:
                raise CalendarError(f"{where}: expected 'mon-fri 09:00-18:00'")
            span = None if m["span"] == "closed" else _span(m["span"], where, "mon-fri 09:00-18:00")
            for d in _days(m["days"], where):
                days[d] = span
        spans = tuple(_span(b.strip(), f"{bkey}[{i}]: {b!r}", "12:00-13:00") for i, b in enumerate(breaks))
        return cls(days=tuple(days), breaks=tuple(sorted(spans)))

    def intervals(self, weekday: int) -> list[Span]:
        """The open stretches of a weekday (0 = Monday): its span less the breaks."""
        span = self.days[weekday]
        if span is None:
            return []
        out = [span]
        for b0, b1 in self.breaks:
            out = [piece for s, e in out for piece in ((s, min(e, b0)), (max(s, b1), e)) if piece[0] < piece[1]]
        return out


@dataclass(frozen=True)
class LineStatus:
    """Open or not at a moment; why not ("holiday", "weekend", "after_hours", "before_hours", "break",
    "closed_day"), the day's holiday name (also when open), and when it opens next (None while open)."""

    open: bool
    reason: str | None
    holiday: str | None
    next_open: datetime | None


class LineCalendar:
    """The line's hours and its departments', against Korea's public holidays and extra closed days."""

    def __init__(self, hours: Hours, *, tz: str = "Asia/Seoul", extra_closed: Sequence[str] = (),
                 departments: dict[str, Hours] | None = None, key: str = "line"):
        try:
            self.tz = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise CalendarError(f"{key}.timezone: {tz!r}: unknown time zone (e.g. 'Asia/Seoul')") from None
        self.extra_closed: set[date] = set()
        for i, text in enumerate(extra_closed):
            try:
                self.extra_closed.add(date.fromisoformat(text))
            except (ValueError, TypeError):
                raise CalendarError(f"{key}.extra_closed_days[{i}]: {text!r}: expected an ISO date like '2026-12-31'") from None
        self.hours = hours
        self.departments = dict(departments or {})
        # Korea's holidays named per locale of the package; each fills a year on first lookup.
        self._names: dict[str, holidays.HolidayBase] = {}
        self._kr = self._holidays(HOLIDAY_FALLBACK)  # whether a day is a holiday: any locale says the same

    @classmethod
    def from_config(cls, line: LineConfig) -> LineCalendar:
        """The desk's calendar from ``[line]`` (a bad spec names its key)."""
        return cls(Hours.parse(line.hours, line.breaks, key="line.hours"), tz=line.timezone,
                   extra_closed=line.extra_closed_days, key="line")

    def now(self) -> datetime:
        return datetime.now(self.tz)

    def local(self, at: datetime) -> datetime:
        """``at`` in the line's time zone; a naive datetime is refused (its zone would be a guess)."""
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(f"naive datetime {at.isoformat()}: pass an aware one")
        return at.astimezone(self.tz)

    def _holidays(self, locale: str) -> holidays.HolidayBase:
        if locale not in self._names:
            self._names[locale] = holidays.country_holidays("KR", language=locale)
        return self._names[locale]

    def holiday(self, day: date, language: str = languages.FIRST) -> str | None:
        """The name of a public holiday ("추석", "개천절 대체 휴일"; in English "Chuseok"), "휴무일" for
        an extra closed day; in the language's words (bot/languages/<code>/)."""
        if isinstance(day, datetime):
            day = self.local(day).date()
        lang = languages.get(language)
        if lang.holiday_locale:
            names = self._holidays(lang.holiday_locale).get_list(day)
        else:
            names = [lang.holiday(n) for n in self._holidays(HOLIDAY_FALLBACK).get_list(day)]
        if names:
            return ", ".join(names)  # two holidays on one day: both names
        return lang.closed_day if day in self.extra_closed else None

    def _hours(self, department: str | None) -> Hours:
        if department is None:
            return self.hours
        try:
            return self.departments[department]
        except KeyError:
            raise ValueError(f"unknown department {department!r} (known: {', '.join(self.departments)})") from None

    def is_open(self, at: datetime, department: str | None = None) -> bool:
        return self._closed_reason(self.local(at), self._hours(department)) is None

    def status(self, at: datetime, department: str | None = None) -> LineStatus:
        local, hours = self.local(at), self._hours(department)
        reason = self._closed_reason(local, hours)
        nxt = None if reason is None else self.next_opening(local, department)
        return LineStatus(open=reason is None, reason=reason, holiday=self.holiday(local.date()), next_open=nxt)

    def _closed_reason(self, local: datetime, hours: Hours) -> str | None:
        if hours.always:
            return None
        day = local.date()
        if self._kr.get(day):
            return "holiday"
        if day in self.extra_closed:
            return "closed_day"
        stretches = hours.intervals(day.weekday())
        if not stretches:
            return "weekend"  # any weekday the hours leave out
        minute = local.hour * 60 + local.minute
        if minute < stretches[0][0]:
            return "before_hours"
        if minute >= stretches[-1][1]:
            return "after_hours"
        return None if any(s <= minute < e for s, e in stretches) else "break"

    def next_opening(self, at: datetime, department: str | None = None) -> datetime:
        """The first moment at or after ``at`` when it is open (``at`` itself while open; a break's end counts)."""
        local, hours = self.local(at), self._hours(department)
        if hours.always:
            return local
        for offset in range(SEARCH_DAYS + 1):
            day = local.date() + timedelta(days=offset)
            if self.holiday(day):
                continue
            midnight = datetime.combine(day, time(0), self.tz)
            for start, end in hours.intervals(day.weekday()):
                if midnight + timedelta(minutes=end) > local:
                    return max(local, midnight + timedelta(minutes=start))
        raise ValueError(f"closed for the next {SEARCH_DAYS} days from {local.isoformat()}")

    def closed_days(self, year: int) -> list[tuple[date, str]]:
        """Every weekday (Mon-Fri) of ``year`` closed all day for a holiday or an extra closed day, with its name."""
        if self.hours.always:
            return []
        day, out = date(year, 1, 1), []
        while day.year == year:
            if day.weekday() < 5 and (name := self.holiday(day)):
                out.append((day, name))
            day += timedelta(days=1)
        return out

    def opening_phrase(self, at: datetime, department: str | None = None, language: str = languages.FIRST) -> str:
        """When it opens next, spoken relative to ``at``: "지금", "오후 1시에", "내일 오전 9시에",
        "9월 28일 월요일 오전 9시에"; in English "now", "at 1 PM", "tomorrow at 9 AM",
        "on Monday, September 28, at 9 AM" (the phrases are each language's, bot/languages/)."""
        lang = languages.get(language)
        local = self.local(at)
        nxt = self.next_opening(local, department)
        if nxt == local:
            return lang.now
        return lang.opening(lang.time(nxt.hour, nxt.minute), (nxt.date() - local.date()).days, nxt.date())

    def hours_phrase(self, department: str | None = None, language: str = languages.FIRST) -> str:
        """The weekly hours as spoken Korean: "평일 오전 9시부터 오후 6시까지, 점심시간 낮 12시부터 오후 1시까지";
        in English "on weekdays from 9 AM to 6 PM, with a lunch break from noon to 1 PM"."""
        lang = languages.get(language)
        hours = self._hours(department)
        if hours.always:
            return lang.always
        groups: dict[Span, list[int]] = {}
        for d, span in enumerate(hours.days):
            if span is not None:
                groups.setdefault(span, []).append(d)

        def said(span: Span) -> str:
            (h1, m1), (h2, m2) = divmod(span[0], 60), divmod(span[1], 60)
            return lang.span(lang.time(h1, m1), lang.time(h2, m2))

        parts = [lang.shift(lang.weekdays(tuple(ds)), said(span)) for span, ds in groups.items()]
        # a break across noon is lunch; others are plain breaks
        parts += [lang.pause(said(b), lunch=b[0] < 14 * 60 and b[1] > 11 * 60) for b in hours.breaks]
        return lang.join(parts)


__all__ = ["CalendarError", "Hours", "LineCalendar", "LineStatus"]
