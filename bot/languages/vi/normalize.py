"""Vietnamese text as the TTS should read it: numbers, money, dates, times, phone and reception numbers.

Numbers are num2words' (``lang="vi"``) below a thousand; the groups above are joined here, because the
package drops the "không trăm" of an inner group (2026 is "hai nghìn không trăm hai mươi sáu", not
"hai nghìn lẻ hai mươi sáu"). Vietnamese writes 15.000 for fifteen thousand and 2,5 for two and a half;
the model may write 15,000 too, so a group of exactly three digits after a dot or a comma is thousands,
anything else a decimal. Phone numbers (hyphens, or 7+ digits), numbers after "gọi"/"tổng đài" and
reception numbers are read digit by digit, as callers key and repeat them.
"""

from __future__ import annotations

import re

from num2words import num2words

DIGITS = ("không", "một", "hai", "ba", "bốn", "năm", "sáu", "bảy", "tám", "chín")
# Months are "tháng" + the number, except April: "tháng tư".
MONTHS = ("một", "hai", "ba", "tư", "năm", "sáu", "bảy", "tám", "chín", "mười", "mười một", "mười hai")
_ORD = {1: "nhất", 4: "tư"}  # "thứ nhất", "thứ tư"; every other ordinal is "thứ" + the number
_SCALES = ((10**9, "tỷ"), (10**6, "triệu"), (1000, "nghìn"))
_UNITS = {"km/h": "ki lô mét một giờ", "km": "ki lô mét", "cm": "xen ti mét", "mm": "mi li mét", "m": "mét",
          "kg": "ki lô gam", "m2": "mét vuông", "m²": "mét vuông"}


def _group(n: int, inner: bool) -> str:
    """A group below a thousand; ``inner``: it follows a larger group, so its empty hundreds are said."""
    if inner and n < 100:
        return "không trăm " + ("lẻ " if n < 10 else "") + num2words(n, lang="vi")
    return num2words(n, lang="vi")


def number_words(n: int) -> str:
    """2026 -> "hai nghìn không trăm hai mươi sáu", 15000 -> "mười lăm nghìn", 105 -> "một trăm lẻ năm"."""
    if n < 0:
        return "âm " + number_words(-n)
    if n < 1000:
        return num2words(n, lang="vi")
    words: list[str] = []
    for size, name in _SCALES:
        head, n = divmod(n, size)
        if head:
            words.append((number_words(head) if head >= 1000 else _group(head, bool(words))) + " " + name)
    if n:
        words.append(_group(n, True))
    return " ".join(words)


def ordinal_words(n: int) -> str:
    """1 -> "nhất", 4 -> "tư", 2 -> "hai" (said after "thứ")."""
    return _ORD.get(n) or number_words(n)


def read_digits_vi(number: str) -> str:
    """ "2026-0042" -> "hai, không, hai, sáu, không, không, bốn, hai": a pause between digits."""
    return ", ".join(DIGITS[int(d)] for d in number if d.isdigit())


def _decimal(whole: str, frac: str) -> str:
    """ "2", "5" -> "hai phẩy năm"; "3", "14" -> "ba phẩy mười bốn"; "0", "05" -> "không phẩy không năm"."""
    after = number_words(int(frac)) if len(frac) <= 2 and not frac.startswith("0") else \
        " ".join(DIGITS[int(d)] for d in frac)
    return f"{number_words(int(whole))} phẩy {after}"


def amount_words(text: str) -> str:
    """ "15.000" / "15,000" -> "mười lăm nghìn", "2,5" -> "hai phẩy năm", "42" -> "bốn mươi hai"."""
    if re.fullmatch(r"\d{1,3}(?:([.,])\d{3})(?:\1\d{3})*", text):
        return number_words(int(re.sub(r"\D", "", text)))
    if m := re.fullmatch(r"(\d+)[.,](\d+)", text):
        return _decimal(m.group(1), m.group(2))
    return number_words(int(re.sub(r"\D", "", text)))


_NUM = r"(\d{1,3}(?:[.,]\d{3})+|\d+(?:[.,]\d+)?)"  # one amount, as written
_EDGE = r"(?<![\w.,])"  # not inside a longer number or word
_END = r"(?![\d]|[.,]\d)"

