"""English text as the TTS should read it: numbers, times, dates, money, phone and reception numbers.

The model writes digits; Supertonic reads letters best. Phone numbers (with hyphens, or 7+ digits)
and reception numbers are read digit by digit, as callers key and repeat them.
"""

from __future__ import annotations

import re

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_MONTHS = "January February March April May June July August September October November December".split()
_ORD = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth",
        "twelve": "twelfth"}


def number_words(n: int) -> str:
    """1234 -> "one thousand two hundred thirty-four" (below a trillion)."""
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + " hundred" + (" " + number_words(n % 100) if n % 100 else "")
    for size, name in ((10**9, "billion"), (10**6, "million"), (1000, "thousand")):
        if n >= size:
            rest = n % size
            return number_words(n // size) + " " + name + (" " + number_words(rest) if rest else "")
    raise AssertionError(n)


def ordinal_words(n: int) -> str:
    words = number_words(n)
    head, sep, last = words.rpartition("-") if "-" in words.split(" ")[-1] else words.rpartition(" ")
    if last in _ORD:
        last = _ORD[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def read_digits_en(number: str) -> str:
    """ "2026-0042" -> "two, zero, two, six, zero, zero, four, two": a pause between digits."""
    return ", ".join(_ONES[int(d)] for d in number if d.isdigit())


_PHONE = re.compile(r"\+?\d{2,4}(?:-\d{3,4}){1,2}\b|\b\d{7,}\b")
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\s*(am|pm|a\.m\.|p\.m\.)?", re.I)
_HOUR = re.compile(r"\b(\d{1,2})\s*(am|pm|a\.m\.|p\.m\.)(?![a-z])", re.I)  # "9 AM" (the calendar's)
_DATE_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DATE_MD = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b")
_WON = re.compile(r"(?:₩\s?(\d[\d,]*)|\b(\d[\d,]*)\s?(?:won|KRW)\b)", re.I)
_DOLLAR = re.compile(r"\$(\d[\d,]*)(?:\.(\d{2}))?")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")
_DECIMAL = re.compile(r"\b(\d+)\.(\d+)\b")
_NUMBER = re.compile(r"\b\d[\d,]*\b")
_PERCENT = re.compile(r"(\d+)\s?%")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _time(m: re.Match) -> str:
    hour, minute, half = int(m.group(1)), int(m.group(2)), (m.group(3) or "").lower().replace(".", "")
    words = number_words(hour) + (" o'clock" if minute == 0 and not half else "")
    if minute:
        words += " " + ("oh " + _ONES[minute] if minute < 10 else number_words(minute))
    return words + (" " + " ".join(half.upper()) if half else "")


def _year(y: int) -> str:
    if 2000 <= y < 2010 or y % 100 == 0:
        return number_words(y)
    return number_words(y // 100) + " " + (number_words(y % 100) if y % 100 >= 10 else "oh " + _ONES[y % 100])


def normalize_english(text: str) -> str:
    """Digits and symbols in an English sentence, written out."""
    text = _DATE_ISO.sub(lambda m: f"{_MONTHS[int(m.group(2)) - 1]} {ordinal_words(int(m.group(3)))}, "
                         f"{_year(int(m.group(1)))}", text)
    text = _PHONE.sub(lambda m: read_digits_en(m.group(0)), text)
    text = _TIME.sub(_time, text)
    text = _HOUR.sub(lambda m: number_words(int(m.group(1))) + " " + " ".join(m.group(2).upper().replace(".", "")), text)
    text = _DATE_MD.sub(lambda m: f"{m.group(1)} {ordinal_words(int(m.group(2)))}", text)
    text = _WON.sub(lambda m: number_words(_int(m.group(1) or m.group(2))) + " won", text)
    text = _DOLLAR.sub(lambda m: number_words(_int(m.group(1))) + " dollars"
                       + (f" and {number_words(int(m.group(2)))} cents" if m.group(2) and int(m.group(2)) else ""),
                       text)
    text = _PERCENT.sub(lambda m: number_words(int(m.group(1))) + " percent", text)
    text = _ORDINAL.sub(lambda m: ordinal_words(int(m.group(1))), text)
    text = _DECIMAL.sub(lambda m: number_words(int(m.group(1))) + " point " + " ".join(_ONES[int(d)] for d in m.group(2)),
                        text)
    return _NUMBER.sub(lambda m: number_words(_int(m.group(0))), text)
