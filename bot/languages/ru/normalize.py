"""Russian text as the TTS should read it: numbers, money in won, dates, times, phone and reception numbers.

The model writes digits; Supertonic reads words best. Numbers are words through ``num2words``
(``lang="ru"``, with its cases and genders); this file adds what the line needs on top, in the case
a native speaker would use, taken from the word before the number:

* **Case.** After до, от, с, около, после, из, более, свыше ... a number is in the genitive
  ("до 5 дней" -> "до пяти дней"); after к, ко in the dative; after через, на, за, в in the
  accusative ("через 1 минуту" -> "через одну минуту"); otherwise in the nominative. Its gender
  comes from the next word for the few feminine and neuter nouns the line says (минута, неделя,
  вона, жалоба, обращение ...).
* **Money.** Won is "вона" (feminine): "1 вона" -> "одна вона", "2 воны" -> "две воны",
  "15 000 вон" / "15,000원" / "₩15,000" -> "пятнадцать тысяч вон"; the noun's form follows the number
  and the case ("до 1 воны" -> "до одной воны"). "тыс." and "млн" multiply.
* **Dates.** "3 декабря" is the day in the genitive, "третьего декабря": that is what "on that day",
  "до 3 декабря", "с 3 декабря" say. After сегодня / завтра / вчера / это it is the nominative,
  "Сегодня третье декабря"; after по / на the accusative ("по 3 декабря" -> "по третье декабря");
  after к the dative ("к третьему декабря"). 2026-12-03 and 03.12.2026 are read as "3 декабря 2026
  года"; "2026 год/года/году" is an ordinal in that case ("в две тысячи двадцать шестом году").
* **Times** (24-hour, as Korean offices and Russian speakers write them): a whole hour is said with
  "часов" ("в 18:00" -> "в восемнадцать часов", "к 9:00" -> "к девяти часам", 0:00 and 24:00 ->
  "полночь"); minutes are said as a number, feminine ("9:30" -> "девять тридцать", "9:05" ->
  "девять ноль пять", "21:21" -> "двадцать один двадцать одна"). A span "с 9:00 до 18:00" or
  "9:00-18:00" is "с девяти до восемнадцати часов" (часов once, at the end). "9.00" is a time only
  after a preposition ("с 9.00 до 18.00"). "пн-пт" is "с понедельника по пятницу".
* **Phone and reception numbers** (hyphenated, or 7+ digits) are read digit by digit, in groups
  with a pause between groups (``read_digits_ru``); so is a 3-4 digit service number after a phone
  word ("позвоните по номеру 1345" -> "один три четыре пять", "звонок на номер 119").
* **Percent** ("25%" -> "двадцать пять процентов"), ordinals with a suffix ("2-й раз" -> "второй
  раз", "3-го" -> "третьего"), decimals ("1,5 часа" -> "полтора часа", "2,5" -> "два с половиной",
  "1,2" -> "одна целая две десятых"), "№" -> "номер"; a spaced dash is a comma (a pause), «quotes» go.
"""

from __future__ import annotations

import re

from num2words import num2words

DIGITS = ("ноль", "один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять")
MONTHS = ("января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября", "октября",
          "ноября", "декабря")
# "с понедельника по пятницу" (weekday ranges, "пн-пт")
FROM_DAYS = ("понедельника", "вторника", "среды", "четверга", "пятницы", "субботы", "воскресенья")
TO_DAYS = ("понедельник", "вторник", "среду", "четверг", "пятницу", "субботу", "воскресенье")
_DAY_ABBR = ("пн", "вт", "ср", "чт", "пт", "сб", "вс")

# The case a preposition asks of the number after it.
_GENITIVE = frozenset("до от с со около после из без более менее свыше кроме для больше меньше вместо порядка "
                      "у среди ниже выше течение размере пределах".split())  # в течение, в размере, в пределах
