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


class Korean(Language, code="ko", name="한국어", label="KO", names={"ko": "한국어", "en": "Korean"}, tag="ko",
             say_voice="ko-KR", holiday_locale="ko", closed_day="휴무일", now="지금", always="연중무휴 24시간",
             spans="{start}부터 {end}까지", pauses=("점심시간 {span}", "휴게시간 {span}"),
             openings=("{time}에", "내일 {time}에", "{date} {time}에")):
    normalize = staticmethod(normalize_korean)
    time = staticmethod(spoken_time)
    date = staticmethod(spoken_date)

    def digit_words(self) -> dict[str, str]:
        return DIGIT_WORDS

    def read_digits(self, number: str) -> str:
        return read_digits(number)

    def say_number(self, number: str) -> str:
        return read_digits(number, "")  # "일삼사오"

    def spoken_digits(self, text: str) -> str | None:
        return spoken_digits(text)

    def weekdays(self, days: tuple[int, ...]) -> str:
        return _GROUPS.get(days) or ", ".join(DAYS[d] for d in days)


LANGUAGE = Korean()