_DATE_ISO = re.compile(rf"(?i)(\bngày\s+)?{_EDGE}(\d{{4}})-(\d{{1,2}})-(\d{{1,2}}){_END}")
_DATE_DMY = re.compile(rf"(?i)(\bngày\s+)?{_EDGE}(\d{{1,2}})([/.-])(\d{{1,2}})\3(\d{{4}}){_END}")
_DATE_DM = re.compile(rf"(?i)(\bngày\s+)?{_EDGE}(\d{{1,2}})/(\d{{1,2}})(?![\d/])")
_ALWAYS = re.compile(r"(?<![\d/])24/7(?![\d/])")
_WON = re.compile(rf"(?:₩\s?{_NUM}|{_EDGE}{_NUM}\s?(?:won|KRW|원)(?!\w))", re.I)
_DONG = re.compile(rf"{_EDGE}{_NUM}\s?(?:đồng|đ|VND|VNĐ|₫)(?!\w)", re.I)
_DOLLAR = re.compile(rf"(?:\${_NUM}|{_EDGE}{_NUM}\s?(?:USD|đô la|đô)(?!\w))", re.I)
_THOUSAND_K = re.compile(rf"{_EDGE}(\d+)k(?!\w)")
_YEARS = re.compile(r"(?i)(\b(?:từ|năm|giai đoạn)\s+)((?:19|20)\d{2})\s?[-–~]\s?((?:19|20)\d{2})(?![\w-]|[.,]\d)")
_PHONE = re.compile(r"(?<![\w.,])(?:\+\d{1,3}[ -]?)?(?:\d{2,4}(?:-\d{3,4}){1,2}|0\d{1,2}[ .]\d{3,4}[ .]\d{4}|\d{7,})(?![\w]|[.,]\d)")
_CALL = re.compile(r"(?i)(\b(?:gọi|tổng đài|đường dây nóng|hotline|số điện thoại|điện thoại|máy lẻ)"
                   r"(?:\s+(?:số|đến số|tới số|đến|tới|cho))?\s+)(\d{3,6})(?![\d-]|[.,]\d)")
_CLOCK = r"\d{1,2}(?::\d{2}|h\d{0,2})"
_TIME_RANGE = re.compile(rf"{_EDGE}({_CLOCK})\s?[-–~]\s?({_CLOCK})(?!\w)")
_AMPM = re.compile(r"(?<![\w:])(\d{1,2})(?::(\d{2}))?\s?(a\.m\.|p\.m\.|am|pm|SA|CH)(?![\w])", re.I)
_TIME = re.compile(r"(?<![\w:.,])(\d{1,2}):(\d{2})(?![\d:])")
_TIME_H = re.compile(r"(?<![\w.,])(\d{1,2})h(\d{2})?(?!\w)")
_PERCENT = re.compile(rf"{_EDGE}{_NUM}\s?%")
_UNIT = re.compile(rf"{_EDGE}{_NUM}\s?(km/h|km|cm|mm|kg|m2|m²|m)(?![\w/])")
_MONTH = re.compile(r"(?i)\b(tháng)\s+(\d{1,2})(?![\d/]|[.,]\d|\s+ngày)")  # not "3 tháng 4 ngày"
_ORDINAL = re.compile(r"(?i)\b(thứ|hạng)\s+(\d+)(?![\d/:]|[.,]\d)")
_RANGE = re.compile(rf"{_EDGE}(\d+)\s?[-–~]\s?(\d+){_END}")
_GROUPED_DECIMAL = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+),(\d+)(?![\d]|[.,]\d)")  # 1.234,5
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:([.,])\d{3})(?:\1\d{3})*(?![\d]|[.,]\d)")
_DECIMAL = re.compile(r"(?<![\d.,])(\d+)[.,](\d+)(?![\d]|[.,]\d)")
_ZEROS = re.compile(r"(?<![\d.,])0\d+(?!\d)")
_NUMBER = re.compile(r"\d+")


def _date(prefix: str | None, day: int, month: int, year: int | None) -> str | None:
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return None
    out = f"{(prefix or 'ngày ').strip()} {number_words(day)} tháng {MONTHS[month - 1]}"
    return out + (f" năm {number_words(year)}" if year else "")