_DATIVE = frozenset({"к", "ко"})
_ACCUSATIVE = frozenset({"через", "на", "за", "в", "во", "про"})
_PREPOSITIONAL = frozenset({"о", "об", "при"})
_DATE_NOMINATIVE = frozenset({"сегодня", "завтра", "вчера", "послезавтра", "это"})
# Nouns the line counts whose gender is not masculine (their stems).
_FEMININE = re.compile(r"(?:минут|недел|секунд|вон[аыуе]?\b|жалоб|заявк|справк|тысяч|копи|страниц|цифр|квитанц|"
                       r"ноч|смен|очеред|строк|попытк|фотографи|карт|анкет|форм[аыу]?\b|выписк|услуг|машин|"
                       r"квартир|комнат|подпис|печат|семь|семе|остановк|улиц|строчк)")
_NEUTER = re.compile(r"(?:обращени|заявлени|сообщени|мест|окн|письм|утр|число|числа)")

# (nominative/accusative: one, few, many); other cases: (singular, plural)
_NOUNS = {
    "вона": {"n": ("вона", "воны", "вон"), "a": ("вону", "воны", "вон"), "g": ("воны", "вон"),
             "d": ("воне", "вонам"), "p": ("воне", "вонах"), "i": ("воной", "вонами")},
    "процент": {"n": ("процент", "процента", "процентов"), "a": ("процент", "процента", "процентов"),
                "g": ("процента", "процентов"), "d": ("проценту", "процентам"), "p": ("проценте", "процентах"),
                "i": ("процентом", "процентами")},
    "час": {"n": ("час", "часа", "часов"), "a": ("час", "часа", "часов"), "g": ("часа", "часов"),
            "d": ("часу", "часам"), "p": ("часе", "часах"), "i": ("часом", "часами")},
}
_MIDNIGHT = {"n": "полночь", "a": "полночь", "g": "полуночи", "d": "полуночи", "p": "полуночи", "i": "полуночью"}

_SPACE = "[ \u00a0\u202f]"
# A whole number, with thousands separated by spaces, commas or dots ("15 000", "15,000", "1.000.000").
_NUM = rf"(?:\d{{1,3}}(?:(?:{_SPACE}\d{{3}})+|(?:,\d{{3}})+|(?:\.\d{{3}})+)(?!\d)|\d+)"
_MULT = r"(?:тыс\.?|тысяч[аи]?|млн\.?|миллион(?:а|ов)?)"
_T = r"([01]?\d|2[0-4]):([0-5]\d)"  # a clock time

_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")
_DMY = re.compile(r"(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})(?![\d])")
_PHONE = re.compile(r"\+\d{1,3}(?:[- ]\d{1,4}){2,4}(?!\d)|\+?(?<![\d-])\d{2,4}(?:-\d{3,4}){1,2}(?![\d-])(?!\s*(?:гг|год))|(?<![\d,.])\d{7,}(?!\d)")
# A short service number after a phone word ("позвоните по номеру 1345", "телефон 120"): digit by digit.
_SHORT_PHONE = re.compile(r"(?<![\d,.])\d{3,4}(?!\d|[,.:]\d|\s?%)")
_PHONE_WORD = re.compile(r"телефон|позвон|звон|набер|лини[июя]\b", re.I)
_MONEY = re.compile(rf"₩{_SPACE}?(?P<pre>{_NUM})|(?<![\d,.])(?:(?P<num>{_NUM})|(?P<dec>\d+[.,]\d+)(?={_SPACE}?{_MULT}))"
                    rf"(?:{_SPACE}?(?P<mult>{_MULT}))?{_SPACE}?"
                    r"(?:вон(?:а|ы|у|е|ов)?(?!\w)|원|KRW\b)")
_PERCENT = re.compile(r"(?<![\d,.])(\d+(?:[.,]\d+)?)\s?%")
_DOT_TIME = re.compile(r"(?<!\w)(в|во|с|со|до|к|ко|после|от|около)\s+([01]?\d|2[0-4])\.([0-5]\d)(?!\d)"
                       r"(?:(\s*(?:до|[-–—])\s*)([01]?\d|2[0-4])\.([0-5]\d)(?!\d))?", re.I)
