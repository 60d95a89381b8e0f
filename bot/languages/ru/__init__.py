"""Russian (Central Asian residents who speak it): polite "вы", short sentences.

Times are written "9:00" (24-hour, as Korean offices and Russian speakers write them) and read by the
normalizer in the case the preposition asks: "с 9:00 до 18:00" -> "с девяти до восемнадцати часов",
"завтра в 9:00" -> "завтра в девять часов". The `holidays` package has no Russian names for Korea's
calendar: ``HOLIDAYS`` translates its English ones.
"""

from __future__ import annotations

import datetime as dt

from bot.languages.base import Language
from bot.languages.ru.normalize import FROM_DAYS, MONTHS, TO_DAYS, normalize_russian, read_digits_ru

# "в понедельник", "во вторник" (the accusative after в); "по понедельникам"; "с понедельника по пятницу"
ON_DAYS = ("в понедельник", "во вторник", "в среду", "в четверг", "в пятницу", "в субботу", "в воскресенье")
EVERY_DAYS = ("понедельникам", "вторникам", "средам", "четвергам", "пятницам", "субботам", "воскресеньям")
_GROUPS = {(0, 1, 2, 3, 4): "по будням", (5, 6): "по выходным", tuple(range(7)): "ежедневно"}
ALTERNATIVE = "Alternative holiday for "
# The English KR names of the `holidays` package (2024-2030), as a Russian speaker in Korea says them.
HOLIDAYS = {
    "New Year's Day": "Новый год",
    "Korean New Year": "Соллаль, Новый год по лунному календарю",
    "The day preceding Korean New Year": "канун Соллаля",
    "The second day of Korean New Year": "второй день Соллаля",
    "Independence Movement Day": "День движения за независимость",
    "Labor Day": "День труда",
    "Children's Day": "День детей",
    "Buddha's Birthday": "День рождения Будды",
    "Memorial Day": "День памяти",
    "Constitution Day": "День Конституции",
    "Liberation Day": "День освобождения",
    "Chuseok": "Чхусок",
    "The day preceding Chuseok": "канун Чхусока",
    "The second day of Chuseok": "второй день Чхусока",
    "Armed Forces Day": "День вооружённых сил",
    "National Foundation Day": "День основания государства",
    "Hangul Day": "День хангыля",
    "Christmas Day": "Рождество",
    "Local Election Day": "День местных выборов",
    "National Assembly Election Day": "День выборов в Национальное собрание",
    "Presidential Election Day": "День президентских выборов",
    "Temporary Public Holiday": "внеочередной выходной",
}


def spoken_date(day: dt.date) -> str:
    """ "в понедельник, 28 сентября" (the normalizer reads "двадцать восьмого сентября")."""
    return f"{ON_DAYS[day.weekday()]}, {day.day} {MONTHS[day.month - 1]}"


# No holiday_locale: the package's KR calendar has ko, en_US and th only.
class Russian(Language, code="ru", name="Русский", label="RU", names={"ko": "러시아어", "en": "Russian"}, tag="ru",
              say_voice="ru-RU", holiday_names=HOLIDAYS, closed_day="нерабочий день", now="сейчас",
              always="круглосуточно, без выходных", openings=("в {time}", "завтра в {time}", "{date}, в {time}"),
              spans="с {start} до {end}", pauses=("с перерывом на обед {span}", "с перерывом {span}")):
    normalize = staticmethod(normalize_russian)
    read_digits = staticmethod(read_digits_ru)
    date = staticmethod(spoken_date)

    def time(self, hour: int, minute: int = 0) -> str:
        return f"{hour}:{minute:02d}"

    def weekdays(self, days: tuple[int, ...]) -> str:
        if days in _GROUPS:
            return _GROUPS[days]
        if len(days) >= 3 and days == tuple(range(days[0], days[-1] + 1)):
            return f"с {FROM_DAYS[days[0]]} по {TO_DAYS[days[-1]]}"
        named = [EVERY_DAYS[d] for d in days]
        return "по " + (", ".join(named[:-1]) + " и " + named[-1] if len(named) > 1 else named[0])

    def holiday(self, english_name: str) -> str:
        """ "Chuseok" -> "Чхусок"; "Alternative holiday for Chuseok" -> "дополнительный выходной за Чхусок"
        (the accusative after за: the same words as the nominative for every name here; the short name,
        without its explanation after the comma)."""
        if "; " in english_name:
            return ", ".join(self.holiday(n) for n in english_name.split("; "))
        if english_name.startswith(ALTERNATIVE):
            short = self.holiday(english_name.removeprefix(ALTERNATIVE)).partition(", ")[0]
            return "дополнительный выходной за " + short
        return self.holiday_names.get(english_name, english_name)


LANGUAGE = Russian()