def _or_same(m: re.Match, said: str | None) -> str:
    return m.group(0) if said is None else said


def _clock(hour: int, minute: int) -> str:
    return f"{number_words(hour)} giờ" + (f" {number_words(minute)} phút" if minute else "")


def _ampm(m: re.Match) -> str:
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    pm = m.group(3).lower().replace(".", "") in ("pm", "ch")
    if not 1 <= hour <= 12 or minute > 59:
        return m.group(0)
    part = ("trưa" if hour == 12 else "chiều" if hour <= 6 else "tối") if pm else ("đêm" if hour == 12 else "sáng")
    return f"{_clock(hour, minute)} {part}"


def _time(m: re.Match) -> str:
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    return m.group(0) if hour > 24 or minute > 59 else _clock(hour, minute)


def _number(m: re.Match) -> str:
    """A bare integer; spaced from a letter it touches ("B1" -> "B một")."""
    text, start, end = m.string, m.start(), m.end()
    words = number_words(int(m.group(0)))
    before = " " if start and text[start - 1].isalpha() else ""
    after = " " if end < len(text) and text[end].isalpha() else ""
    return before + words + after


def normalize_vietnamese(text: str) -> str:
    """Digits and symbols in a Vietnamese sentence, written out as a native speaker reads them."""
    text = _DATE_ISO.sub(lambda m: _or_same(m, _date(m.group(1), int(m.group(4)), int(m.group(3)),
                                                     int(m.group(2)))), text)
    text = _DATE_DMY.sub(lambda m: _or_same(m, _date(m.group(1), int(m.group(2)), int(m.group(4)),
                                                     int(m.group(5)))), text)
    text = _ALWAYS.sub("hai mươi bốn trên bảy", text)
    text = _DATE_DM.sub(lambda m: _or_same(m, _date(m.group(1), int(m.group(2)), int(m.group(3)), None)), text)
    text = _WON.sub(lambda m: amount_words(m.group(1) or m.group(2)) + " won", text)
    text = _DONG.sub(lambda m: amount_words(m.group(1)) + " đồng", text)
    text = _DOLLAR.sub(lambda m: amount_words(m.group(1) or m.group(2)) + " đô la", text)
    text = _THOUSAND_K.sub(lambda m: number_words(int(m.group(1))) + " nghìn", text)
    text = _YEARS.sub(lambda m: f"{m.group(1)}{number_words(int(m.group(2)))} đến {number_words(int(m.group(3)))}", text)
    text = _PHONE.sub(lambda m: ("cộng, " if m.group(0).startswith("+") else "") + read_digits_vi(m.group(0)), text)
    text = _CALL.sub(lambda m: m.group(1) + read_digits_vi(m.group(2)), text)
    text = _TIME_RANGE.sub(r"\1 đến \2", text)
    text = _AMPM.sub(_ampm, text)
    text = _TIME.sub(_time, text)
    text = _TIME_H.sub(_time, text)
    text = _PERCENT.sub(lambda m: amount_words(m.group(1)) + " phần trăm", text)
    text = _UNIT.sub(lambda m: amount_words(m.group(1)) + " " + _UNITS[m.group(2)], text)
    text = _MONTH.sub(lambda m: m.group(1) + " " + (MONTHS[int(m.group(2)) - 1] if 1 <= int(m.group(2)) <= 12
                                                  else number_words(int(m.group(2)))), text)
    text = _ORDINAL.sub(lambda m: m.group(1) + " " + ordinal_words(int(m.group(2))), text)
    text = _RANGE.sub(lambda m: f"{number_words(int(m.group(1)))} đến {number_words(int(m.group(2)))}", text)
    text = _GROUPED_DECIMAL.sub(lambda m: _decimal(m.group(1).replace(".", ""), m.group(2)), text)
    text = _GROUPED.sub(lambda m: number_words(int(re.sub(r"[.,]", "", m.group(0)))), text)
    text = _DECIMAL.sub(lambda m: _decimal(m.group(1), m.group(2)), text)
    text = _ZEROS.sub(lambda m: read_digits_vi(m.group(0)), text)
    return _NUMBER.sub(_number, text)