_SPAN_FROM = re.compile(rf"(?<!\w)(с|со|от)\s+{_T}\s*(?:до|[-–—])\s*{_T}(?!\d)", re.I)
_SPAN_DASH = re.compile(rf"(?<![\d:]){_T}\s*[-–—]\s*{_T}(?!\d)")
_TIME = re.compile(rf"(?<![\d:.]){_T}(?![\d:])")
_MONTH = "|".join(MONTHS)
_DAY_RANGE = re.compile(rf"(?<!\w)({'|'.join(_DAY_ABBR)})\.?\s*[-–—]\s*({'|'.join(_DAY_ABBR)})(?!\w)", re.I)
_DM = re.compile(r"(?<![\d.,])(0?[1-9]|[12]\d|3[01])\.(0[1-9]|1[0-2])(?![\d.,]\d|\d|\s?%)")
_DATE_RANGE = re.compile(rf"(?:(?<!\w)(с|со|от)\s+)?(?<!\d)(\d{{1,2}})\s*(?:(по|до)\s+|[-–—]\s*)(\d{{1,2}})\s+({_MONTH})(?!\w)",
                         re.I)
_DATE = re.compile(rf"(?<![\d.])(\d{{1,2}})(?:-?(?:го|е))?\s+({_MONTH})(?!\w)", re.I)
_YEAR = re.compile(r"(?<!\d)(\d{4})\s*(года|году|год|г\.)(?!\w)")
_ORDINAL = re.compile(r"(?<![\d,.])(\d+)-(ый|ий|ой|й|ая|яя|я|ое|ее|е|ого|его|го|ому|ему|му|ом|ем|ым|им|м|ую|юю|ю|ых|их|х)"
                      r"(?!\w)")
_DEC_MULT = re.compile(rf"(?<![\d,.])(\d+)[.,](\d+){_SPACE}?({_MULT})")
_DECIMAL = re.compile(r"(?<![\d,.])(\d+)[.,](\d+)(?![\d,.])")
_NUMBER = re.compile(rf"(?<![\d,.]){_NUM}(?:{_SPACE}?(?P<mult>{_MULT}))?")
_SUFFIX_FORM = {  # an ordinal's suffix -> (case, gender)
    "й": ("n", "m"), "ый": ("n", "m"), "ий": ("n", "m"), "ой": ("n", "m"),
    "я": ("n", "f"), "ая": ("n", "f"), "яя": ("n", "f"),
    "е": ("n", "n"), "ое": ("n", "n"), "ее": ("n", "n"),
    "го": ("g", "m"), "ого": ("g", "m"), "его": ("g", "m"),
    "му": ("d", "m"), "ому": ("d", "m"), "ему": ("d", "m"),
    "м": ("p", "m"), "ом": ("p", "m"), "ем": ("p", "m"), "ым": ("i", "m"), "им": ("i", "m"),
    "ю": ("a", "f"), "ую": ("a", "f"), "юю": ("a", "f"),
}


# --- words ---------------------------------------------------------------------------------------

def cardinal(n: int, case: str = "n", gender: str = "m") -> str:
    """15000 -> "пятнадцать тысяч"; a leading "одна тысяча" / "один миллион" is said "тысяча", "миллион"."""
    low = n % 1000
    if gender == "m" or n < 1000:
        words = num2words(n, lang="ru", case=case, gender=gender, animate=False)
    else:  # num2words gives the gender to the first word ("одна миллион"): only the last three digits take it
        words = num2words(n - low, lang="ru", case=case, animate=False)
        if low:
            words += " " + num2words(low, lang="ru", case=case, gender=gender, animate=False)
    return re.sub(r"^(?:одна|одной|одну|одною) (тысяч)|^(?:один|одного|одному|одним|одном) (миллион)", r"\1\2", words)


