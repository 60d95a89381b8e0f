"""Russian as a language of the line (bot/languages/ru/): its normalizer (tests/data/normalize_ru.tsv),
its digits, its calendar phrases and holiday names, its pack (language.toml, shortcuts.toml)."""

import re
import tomllib
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import holidays
import pytest

from bot import languages
from bot.dialog.calendar import Hours, LineCalendar
from bot.dialog.domain import load_domain
from bot.dialog.language_packs import load_language
from tests.conftest import ROOT

CASES_FILE = ROOT / "tests" / "data" / "normalize_ru.tsv"
RU = languages.get("ru")
KST = ZoneInfo("Asia/Seoul")


def read_cases(path: Path = CASES_FILE) -> list[tuple[str, str, str]]:
    """(category, written, spoken) rows of the table."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("category\t"):
            continue
        category, written, spoken = line.split("\t")
        rows.append((category, written, spoken))
    return rows


TABLE = read_cases()


def test_the_table_has_fifty_cases_of_every_kind():
    assert len(TABLE) >= 50
    kinds = {c for c, _, _ in TABLE}
    assert {"cardinal", "thousands", "money", "date", "time", "percent", "phone", "reception", "ordinal"} <= kinds
    assert len({w for _, w, _ in TABLE}) == len(TABLE), "a written text twice in the table"


@pytest.mark.parametrize(("category", "written", "spoken"), TABLE, ids=[f"{c}:{w}" for c, w, _ in TABLE])
def test_normalize(category, written, spoken):
    assert RU.normalize(written) == spoken


@pytest.mark.parametrize(("category", "written", "spoken"), TABLE, ids=[f"{c}:{w}" for c, w, _ in TABLE])
def test_no_digit_is_left_and_a_second_pass_changes_nothing(category, written, spoken):
    out = RU.normalize(written)
    assert not any(ch.isdigit() for ch in out), out
    assert RU.normalize(out) == out


def test_read_digits():
    assert RU.read_digits("20260042") == "два ноль два шесть, ноль ноль четыре два"
    assert RU.read_digits("2026-0042") == "два ноль два шесть, ноль ноль четыре два"
    assert RU.read_digits("010-1234-5678") == "ноль один ноль, один два три четыре, пять шесть семь восемь"
    assert RU.read_digits("01012345678") == "ноль один ноль, один два три четыре, пять шесть семь восемь"
    assert RU.read_digits("1345") == "один три четыре пять"
    assert RU.read_digits("7") == "семь"


def test_the_language_fills_every_attribute_of_the_base():
    for name in languages.Language.__annotations__:
        assert getattr(RU, name, None) not in (None, "", {}) or name == "holiday_locale", name


def test_the_language_itself():
    assert (RU.code, RU.name, RU.label, RU.tag, RU.say_voice) == ("ru", "Русский", "RU", "ru", "ru-RU")
    assert RU.names == {"ko": "러시아어", "en": "Russian"}
    assert RU.holiday_locale is None
    assert "ru" in languages.known()
    assert RU.time(9) == "9:00" and RU.time(13, 30) == "13:30"
    assert RU.date(date(2026, 9, 29)) == "во вторник, 29 сентября"
    assert RU.weekdays((0, 1, 2, 3, 4)) == "по будням"
    assert RU.weekdays((5, 6)) == "по выходным"
    assert RU.weekdays(tuple(range(7))) == "ежедневно"
    assert RU.weekdays((0, 1, 2, 3, 4, 5)) == "с понедельника по субботу"
    assert RU.weekdays((0, 2, 4)) == "по понедельникам, средам и пятницам"
    assert RU.weekdays((3,)) == "по четвергам"


# --- the calendar ---------------------------------------------------------------------------------

CAL = LineCalendar(Hours.parse(["mon-fri 09:00-18:00"], ["12:00-13:00"]), extra_closed=["2026-12-31"])


def kst(*args) -> datetime:
    return datetime(*args, tzinfo=KST)


def test_hours_phrase_written_and_spoken():
    hours = CAL.hours_phrase(language="ru")
    assert hours == "по будням с 9:00 до 18:00, с перерывом на обед с 12:00 до 13:00"
    assert RU.normalize(hours) == ("по будням с девяти до восемнадцати часов, "
                                   "с перерывом на обед с двенадцати до тринадцати часов")
    civil = Hours.parse(["mon-fri 09:00-18:00", "thu 09:00-20:00"], ["15:00-15:30"])
    cal = LineCalendar(Hours.parse(["mon-fri 09:00-18:00"]), departments={"civil": civil})
    assert cal.hours_phrase("civil", language="ru") == (
        "по понедельникам, вторникам, средам и пятницам с 9:00 до 18:00, по четвергам с 9:00 до 20:00, "
        "с перерывом с 15:00 до 15:30")
    assert LineCalendar(Hours.parse(["24/7"])).hours_phrase(language="ru") == "круглосуточно, без выходных"


def test_opening_phrase():
    assert CAL.opening_phrase(kst(2026, 9, 22, 10), language="ru") == "сейчас"
    assert CAL.opening_phrase(kst(2026, 9, 22, 12, 30), language="ru") == "в 13:00"
    assert CAL.opening_phrase(kst(2026, 9, 22, 19), language="ru") == "завтра в 9:00"
    # Chuseok (24-26 September 2026) and the weekend: Monday
    monday = CAL.opening_phrase(kst(2026, 9, 23, 19), language="ru")
    assert monday == "в понедельник, 28 сентября, в 9:00"
    assert RU.normalize(monday) == "в понедельник, двадцать восьмого сентября, в девять часов"
    assert RU.normalize(CAL.opening_phrase(kst(2026, 9, 22, 12, 30), language="ru")) == "в тринадцать часов"


def test_holiday_names_in_russian():
    assert CAL.holiday(date(2026, 9, 25), "ru") == "Чхусок"
    assert CAL.holiday(date(2026, 9, 24), "ru") == "канун Чхусока"
    assert CAL.holiday(date(2026, 10, 9), "ru") == "День хангыля"
    assert CAL.holiday(date(2025, 10, 8), "ru") == "дополнительный выходной за Чхусок"
    assert CAL.holiday(date(2024, 2, 12), "ru") == "дополнительный выходной за Соллаль"
    assert CAL.holiday(date(2025, 5, 5), "ru") == "День рождения Будды, День детей"
    assert CAL.holiday(date(2026, 12, 31), "ru") == "нерабочий день"
    assert CAL.holiday(date(2026, 9, 22), "ru") is None


def test_every_holiday_name_of_2024_to_2030_is_translated():
    names = {n for y in range(2024, 2031) for d in holidays.country_holidays("KR", years=y, language="en_US")
             for n in holidays.country_holidays("KR", years=y, language="en_US").get_list(d)}
    assert names
    for name in names:
        said = RU.holiday(name)
        assert said and not any("a" <= ch.lower() <= "z" for ch in said), (name, said)


# --- the pack -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pack():
    return load_language("ru", load_domain(ROOT / "bot" / "data" / "domain.toml"))


def test_pack_loads_with_every_english_key(pack):
    ru = tomllib.loads((ROOT / "bot/languages/ru/language.toml").read_text(encoding="utf-8"))
    en = tomllib.loads((ROOT / "bot/languages/en/language.toml").read_text(encoding="utf-8"))

    def keys(table, prefix=""):
        out = {}
        for k, v in table.items():
            if isinstance(v, dict):
                out |= keys(v, f"{prefix}{k}.")
            else:
                out[prefix + k] = v
        return out

    ru_keys, en_keys = keys(ru), keys(en)
    assert set(ru_keys) == set(en_keys)
    placeholders = re.compile(r"\{(\w*)\}")
    for k, text in en_keys.items():
        if isinstance(text, str):
            assert set(placeholders.findall(ru_keys[k])) == set(placeholders.findall(text)), k
    assert pack.code == "ru" and pack.tag == "ru" and pack.name == "Русский"
    assert pack.menu.format(key="6") == "Нажмите 6 для русского языка."
    assert "Russian" in pack.instruction and "вы" in pack.instruction
    assert pack.intake.label("street_lights") == "уличное освещение"
    assert pack.intake.confirmed("20260042") == ("Ваше обращение принято. Номер обращения: два ноль два шесть, "
                                                 "ноль ноль четыре два. По этому номеру можно узнать его статус.")
    assert "{" not in pack.canned.with_hours(CAL.hours_phrase(language="ru")).closing_hours


def test_spoken_texts_have_no_dashes_or_quotes_the_voice_may_not_index():
    data = tomllib.loads((ROOT / "bot/languages/ru/language.toml").read_text(encoding="utf-8"))
    rules = tomllib.loads((ROOT / "bot/languages/ru/shortcuts.toml").read_text(encoding="utf-8"))["rules"]
    spoken = [*data["language"].values(), *data["replies"].values(),
              *(v for v in data["intake"].values() if isinstance(v, str)), *(r["reply"] for r in rules)]
    for text in spoken:
        assert not set(text) & set("—–«»"), text


def test_spoken_replies_have_no_digits_left(pack):
    canned = pack.canned.with_hours(CAL.hours_phrase(language="ru"))
    for name in ("closing_hours", "sms_offer", "busy", "unclear"):
        assert not any(ch.isdigit() for ch in RU.normalize(getattr(canned, name))), name
    assert RU.normalize(pack.intake.text("keypad_too_short", digits=8)) == (
        "Номер обращения состоит из восьми цифр. Пожалуйста, наберите его и нажмите решётку.")


SHORTCUTS = [
    ("Алло, здравствуйте!", None, "greeting"),
    ("Добрый день", None, "greeting"),
    ("Спасибо, до свидания", None, "thanks_goodbye"),
    ("Всё, спасибо большое!", None, "thanks_goodbye"),
    ("Спасибо за помощь, до свидания", None, "thanks_goodbye"),
    ("Повторите, пожалуйста", None, "repeat"),
    ("Что вы сказали?", None, "repeat"),
    ("Не могли бы вы повторить ещё раз?", None, "repeat"),
    ("Соедините с оператором, пожалуйста", None, "transfer"),
    ("Можно с человеком?", None, "transfer"),
    ("Переведите на оператора", None, "transfer"),
    ("Мне нужен оператор", None, "transfer"),
    ("Да", "confirmation", "confirm_yes"),
    ("Да, всё верно", "confirmation", "confirm_yes"),
    ("Хорошо", "confirmation", "confirm_yes"),
    ("Нет", "confirmation", "confirm_no"),
    ("Нет, не так", "confirmation", "confirm_no"),
    ("Что?", "confirmation", "repeat"),
    # near misses: the model answers
    ("Здравствуйте, у меня не горит фонарь", None, None),
    ("Спасибо, но у меня ещё вопрос", None, None),
    ("Скажите, пожалуйста, где мэрия?", None, None),
    ("Нет, спасибо", None, None),  # answers an offer: no goodbye
    ("Да", None, None),  # a bare yes outside a read-back
    ("Позовите", None, None),
    ("Оператор сказал, что перезвонит", None, None),
]


@pytest.mark.parametrize(("text", "context", "name"), SHORTCUTS)
def test_shortcuts(pack, text, context, name):
    hit = pack.shortcuts.match(text, context)
    assert (hit.name if hit else None) == name
