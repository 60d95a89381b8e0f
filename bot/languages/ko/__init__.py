"""Korean: the line's first language. Its words are the line's own data (bot/data/); its normalizer
is bot/languages/ko/."""

from __future__ import annotations

import datetime as dt

from bot.languages.base import Language
from bot.languages.ko.digits import DIGIT_WORDS, spoken_digits
from bot.languages.ko.normalize import normalize_korean, read_digits

DAYS = ("월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일")
_GROUPS = {(0, 1, 2, 3, 4): "평일", (5, 6): "주말", tuple(range(7)): "매일"}


def spoken_time(hour: int, minute: int = 0) -> str:
    """"오전 9시", "낮 12시", "오후 1시 30분", "밤 12시" (midnight); minutes only when not zero."""
    hour %= 24
    if hour == 0:
        text = "밤 12시"
    elif hour < 12:
        text = f"오전 {hour}시"
    elif hour == 12:
        text = "낮 12시"
    else:
        text = f"오후 {hour - 12}시"
    return f"{text} {minute}분" if minute else text


def spoken_date(day: dt.date) -> str:
    """"9월 28일 월요일"."""
    return f"{day.month}월 {day.day}일 {DAYS[day.weekday()]}"


class Korean(Language):
    code = "ko"
    name = "한국어"
    label = "KO"
    names = {"ko": "한국어", "en": "Korean"}
    tag = "ko"
    say_voice = "ko-KR"
    holiday_locale = "ko"
    closed_day = "휴무일"
    now = "지금"
    always = "연중무휴 24시간"

    def normalize(self, text: str) -> str:
        return normalize_korean(text)

    def read_digits(self, number: str) -> str:
        return read_digits(number)

    def digit_words(self) -> dict[str, str]:
        return DIGIT_WORDS

    def say_number(self, number: str) -> str:
        return read_digits(number, "")  # "일삼사오"

    def spoken_digits(self, text: str) -> str | None:
        return spoken_digits(text)

    def time(self, hour: int, minute: int = 0) -> str:
        return spoken_time(hour, minute)

    def date(self, day: dt.date) -> str:
        return spoken_date(day)

    def weekdays(self, days: tuple[int, ...]) -> str:
        return _GROUPS.get(days) or ", ".join(DAYS[d] for d in days)

    def span(self, start: str, end: str) -> str:
        return f"{start}부터 {end}까지"

    def pause(self, span: str, lunch: bool) -> str:
        return f"{'점심시간' if lunch else '휴게시간'} {span}"

    def opening(self, time: str, days_ahead: int, day: dt.date) -> str:
        if days_ahead == 0:
            return f"{time}에"
        if days_ahead == 1:
            return f"내일 {time}에"
        return f"{spoken_date(day)} {time}에"


LANGUAGE = Korean()