def ordinal(n: int, case: str = "n", gender: str = "m", plural: bool = False) -> str:
    """3 -> "третий"; (3, "g", "n") -> "третьего"."""
    return num2words(n, lang="ru", to="ordinal", case=case, gender=gender, plural=plural)


def noun(n: int, word: str, case: str = "n") -> str:
    """The form of a counted noun after ``n`` in ``case``: 1 вона, 2 воны, 5 вон; до 1 воны, до 5 вон."""
    forms = _NOUNS[word][case]
    one = n % 10 == 1 and n % 100 != 11
    if len(forms) == 2:
        return forms[0 if one else 1]
    few = n % 10 in (2, 3, 4) and n % 100 not in (12, 13, 14)
    return forms[0 if one else 1 if few else 2]


def read_digits_ru(number: str) -> str:
    """ "2026-0042" / "20260042" -> "два ноль два шесть, ноль ноль четыре два": digit by digit, a pause
    (a comma) between groups: the hyphens' groups, else groups of four from the end (010 1234 5678)."""
    groups = [g for g in re.split(r"[^\d]+", number) if g]
    if len(groups) == 1 and len(groups[0]) > 4:
        run = groups[0]
        head = len(run) % 4 or (4 if len(run) > 4 else 0)
        groups = [run[:head]] + [run[i:i + 4] for i in range(head, len(run), 4)]
        groups = [g for g in groups if g]
    words = ", ".join(" ".join(DIGITS[int(d)] for d in g) for g in groups)
    return ("плюс " + words) if number.lstrip().startswith("+") else words


# --- context -------------------------------------------------------------------------------------

def _word_before(m: re.Match, group: int = 0) -> str:
    before = re.findall(r"[\w-]+", m.string[: m.start(group)][-30:])
    return before[-1].lower() if before else ""


def _word_after(m: re.Match) -> str:
    after = re.match(r"\s*([\w-]+)", m.string[m.end():])
    return after.group(1).lower() if after else ""


def _case(word: str) -> str:
    """The case a number takes after ``word``."""
    if word in _GENITIVE:
        return "g"
    if word in _DATIVE:
        return "d"
    if word in _ACCUSATIVE:
        return "a"
    if word in _PREPOSITIONAL:
        return "p"
    return "n"


def _number_case(before: str, after: str) -> str:
    """The case from the word before, or the accusative of a feminine noun after ("1 минуту")."""
    case = _case(before)
    if case == "n" and _gender(after) == "f" and re.fullmatch(r"\w+[ую]", after):
        return "a"
    return case


def _gender(word: str) -> str:
    if _FEMININE.match(word):
        return "f"
    if _NEUTER.match(word):
        return "n"
    return "m"


def _int(text: str) -> int:
    return int(re.sub(r"[^\d]", "", text))


def _multiplier(mult: str | None) -> int:
    if not mult:
        return 1
    return 1000 if mult.startswith("тыс") else 1_000_000


# --- the line's cases ----------------------------------------------------------------------------

def _scaled(whole: str, frac: str, mult: str) -> str:
    """ "1,5 млн" -> "полтора миллиона", "2,5 тыс." -> "две с половиной тысячи", "1,2 млн" -> "одна целая
    две десятых миллиона" (after a fraction the noun is in the genitive singular)."""
    thousand = mult.startswith("тыс")
    name = "тысячи" if thousand else "миллиона"
    if frac == "5":
        if int(whole) == 1:
            return f"{'полторы' if thousand else 'полтора'} {name}"
        return f"{cardinal(int(whole), gender='f' if thousand else 'm')} с половиной {name}"
    return f"{_decimal_words(whole, frac)} {name}"


def _money(m: re.Match) -> str:
    case = _case(_word_before(m))
    if m.group("dec"):
        whole, frac = re.split(r"[.,]", m.group("dec"))
        return f"{_scaled(whole, frac, m.group('mult'))} вон"
    amount = _int(m.group("pre") or m.group("num")) * _multiplier(m.group("mult"))
    return f"{cardinal(amount, case, 'f')} {noun(amount, 'вона', case)}"


