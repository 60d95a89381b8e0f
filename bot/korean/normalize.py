"""Korean text normalization for a TTS that reads Hangul only.

``normalize_korean`` turns what an LLM writes (digits, dates, times, money,
phone numbers, units, Latin letters, symbols) into the Hangul a person would
say. ``remove_unsupported`` then strips whatever the TTS vocabulary still
cannot read and reports it so the caller can log it.

Spacing conventions of the output:

* A number and its counter or unit are separated by one space (``세 시``,
  ``만 오천 원``, ``삼 킬로미터``), except months, which are fused (``삼월``,
  ``유월``, ``시월``).
* Sino-Korean groups of ten thousand are separated by a space
  (``십이만 삼천사백오십육``); Hangul magnitudes written in the source stay
  fused to their number (``3만`` -> ``삼만``, ``1억`` -> ``일억``).
* Phone numbers are read digit by digit with ``공`` for 0, one space between
  groups (``공일공 일이삼사 오육칠팔``).
* Ranges repeat the counter: ``3~5일`` -> ``삼 일에서 오 일``.
* Sentence punctuation ``. , ? !`` is kept for prosody.

All tables are module-level data so that coverage is extended by adding rows,
not code.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# --- Number words -----------------------------------------------------------

SINO_DIGITS = "영일이삼사오육칠팔구"
PHONE_DIGITS = "공일이삼사오육칠팔구"  # 0 is 공 when digits are read one by one
SINO_PLACES = ("", "십", "백", "천")
SINO_GROUPS = ("", "만", "억", "조", "경")
NATIVE_ONES = ("", "한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉")
NATIVE_TENS = ("", "열", "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔")
NATIVE_TWENTY = "스무"  # 스물 loses its ㄹ before a counter: 스무 명, but 스물한 명
MONTHS = {6: "유월", 10: "시월"}  # irregular month names; the rest are Sino + 월
FIRST_ORDINAL = {"번째": "첫"}  # 1번째 is 첫 번째, never 한 번째

# --- Counters and units -----------------------------------------------------

# Counters that take native numbers (1-99). Longer entries win over shorter
# ones, so 시간 beats 시 and 번째 beats 번.
NATIVE_COUNTERS = (
    "시", "시간", "개", "권", "명", "살", "번째", "마리", "잔", "병", "장", "대",
    "벌", "그루", "척", "채", "곳", "군데", "달", "가지", "사람", "켤레", "송이",
    "통", "줄", "그릇", "접시", "봉지", "상자", "자루", "포기", "바퀴", "알",
    "끼", "차례", "배",
)
# Counters that take Sino numbers. Sino is the default; listing a counter here
# gives it the number-space-counter spacing and stops a native counter from
# matching its prefix (개월 is not 개, 달러 is not 달).
SINO_COUNTERS = (
    "월", "일", "년", "분", "초", "원", "층", "호", "호선", "번", "번지", "동", "주",
    "주년", "주일", "개월", "개국", "개년", "달러", "유로", "엔", "파운드", "위안",
    "회", "차", "인", "인분", "등", "위", "학년", "도", "점", "세", "평", "박",
    "분기", "쪽", "페이지", "교시", "단계", "년생", "퍼센트",
)
# Native counters read Sino on round tens: 20대 is an age group (이십 대), not 스무 대.
SINO_ON_TENS = ("대",)

# Unit symbols, spoken only right after a number.
UNITS = {
    "km/h": "킬로미터 퍼 아워",
    "km²": "제곱킬로미터",
    "km": "킬로미터",
    "cm": "센티미터",
    "mm": "밀리미터",
    "m²": "제곱미터",
    "m2": "제곱미터",
    "m": "미터",
    "kg": "킬로그램",
    "mg": "밀리그램",
    "g": "그램",
    "ml": "밀리리터",
    "mL": "밀리리터",
    "L": "리터",
    "°C": "도",
    "°": "도",
    "%p": "퍼센트포인트",
    "%": "퍼센트",
    "kcal": "킬로칼로리",
    "kWh": "킬로와트시",
    "kW": "킬로와트",
    "TB": "테라바이트",
    "GB": "기가바이트",
    "MB": "메가바이트",
}
# Currency signs written before the amount are spoken after it: $10 -> 십 달러.
CURRENCY_PREFIXES = {"$": "달러", "₩": "원", "€": "유로", "£": "파운드", "¥": "엔"}

# --- Latin letters ----------------------------------------------------------

LETTER_NAMES = {
    "a": "에이", "b": "비", "c": "씨", "d": "디", "e": "이", "f": "에프", "g": "지",
    "h": "에이치", "i": "아이", "j": "제이", "k": "케이", "l": "엘", "m": "엠",
    "n": "엔", "o": "오", "p": "피", "q": "큐", "r": "알", "s": "에스", "t": "티",
    "u": "유", "v": "브이", "w": "더블유", "x": "엑스", "y": "와이", "z": "제트",
}
# Words read as words, keyed in lower case. Anything else is spelled letter by
# letter, which already covers acronyms such as ARS, KT, QR and PDF.
LATIN_WORDS = {
    "ok": "오케이", "okay": "오케이", "app": "앱", "id": "아이디", "wifi": "와이파이",
    "wi-fi": "와이파이", "email": "이메일", "e-mail": "이메일", "tv": "티비",
    "pc": "피씨", "ai": "에이아이", "web": "웹", "online": "온라인",
    "offline": "오프라인", "login": "로그인", "logout": "로그아웃",
    "password": "패스워드", "kakao": "카카오", "kakaotalk": "카카오톡",
    "naver": "네이버", "google": "구글", "iphone": "아이폰", "android": "안드로이드",
    "bluetooth": "블루투스", "covid": "코비드", "5g": "파이브지", "4g": "포지",
    "3d": "쓰리디", "a4": "에이포", "mp3": "엠피쓰리",
}

# --- Symbols ----------------------------------------------------------------

# Compatibility characters folded into the ASCII forms the rules below expect.
CHAR_FOLDS = {
    "㎡": "m²", "㎢": "km²", "℃": "°C", "㎞": "km", "㎏": "kg", "㎎": "mg", "㎝": "cm",
    "㎜": "mm", "㎖": "ml", "ℓ": "L", "〜": "~", "–": "-", "−": "-", "\u3000": " ",
}
# Symbols left after numbers are read. "~" and "-" here are the ones not
# between numbers (ranges are handled earlier), so they are only pauses.
SYMBOLS = {
    "&": " 앤 ", "+": " 플러스 ", "·": " ", "ㆍ": " ", "•": " ", "/": " ", "~": " ",
    "-": " ", "—": ", ", "@": " 골뱅이 ", "#": " 샵 ", "*": " 별표 ", "…": "...",
}

# --- Patterns ---------------------------------------------------------------

_FOLD = str.maketrans(
    {**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, **CHAR_FOLDS}
)


def _alternation(words) -> str:
    """Regex alternation, longest first; Latin entries must not run into letters."""
    parts = []
    for w in sorted(words, key=len, reverse=True):
        guard = "" if "가" <= w[0] <= "힣" else "(?![A-Za-z])"
        parts.append(re.escape(w) + guard)
    return "|".join(parts)


_SUFFIX = _alternation({*UNITS, *NATIVE_COUNTERS, *SINO_COUNTERS})
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
# Markdown the LLM may emit: bold/italic markers, code ticks, headings, bullets.
_MARKDOWN_RE = re.compile(r"\*\*|__|`|^[ \t]*(?:#{1,6}|[-*+])[ \t]+", re.M)
_ALNUM_WORD_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*(?![A-Za-z0-9])")
_PHONE_RE = re.compile(
    r"(?<![\d.-])(?:\d{2,4}([-.])\d{3,4}\1\d{4}|1[5-9]\d{2}-\d{4}|01[016789]\d{7,8})(?![\d-])"
)
_DATE_RE = re.compile(r"(?<!\d)(?P<y>\d{4})([-./]) ?(?P<m>\d{1,2})\2 ?(?P<d>\d{1,2})(?!\d)")
# M/D is only taken for a date when a weekday follows (3/5(목)); otherwise a fraction.
_SHORT_DATE_RE = re.compile(
    r"(?<![\d/])(?P<m>\d{1,2})/(?P<d>\d{1,2})(?=\s*\([월화수목금토일]\))"
)
_TIME_RE = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_CURRENCY_RE = re.compile(
    rf"([{re.escape(''.join(CURRENCY_PREFIXES))}])\s*({_NUM}[조억만천백]*)"
)
# A range whose counter is written once (3~5일) gets it on both ends first.
_RANGE_SHARED_RE = re.compile(rf"(?<!\d)({_NUM})[ \t]*[~-][ \t]*({_NUM})[ \t]*({_SUFFIX})")
_RANGE_RE = re.compile(rf"({_NUM}[조억만천백]*(?:[ \t]*(?:{_SUFFIX}))?)[ \t]*[~-][ \t]*(?=\d)")
_FRACTION_RE = re.compile(r"(?<![\d/])(\d+)/(\d+)(?![\d/])")
_MINUS_RE = re.compile(r"(?<![\w.])-(?=\d)")
_NUMBER_RE = re.compile(
    r"(?<!\d)(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?(?P<mag>[조억만천백]*)"
    rf"(?:[ \t]*(?P<suf>{_SUFFIX}))?"
)
_LATIN_RE = re.compile(r"[A-Za-z]+")
_SYMBOL_RE = re.compile("|".join(map(re.escape, SYMBOLS)))
_SPACE_BEFORE_PUNCT_RE = re.compile(r" ([.,?!])")


# --- Readers ----------------------------------------------------------------


def _digits(s: str, names: str = PHONE_DIGITS) -> str:
    """Reads a digit string one digit at a time."""
    return "".join(names[int(c)] for c in s)


def _sino(n: int) -> str:
    """Reads a non-negative integer in Sino-Korean (15000 -> 만 오천)."""
    if n == 0:
        return "영"
    if n >= 10 ** (4 * len(SINO_GROUPS)):
        return _digits(str(n), SINO_DIGITS)
    parts = []
    for group, unit in enumerate(SINO_GROUPS):
        chunk = n // 10 ** (4 * group) % 10000
        if not chunk:
            continue
        # 1 is silent before 십/백/천 and before 만 alone, but spoken before 억/조.
        words = "".join(
            ("" if d == 1 and place else SINO_DIGITS[d]) + SINO_PLACES[place]
            for place in range(3, -1, -1)
            if (d := chunk // 10**place % 10)
        )
        parts.append(("" if chunk == 1 and unit == "만" else words) + unit)
    return " ".join(reversed(parts))


def _native(n: int) -> str:
    """Reads 1-99 in native Korean, in the form used before a counter."""
    if n == 20:
        return NATIVE_TWENTY
    tens, ones = divmod(n, 10)
    return NATIVE_TENS[tens] + NATIVE_ONES[ones]


def _read_number(m: re.Match) -> str:
    raw, frac, mag, suf = m.group("int", "frac", "mag", "suf")
    n = int(raw.replace(",", ""))
    plain = not (frac or mag)
    if suf == "월" and plain:
        return MONTHS.get(n, _sino(n) + "월")
    # 제3장 is an ordinal: Sino whatever the counter.
    ordinal = m.start() > 0 and m.string[m.start() - 1] == "제"
    if (
        suf in NATIVE_COUNTERS
        and plain
        and not ordinal
        and 0 < n < 100
        and not (suf in SINO_ON_TENS and n % 10 == 0)
    ):
        words = FIRST_ORDINAL[suf] if n == 1 and suf in FIRST_ORDINAL else _native(n)
    elif raw.startswith("0") and len(raw) > 1 and plain and not suf:
        words = _digits(raw)  # a code such as 007, not a quantity
    else:
        words = _sino(n)
        if frac:
            words += " 점 " + _digits(frac[1:], SINO_DIGITS)
        if mag:
            # 1만/1천/1백 are 만/천/백; 1억 and 1조 keep 일.
            words = ("" if n == 1 and not frac and mag[0] in "만천백" else words) + mag
    return words + (" " + UNITS.get(suf, suf) if suf else "")


def _read_phone(m: re.Match) -> str:
    s = m.group(0)
    groups = re.split(r"[-.]", s) if not s.isdigit() else [s[:3], s[3:-4], s[-4:]]
    return " ".join(_digits(g) for g in groups)


def _read_date(m: re.Match) -> str:
    month, day = int(m["m"]), int(m["d"])
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return m.group(0)
    year = m.groupdict().get("y")
    return (f"{int(year)}년 " if year else "") + f"{month}월 {day}일"


def _read_time(m: re.Match) -> str:
    h, mi, s = int(m[1]), int(m[2]), int(m[3] or 0)
    if h > 24 or mi > 59 or s > 59:
        return m.group(0)
    return f"{h}시" + (f" {mi}분" if mi else "") + (f" {s}초" if s else "")


def _read_latin(m: re.Match) -> str:
    word = m.group(0)
    spoken = LATIN_WORDS.get(word.lower())
    if spoken is None:
        spoken = "".join(LETTER_NAMES[c] for c in word.lower() if c in LETTER_NAMES)
    return spoken


def _known_latin(m: re.Match) -> str:
    return LATIN_WORDS.get(m.group(0).lower(), m.group(0))


def _tidy(text: str) -> str:
    """Collapses whitespace, drops spaces before punctuation, strips the ends."""
    return _SPACE_BEFORE_PUNCT_RE.sub(r"\1", " ".join(text.split()))


# --- Public API -------------------------------------------------------------


def normalize_korean(text: str) -> str:
    """Rewrites written Korean into the Hangul a TTS should speak.

    Args:
        text: Text as the LLM wrote it; may contain digits, dates, times,
            money, phone numbers, units, Latin letters and symbols.

    Returns:
        The spoken form, with whitespace collapsed and the ends stripped.
        Sentence punctuation (``. , ? !``) is kept. Plain Hangul text comes
        back unchanged, and the function is idempotent.
    """
    text = _MARKDOWN_RE.sub("", text.translate(_FOLD))
    # Whole alphanumeric words first, before digits inside them (5G, MP3) are read.
    text = _ALNUM_WORD_RE.sub(_known_latin, text)
    text = _PHONE_RE.sub(_read_phone, text)
    text = _DATE_RE.sub(_read_date, text)
    text = _SHORT_DATE_RE.sub(_read_date, text)
    text = _TIME_RE.sub(_read_time, text)
    text = _CURRENCY_RE.sub(lambda m: m[2] + CURRENCY_PREFIXES[m[1]], text)
    text = _RANGE_SHARED_RE.sub(lambda m: f"{m[1]}{m[3]}~{m[2]}{m[3]}", text)
    text = _RANGE_RE.sub(r"\1에서 ", text)
    text = _FRACTION_RE.sub(r"\2분의 \1", text)  # 3/4 -> 4분의 3 -> 사 분의 삼
    text = _MINUS_RE.sub("마이너스 ", text)
    text = _NUMBER_RE.sub(_read_number, text)
    text = _LATIN_RE.sub(_read_latin, text)
    return _tidy(_SYMBOL_RE.sub(lambda m: SYMBOLS[m.group(0)], text))


def remove_unsupported(text: str, supported: Callable[[str], bool]) -> tuple[str, list[str]]:
    """Drops the characters a TTS vocabulary cannot read.

    Nothing is logged here; the caller logs the returned list so that a
    removal is never silent.

    Args:
        text: Normalized text.
        supported: Predicate telling whether one character can be synthesized.

    Returns:
        The text without unsupported characters (whitespace collapsed, no
        space left before punctuation, stripped), and the removed characters,
        each once, in order of first appearance.
    """
    kept: list[str] = []
    removed: list[str] = []
    for ch in text:
        (kept if supported(ch) else removed).append(ch)
    return _tidy("".join(kept)), list(dict.fromkeys(removed))