def _percent(m: re.Match) -> str:
    text, case = m.group(1), _case(_word_before(m))
    if "," in text or "." in text:
        whole, frac = re.split(r"[.,]", text)
        return f"{_decimal_words(whole, frac)} процента"
    n = int(text)
    return f"{cardinal(n, case)} {noun(n, 'процент', case)}"


def _clock(hour: int, minute: int, case: str, bare: bool = False) -> str:
    """A clock time in ``case``: "девять тридцать", "восемнадцать часов", "девяти" (``bare``: no "часов")."""
    if minute == 0:
        if hour in (0, 24):
            return _MIDNIGHT[case]
        if hour == 1 and not bare:
            return noun(1, "час", case)
        words = cardinal(hour, case)
        return words if bare else f"{words} {noun(hour, 'час', case)}"
    minutes = cardinal(minute, case, "f")
    if minute < 10:
        minutes = "ноль " + minutes
    return f"{cardinal(hour % 24, case) if hour % 24 else 'ноль'} {minutes}"


def _span(prep: str, h1: int, m1: int, h2: int, m2: int) -> str:
    """ "с девяти до восемнадцати часов": the genitive; "часов" once, after the end."""
    first = _clock(h1, m1, "g", bare=True)
    if m1 == 0 and h1 == 1:
        first = "часа"
    return f"{prep} {first} до {_clock(h2, m2, 'g')}"


def _dot_time(m: re.Match) -> str:
    text = f"{m.group(1)} {m.group(2)}:{m.group(3)}"
    if m.group(5):
        text += f" до {m.group(5)}:{m.group(6)}"
    return text


def _date_case(word: str) -> str:
    if word in _DATE_NOMINATIVE:
        return "n"
    if word in _DATIVE:
        return "d"
    if word in ("по", "на"):
        return "a"
    return "g"


def _date_range(m: re.Match) -> str:
    prep, first, conn, last, month = m.group(1), int(m.group(2)), m.group(3), int(m.group(4)), m.group(5)
    if not 1 <= first <= 31 or not 1 <= last <= 31:
        return m.group(0)
    conn = (conn or "по").lower()
    start = f"{prep or 'с'} {ordinal(first, 'g', 'n')}"
    return f"{start} {conn} {ordinal(last, 'g' if conn == 'до' else 'a', 'n')} {month}"


def _date(m: re.Match) -> str:
    day = int(m.group(1))
    if not 1 <= day <= 31:
        return m.group(0)
    return f"{ordinal(day, _date_case(_word_before(m)), 'n')} {m.group(2)}"


def _year(m: re.Match) -> str:
    year, word = int(m.group(1)), m.group(2)
    if word == "г.":
        prep = _word_before(m) in ("в", "во")
        word = "году" if prep else "года"
        rest = m.string[m.end():]
        if not rest.strip() or re.match(r"\s+[А-ЯЁA-Z]", rest):
            word += "."  # the abbreviation's dot also ended the sentence
    case = {"год": "n", "года": "g", "году": "p"}[word.rstrip(".")]
    return f"{ordinal(year, case)} {word}"


def _ordinal(m: re.Match) -> str:
    n, suffix = int(m.group(1)), m.group(2)
    if suffix in ("х", "ых", "их"):  # "90-х" -> "девяностых"; "2-х" -> "двух"
        return ordinal(n, "g", plural=True) if n % 10 == 0 else cardinal(n, "g")
    case, gender = _SUFFIX_FORM[suffix]
    return ordinal(n, case, gender)


def _decimal_words(whole: str, frac: str, gender: str = "m") -> str:
    """ "2,5" -> "два с половиной" ("полтора", "полторы" for 1,5); "1,2" -> "одна целая две десятых"."""
    if frac == "5":
        if int(whole) == 1:
            return "полторы" if gender == "f" else "полтора"
        return f"{cardinal(int(whole), gender=gender)} с половиной"
    return num2words(float(f"{int(whole)}.{frac}"), lang="ru")


def _short_phone(m: re.Match) -> str:
    """A 3-4 digit number said as a phone number: after телефон / позвоните / наберите ..., or "по номеру",
    "на номер" in a sentence about calling; otherwise left to the cardinal rule (room 305, bus 102)."""
    before = re.split(r"[.!?;]", m.string[: m.start()])[-1]  # this sentence, up to the number
    words = re.findall(r"[\w-]+", before.lower())[-2:] or [""]
    after_phone_word = bool(_PHONE_WORD.match(words[-1]))
    by_number = words == ["по", "номеру"] or (words == ["на", "номер"] and bool(_PHONE_WORD.search(before)))
    if after_phone_word or by_number:
        return read_digits_ru(m.group(0))
    return m.group(0)


def _decimal(m: re.Match) -> str:
    whole, frac = m.group(1), m.group(2)
    if len(frac) == 3 and len(whole) <= 3:  # "1,000" / "1.000": thousands
        n = int(whole + frac)
        return cardinal(n, _number_case(_word_before(m), _word_after(m)), _gender(_word_after(m)))
    return _decimal_words(whole, frac, _gender(_word_after(m)))


def _number(m: re.Match) -> str:
    n = _int(m.group(0).removesuffix(m.group("mult") or "")) * _multiplier(m.group("mult"))
    return cardinal(n, _number_case(_word_before(m), _word_after(m)), _gender(_word_after(m)))


def normalize_russian(text: str) -> str:
    """Digits and symbols in a Russian sentence, written out."""
    text = re.sub(r"№\s*", "номер ", text)
    text = re.sub(r"[«»„“”]", "", re.sub(r"\s+[—–]\s+", ", ", text))  # a spaced dash is a pause; quotes are silent
    text = _ISO.sub(lambda m: f"{int(m.group(3))} {MONTHS[int(m.group(2)) - 1]} {m.group(1)} года"
                    if 1 <= int(m.group(2)) <= 12 else m.group(0), text)
    text = _DMY.sub(lambda m: f"{int(m.group(1))} {MONTHS[int(m.group(2)) - 1]} {m.group(3)} года"
                    if 1 <= int(m.group(2)) <= 12 else m.group(0), text)
    text = _MONEY.sub(_money, text)
    text = _PHONE.sub(lambda m: read_digits_ru(m.group(0)), text)
    text = _SHORT_PHONE.sub(_short_phone, text)
    text = _PERCENT.sub(_percent, text)
    text = _DOT_TIME.sub(_dot_time, text)
    text = _SPAN_FROM.sub(lambda m: _span(m.group(1).lower(), *map(int, m.groups()[1:])), text)
    text = _SPAN_DASH.sub(lambda m: _span("с", *map(int, m.groups())), text)
    text = _TIME.sub(lambda m: _clock(int(m.group(1)), int(m.group(2)),
                                      {"g": "g", "d": "d"}.get(_case(_word_before(m)), "n")), text)
    text = _DAY_RANGE.sub(lambda m: f"с {FROM_DAYS[_DAY_ABBR.index(m.group(1).lower())]} "
                          f"по {TO_DAYS[_DAY_ABBR.index(m.group(2).lower())]}", text)
    text = _DM.sub(lambda m: f"{int(m.group(1))} {MONTHS[int(m.group(2)) - 1]}", text)
    text = _DATE_RANGE.sub(_date_range, text)
    text = _DATE.sub(_date, text)
    text = _YEAR.sub(_year, text)
    text = _ORDINAL.sub(_ordinal, text)
    text = _DEC_MULT.sub(lambda m: _scaled(*m.groups()), text)
    text = _DECIMAL.sub(_decimal, text)
    return _NUMBER.sub(_number, text)
