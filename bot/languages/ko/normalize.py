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
* Phone numbers are read digit by digit with ``공`` for 0, one space (a pause)
  between groups (``공일공 일이삼사 오육칠팔``, ``02-120`` -> ``공이 일이공``);
  so are short service numbers next to a phone word (``국번 없이 120``),
  extensions (``내선 1234``) and reception numbers (``접수번호 2026-0001``).
  A hyphen in a phone number or code is never read as a range.
* A lot number's hyphen is read ``에`` (the spoken 의): ``12-3번지`` ->
  ``십이에 삼 번지``.
* Ranges repeat the counter: ``3~5일`` -> ``삼 일에서 오 일``. Between two times or two dates a
  range is read 부터 … 까지: ``9:00-18:00`` -> ``아홉 시부터 열여덟 시까지``, ``3/1~3/5`` ->
  ``삼월 일 일부터 삼월 오 일까지``.
* ``M/D`` is a date (``3/15`` -> ``삼월 십오 일``) unless it is a common fraction (``1/2 컵``); a particle
  after a date or time is fitted to the reading (``3/15는`` -> ``삼월 십오 일은``).
* List numbers ``①``, ``⑴`` and an item's ``(1)`` are read ``일 번,``.
* A bracketed weekday after a date is read in full: ``12월 3일(목)`` -> ``십이월 삼 일 목요일``.
* Sentence punctuation ``. , ? !`` is kept for prosody.
* Web and e-mail addresses and file names are read as dictated (``bot/languages/ko/web.py``): 점, 골뱅이,
  known words and romanized Korean as words, the rest letter by letter.
* ``N/M`` after a genitive (응답자의 4/7이) is a fraction, its particle refitted (칠 분의 사가); speeds read
  시속/초속 (``30km/h`` -> ``시속 삼십 킬로미터``); ``+82 10-…``, ``123-123-5678`` and card numbers digit by
  digit; currency codes (``KRW 5000`` -> ``오천 원``); ``10/30/2024`` and ``29/12/2000`` are dates.

All tables are data so that coverage is extended by adding rows, not code: the
counters and the numeral system each takes (native 세 개, Sino 삼 분, the context
rules of 분 and 번) are in ``bot/data/counters.toml``, the rest is module-level here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from math import gcd
from pathlib import Path

from bot import DATA_DIR
from bot.core.datafile import DataFile, Keys
from bot.languages.ko.web import read_part, read_web

# --- Number words -----------------------------------------------------------

SINO_DIGITS = "영일이삼사오육칠팔구"
PHONE_DIGITS = "공일이삼사오육칠팔구"  # 0 is 공 when digits are read one by one
SINO_PLACES = ("", "십", "백", "천")
SINO_GROUPS = ("", "만", "억", "조", "경")
NATIVE_ONES = ("", "한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉")
NATIVE_TENS = ("", "열", "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔")
NATIVE_TWENTY = "스무"  # 스물 loses its ㄹ before a counter: 스무 명, but 스물한 명
MONTHS = {6: "유월", 10: "시월"}  # irregular month names; the rest are Sino + 월
MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
WEEKDAY_SUFFIX = "요일"  # (목) after a date is read 목요일

# --- Counters and units -----------------------------------------------------

# The counter table, with its references and rules, is data: bot/data/counters.toml.
COUNTERS_FILE = DATA_DIR / "counters.toml"
SYSTEMS = ("native", "sino")


@dataclass(frozen=True)
class CounterContext:
    """When a counter leaves its usual system: 세 분께서 (person, native), 세 번 더 (times, native)."""

    switch_to: str
    after: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    never_after_counter: tuple[str, ...] = ()


@dataclass(frozen=True)
class CounterTable:
    """counters.toml: each counter's numeral system and the exceptions to the plain rule."""

    systems: dict[str, str]
    native_max: int
    native_max_of: dict[str, int] = field(default_factory=dict)
    sino_on_round_tens: tuple[str, ...] = ()
    round_tens_native_before: dict[str, tuple[str, ...]] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)
    contexts: dict[str, CounterContext] = field(default_factory=dict)
    not_followed_by: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def counters(self, system: str) -> tuple[str, ...]:
        return tuple(c for c, s in self.systems.items() if s == system)


def load_counters(path: str | Path = COUNTERS_FILE) -> CounterTable:
    """Reads and checks the counter table; a bad table raises ``ValueError`` naming the file."""
    source = DataFile.read(path, ValueError, "counter table")
    data = source.data

    def check(ok: bool, keys: Keys, what: str) -> None:
        if not ok:
            raise source.error(keys, what)

    systems = source.table(("counters",), default={})
    check(bool(systems), (), "no [counters] table")
    for counter, system in systems.items():
        check(system in SYSTEMS, ("counters", counter), f"counter {counter!r}: system {system!r} is not one of {SYSTEMS}")
    native = {c for c, s in systems.items() if s == "native"}
    native_max = data.get("rules", {}).get("native_max", 99)
    native_max_of = data.get("native_max", {})
    round_tens = tuple(data.get("sino_on_round_tens", {}).get("counters", ()))
    round_tens_before = data.get("sino_on_round_tens", {}).get("unless_before", {})
    for counter in round_tens_before:
        check(counter in round_tens, ("sino_on_round_tens", "unless_before", counter),
              f"unless_before for {counter!r}, which is not in sino_on_round_tens.counters")
    first = data.get("first", {})
    for keys in (*(("native_max", c) for c in native_max_of),
                 *(("sino_on_round_tens", "counters", i) for i in range(len(round_tens))),
                 *(("first", c) for c in first)):
        counter = keys[-1] if isinstance(keys[-1], str) else round_tens[keys[-1]]
        check(counter in native, keys, f"{counter!r} has a native-only rule but is not a native counter")
    contexts = {}
    for counter, rule in data.get("context", {}).items():
        check(counter in systems, ("context", counter), f"context for {counter!r}, which is not in [counters]")
        check(rule.get("switch_to") in SYSTEMS and rule["switch_to"] != systems[counter],
              ("context", counter, "switch_to"), f"context for {counter!r}: switch_to must be the other system")
        contexts[counter] = CounterContext(
            rule["switch_to"], tuple(rule.get("after", ())), tuple(rule.get("before", ())),
            tuple(rule.get("never_after_counter", ())),
        )
    not_followed_by = {}
    for counter, rest in data.get("not_followed_by", {}).items():
        check(counter in systems, ("not_followed_by", counter), f"not_followed_by for {counter!r}, which is not in [counters]")
        not_followed_by[counter] = tuple(rest)
    return CounterTable(dict(systems), native_max, dict(native_max_of), round_tens,
                        {c: tuple(w) for c, w in round_tens_before.items()}, dict(first), contexts, not_followed_by)


COUNTER_TABLE = load_counters()
# Counters that take native numbers (1-99). Longer entries win over shorter ones, so 시간 beats 시
# and 번째 beats 번.
NATIVE_COUNTERS = COUNTER_TABLE.counters("native")
# Counters that take Sino numbers (분 and 번 by default; see COUNTER_TABLE.contexts).
SINO_COUNTERS = COUNTER_TABLE.counters("sino")

# Unit symbols, spoken only right after a number.
UNITS = {
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
    "l": "리터",
    "kHz": "킬로헤르츠",
    "MHz": "메가헤르츠",
    "GHz": "기가헤르츠",
    "Hz": "헤르츠",
    "rpm": "분당 회전수",
    "mAh": "밀리암페어시",
    "mA": "밀리암페어",
    "V": "볼트",
    "W": "와트",
    "N": "뉴턴",
    "h": "시간",  # read as the counter 시간: 24h is 스물네 시간
    "min": "분",
    "s": "초",
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
# ISO codes (any case) before or after the amount: KRW 5000 and 5000 KRW -> 오천 원.
CURRENCY_CODES = {
    "KRW": "원", "USD": "달러", "US$": "달러", "EUR": "유로", "JPY": "엔", "CNY": "위안", "RMB": "위안",
    "GBP": "파운드", "HKD": "홍콩 달러", "HK$": "홍콩 달러", "CAD": "캐나다 달러", "C$": "캐나다 달러",
    "AUD": "호주 달러", "A$": "호주 달러", "NZD": "뉴질랜드 달러", "SGD": "싱가포르 달러", "TWD": "대만 달러",
    "CHF": "스위스 프랑", "AED": "아랍에미리트 디르함", "VND": "동", "THB": "바트", "PHP": "페소", "INR": "루피",
    "RUB": "루블",
}
# A unit over a unit: a speed is 시속/초속 before the number (30km/h -> 시속 삼십 킬로미터, as a road
# sign is read); any other is read "N A 퍼 B" (12kg/kg -> 십이 킬로그램 퍼 킬로그램).
SPEEDS = {"km/h": ("시속", "km"), "km/s": ("초속", "km"), "m/s": ("초속", "m"), "m/min": ("분속", "m")}
PER_WORD = "퍼"

# --- Phone numbers, codes and addresses ------------------------------------

# Area codes longer than the default three digits (02 is two, 050x safe numbers four), used to
# split a phone number written without hyphens.
AREA_CODE_LENGTHS = {"02": 2, "050": 4}
# Short service numbers read digit by digit even without a phone word nearby (일일구, 일일이).
EMERGENCY_NUMBERS = ("112", "119")
# Words that make the number right after them a phone number (국번 없이 120, 다산콜센터(120)).
PHONE_WORDS = (
    "전화", "전화번호", "대표번호", "콜센터", "국번 없이", "국번없이", "연락처", "문의", "상담", "민원실",
    "신고", "핫라인", "☎", "tel", "Tel", "TEL",
)
# Words that make the number right after them a phone number (120번으로 전화, 120 다산콜센터).
PHONE_WORDS_AFTER = ("전화", "연락", "문의", "신고", "걸", "콜센터", "다산콜", "상담")
# Words after which a number is a code read digit by digit, in groups (접수번호 2026-0001).
CODE_WORDS = (
    "접수번호", "신청번호", "민원번호", "예약번호", "관리번호", "고객번호", "주문번호", "인증번호",
    "우편번호", "계좌번호", "사건번호", "등록번호", "처리번호", "번호", "내선", "내선번호", "코드",
)
CODE_GROUP = 4  # a long code without hyphens is read in groups of four digits
# Words after which a number is read digit by digit (카드 끝자리 3456, 마지막 네 자리 7890).
DIGIT_WORDS_BEFORE = ("끝자리", "뒷자리", "앞자리", "끝 자리", "뒷 자리", "앞 자리", "자리", "끝번호", "뒷번호")
COUNTRY_CODE_WORD = "국가번호"  # +82 is 국가번호 팔이: the digits a caller dials after the plus
PHONE_PAUSE = " "  # between the groups of a phone number or code
RANGE_WORD = "에서"  # 3~5일 -> 삼 일에서 오 일; never used for a phone number or code
LOT_HYPHEN = "에"  # 12-3번지 is said 십이의(에) 삼 번지
# Words a road or lot number follows (테헤란로 123-4, 반포동 12-3, 을지로3가 5-1).
ADDRESS_WORDS_END = ("로", "길", "동", "리")

# --- Dates, times and their ranges -----------------------------------------

# M/D is a date or a fraction. It is a fraction when it is a common one (proper, in lowest terms,
# over one of these denominators: 1/2, 2/3, 3/4, 1/10) or a measure follows (1/2 컵, 2/4분기);
# any other M/D that is a real month and day is a date (3/15, 12/25, 12/3). A common fraction is
# a date too next to date words (1/2부터, 오는 3/4) or in a range of dates (3/1~3/5 has 3/5).
FRACTION_DENOMINATORS = (2, 3, 4, 5, 6, 8, 10)
FRACTION_WORDS_AFTER = (
    "컵", "큰술", "작은술", "스푼", "티스푼", "조각", "인분", "분기", "지점", "수준", "가량", "정도", "이상", "이하",
    "만큼", "확률", "비율",
)
# A genitive or a word of a part before M/D makes it a fraction even where a date could be read
# (응답자의 4/7이, 그 중 2/3은); these nouns end in 의 without being a genitive (회의 3/15).
FRACTION_WORDS_BEFORE = ("의", "중", "전체", "무려", "불과", "겨우")
NOT_GENITIVE = ("회의", "문의", "주의", "합의", "논의", "동의", "협의", "심의", "건의", "결의", "강의", "정의", "모의")
DATE_WORDS_AFTER = ("까지", "부터", "일정", "예정", "마감", "당일", "이후", "이전", "오전", "오후")
DATE_WORDS_BEFORE = ("오는", "지난", "매년", "날짜", "날짜는", "일자", "일자는", "기한", "기한은", "기간", "기간은")
QUARTER_WORD = "사분기"  # 2/4분기 is 이 사분기, the second quarter

# A hyphen or tilde between two times or two dates is read 부터 … 까지 (아홉 시부터 열여덟 시까지);
# between other numbers it stays RANGE_WORD (세 명에서 다섯 명, 삼 일에서 오 일: days counted, not
# dates). A word of approximation after the range keeps RANGE_WORD (세 시에서 네 시쯤, … 사이).
RANGE_FROM, RANGE_TO = "부터", "까지"
RANGE_APPROX_AFTER = ("사이", "쯤", "경", "정도", "무렵", "중")
# Parts of the day that may open the second time of a range (오전 9시~오후 6시).
DAY_PARTS = ("오전", "오후", "새벽", "아침", "낮", "저녁", "밤", "익일", "다음 날", "다음날")

# Particles that follow the last sound of the word before: (after a consonant, after a vowel); 으로
# is 로 after ㄹ too. A date or time read out may end otherwise than its digits (3/15는 -> 십오 일은).
PARTICLES = (
    ("은", "는"), ("이", "가"), ("을", "를"), ("과", "와"), ("으로", "로"), ("이나", "나"), ("이랑", "랑"),
    ("이에요", "예요"), ("이라고", "라고"), ("이라서", "라서"), ("이라도", "라도"),
)
# What may follow a particle without making it part of a longer word (3/15는요, 3/15로는).
PARTICLE_TAILS = ("요", "도", "만", "는", "의")

# --- Scores and list numbers ------------------------------------------------

# 3-1 and 2:1 are scores (삼 대 일) next to one of these words; otherwise a range or a time.
SCORE_WORD = "대"
SCORE_WORDS_BEFORE = ("스코어", "점수", "점수는", "결과", "결과는", "경기", "경기는")
SCORE_WORDS_AFTER = (
    "승리", "패배", "이겼", "이기", "졌다", "졌습", "졌어", "졌고", "졌지", "지고", "비겼", "앞서", "뒤지", "뒤져",
    "역전", "끝났", "마쳤", "무승부", "완승", "완패", "승", "패",
)
# Enclosed list numbers: ① and ⑴ are read 일 번 (as an announcer reads a numbered item), and so is
# "(1)" or "1)" opening an item. A comma after it gives the item its pause.
LIST_MARKS = {
    **{chr(0x2460 + i): i + 1 for i in range(20)},  # ① .. ⑳
    **{chr(0x2474 + i): i + 1 for i in range(20)},  # ⑴ .. ⒇
    **{chr(0x2488 + i): i + 1 for i in range(20)},  # ⒈ .. ⒛
    **{chr(0x2776 + i): i + 1 for i in range(10)},  # ❶ .. ❿
    **{chr(0x2780 + i): i + 1 for i in range(10)},  # ➀ .. ➉
    **{chr(0x278A + i): i + 1 for i in range(10)},  # ➊ .. ➓
    **{chr(0x3251 + i): i + 21 for i in range(15)},  # ㉑ .. ㉟
    **{chr(0x32B1 + i): i + 36 for i in range(15)},  # ㊱ .. ㊿
}
LIST_WORD = "번"

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
    "㎜": "mm", "㎖": "ml", "ℓ": "L", "〜": "~", "∼": "~", "–": "-", "−": "-", "\u3000": " ",
}
# Symbols left after numbers are read. "~" and "-" here are the ones not
# between numbers (ranges are handled earlier), so they are only pauses.
SYMBOLS = {
    "&": " 앤 ", "+": " 플러스 ", "·": " ", "ㆍ": " ", "•": " ", "/": " ", "~": " ",
    "-": " ", "—": ", ", "@": " 골뱅이 ", "#": " 샵 ", "*": " 별표 ", "…": "...", "√": " 루트 ",
}

# --- Patterns ---------------------------------------------------------------

_FOLD = str.maketrans(
    {**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, **CHAR_FOLDS}
)


def _alternation(words: Iterable[str], not_followed_by: dict[str, tuple[str, ...]] | None = None) -> str:
    """Regex alternation, longest first; Latin entries must not run into letters.

    ``not_followed_by`` maps an entry to continuations it must not have (부 is no counter in 1부터).
    """
    parts = []
    for w in sorted(words, key=len, reverse=True):
        guard = "" if "가" <= w[0] <= "힣" else "(?![A-Za-z])"
        if blocked := (not_followed_by or {}).get(w):
            guard += f"(?!{'|'.join(map(re.escape, blocked))})"
        parts.append(re.escape(w) + guard)
    return "|".join(parts)


_SUFFIX = _alternation({*UNITS, *NATIVE_COUNTERS, *SINO_COUNTERS}, COUNTER_TABLE.not_followed_by)
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"


def _context_patterns(counter: str, rule: CounterContext) -> tuple:
    """(switch_to, after, before, keep) patterns of one contextual counter; a range counts as one number."""
    c, num = re.escape(counter), r"\d[\d,]*"
    after = before = keep = None
    if rule.after:
        after = re.compile(rf"(?:[ \t]*(?:에서|~|-)[ \t]*{num}[ \t]*{c})?[ \t]*(?:{_alternation(rule.after)})")
    if rule.before:
        before = re.compile(
            rf"(?<![가-힣])(?:{_alternation(rule.before)})[ \t]*(?:{num}[ \t]*{c}[ \t]*(?:에서|~|-)[ \t]*)?$"
        )
    if rule.never_after_counter:
        keep = re.compile(rf"\d[ \t]*(?:{_alternation(rule.never_after_counter)})[ \t]*$")
    return rule.switch_to, after, before, keep


_CONTEXTS = {counter: _context_patterns(counter, rule) for counter, rule in COUNTER_TABLE.contexts.items()}
# What is counted, right before a round ten of 대 (차량 20대, 버스가 30대): then it is native (스무 대).
_ROUND_TENS_BEFORE = {
    counter: re.compile(
        rf"(?<![가-힣])(?:{_alternation(words)})(?:이|가|은|는|을|를|도)?[ \t]*(?:총|약|모두|최대|최소)?[ \t]*$"
    )
    for counter, words in COUNTER_TABLE.round_tens_native_before.items()
}
# Unit symbols that are spoken as a counter of the table, and counted like it.
UNIT_COUNTERS = {"h": "시간", "s": "초", "min": "분"}

# Markdown the LLM may emit: bold/italic markers, code ticks, headings, bullets.
_MARKDOWN_RE = re.compile(r"\*\*|__|`|^[ \t]*(?:#{1,6}|[-*+])[ \t]+", re.M)
_ALNUM_WORD_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*(?![A-Za-z0-9])")
_COUNTER_AHEAD = rf"[ \t]*(?:{_SUFFIX})"
_PHONE_END = r"(?![\d-]|[.,]\d)"
_BUN = r"(?P<bun>[ \t]*번(?![째지호]))?"  # 120번으로: the counter after a digit-read number
_PHONE_RE = re.compile(
    r"(?<![\d.,-])(?:"
    # 02-123-4567, 010.1234.5678, (02) 123-4567, 02)123-4567, 02 123 4567
    r"(?:\(0\d{1,3}\)[ \t]*|0\d{1,3}\)[ \t]*|0\d{1,3}(?:[ \t]*[-.][ \t]*|[ \t]))\d{3,4}(?:[ \t]*[-.][ \t]*|[ \t])\d{4}"
    r"|0\d{8,11}"  # 0212345678, 01012345678, 050412345678
    r"|(?:\(0\d{1,3}\)[ \t]*|0\d{1,3}[ \t]*[-)][ \t]*)\d{3,4}"  # 02-120, 031-1330: area code + short number
    rf"|1[5-9]\d{{2}}[-.]\d{{4}}(?!{_COUNTER_AHEAD}(?<!번))"  # 1588-1234, not 1950-1960년
    rf"){_PHONE_END}{_BUN}"
)
# A number with a country code: +82 10-1234-5678, +1 (123)-123-5678, +44-207-555-1234.
_INTL_PHONE_RE = re.compile(
    r"(?<![\w+])\+(?P<cc>\d{1,3})[ \t.-]*(?P<rest>\(?\d{1,4}\)?(?:[ \t]*[-.]?[ \t]*\(?\d{2,4}\)?){1,3})(?![\d]|[.,]\d)"
)
# Three groups that no range, date or decimal writes (123-123-5678, 555.555.5555, (123) 123-5678,
# 123.456-7890), and a card's four groups of four (1234-5678-9012-3456): digit by digit.
_GROUPED_DIGITS_RE = re.compile(
    r"(?<![\d.,:/~-])(?:(?:\(\d{2,4}\)[ \t]*-?[ \t]*|\d{2,4}[ \t]*[-.][ \t]*)\d{3,4}[ \t]*[-.][ \t]*\d{4}"
    r"|\d{4}(?P<sep>[- ])\d{4}(?P=sep)\d{4}(?P=sep)\d{4})"
    rf"(?![\d]|[.,-]\d|{_COUNTER_AHEAD})"
)
# A number after a word of digits (카드 끝자리 3456, 마지막 4자리 7890): digit by digit.
_DIGIT_RUN_RE = re.compile(
    rf"(?P<ctx>(?:{_alternation(DIGIT_WORDS_BEFORE)})[ \t]*(?:[:：]|는|은|가)?[ \t]*)(?P<num>\d{{2,8}})"
    rf"(?![\d]|[.,]\d|{_COUNTER_AHEAD})"
)
_EMERGENCY_RE = re.compile(
    rf"(?<![\d.,~-])(?:{'|'.join(EMERGENCY_NUMBERS)})(?![\d]|[.,]\d|{_COUNTER_AHEAD}|[ \t]*[~-])"
)
# A 3-4 digit service number starting with 1, next to a phone word before or after it.
_SERVICE_RE = re.compile(
    rf"(?P<ctx>(?:{_alternation(PHONE_WORDS)})(?:[ \t:：(]|는|은|이|가|으로|로|번호는?)*)"
    rf"(?P<num>1\d{{2,3}})(?![\d]|[.,]\d|[ \t]*[~-]|{_COUNTER_AHEAD}(?<!번)){_BUN}"
    rf"|(?<![\d.,~-])(?P<num2>1\d{{2,3}})(?P<bun2>[ \t]*번)?"
    rf"(?=[ \t]*\(?(?:으로|로|에서|에|을|를)?[ \t]*(?:{'|'.join(PHONE_WORDS_AFTER)}))"
)
# A number after a code word: digits in groups, whatever its hyphens (접수번호는 2026-0001).
_CODE_RE = re.compile(
    rf"(?P<ctx>(?:{_alternation(CODE_WORDS)})[ \t]*(?:[:：]|는|은|이|가|를|을)?[ \t]*\(?(?:[A-Za-z]{{1,3}}-?)?)"
    rf"(?P<num>\d+(?:-\d+)*)(?![\d]|[.,]\d|[ \t]*[-.)][ \t]*\d|{_COUNTER_AHEAD}(?<!번)){_BUN}"
)
# Hyphenated digit groups with a leading zero after the first are codes, not ranges (2026-0001).
_ZERO_CODE_RE = re.compile(rf"(?<![\d.,:~-])(?P<num>\d+(?:-\d+)*-0\d+(?:-\d+)*)(?![\d]|[.,]\d){_BUN}")
_LOT_RE = re.compile(
    rf"(?P<pre>(?:[가-힣\d](?:{'|'.join(ADDRESS_WORDS_END)})|\d가|산)[ \t]*)(?P<a>\d+)-(?P<b>\d+)"
    rf"(?![\d-]|[.,]\d|{_COUNTER_AHEAD}(?<!번지))"
    r"|(?<![\d.,-])(?P<a2>\d+)-(?P<b2>\d+)(?=[ \t]*번지)"
)
# A particle right after a date or time, to be matched to how the reading ends (3/15는 -> 십오 일은).
_PARTICLE = (
    rf"(?:(?P<p>{_alternation({form for pair in PARTICLES for form in pair})})"
    rf"(?=(?:{'|'.join(PARTICLE_TAILS)})?(?![가-힣])))"
)
# M/D/YYYY (10/30/2024) or, where the first number cannot be a month, D/M/YYYY (29/12/2000).
_MDY_RE = re.compile(
    r"(?<![\d/.-])(?P<a>\d{1,2})(?P<s>[/.-])(?P<b>\d{1,2})(?P=s)(?P<y>\d{4})(?![\d]|[.,]\d)"
    rf"{_PARTICLE}?"
)
# A year or month written against the next number (2023년3월1일): a space, so each is read apart.
_FUSED_DATE_RE = re.compile(r"(?<=\d[년월])(?=\d)")
_DATE_RE = re.compile(
    r"(?<!\d)(?P<y>\d{4})([-./]) ?(?P<m>\d{1,2})\2 ?(?P<d>\d{1,2})(?:\.(?=[ \t]*[(가-힣]))?(?!\d)"
    rf"{_PARTICLE}?"
)
# M/D and M.D are only taken for a date when a weekday follows (3/5(목), 12. 3.(목));
# otherwise a fraction or a decimal.
_SHORT_DATE_RE = re.compile(
    r"(?<![\d/.])(?P<m>\d{1,2})[ \t]?[/.][ \t]?(?P<d>\d{1,2})\.?(?=[ \t]*\([월화수목금토일](?:요일)?\))"
)
# 월~금, and a range of dates with weekdays (3/2(월)~3/6(금)): the "~" is a range word.
_WEEKDAY_RANGE_RE = re.compile(
    r"(?<![가-힣])(?P<a>[월화수목금토일])(?:요일)?[ \t]*~[ \t]*(?P<b>[월화수목금토일])(?:요일)?(?![가-힣])"
    r"|(?P<paren>\([월화수목금토일](?:요일)?\))[ \t]*[~-][ \t]*(?=\d)"
)
# A weekday in brackets right after a date is read in full: 3일(목) -> 3일 목요일, 3일 (목요일) -> 3일 목요일.
_DATE_WEEKDAY_RE = re.compile(r"(?<=\d일)[ \t]*\((?P<w>[월화수목금토일])(?:요일)?\)")
_TIME_RE = re.compile(rf"(?<![\d:])(\d{{1,2}}):(\d{{2}})(?::(\d{{2}}))?(?![\d:]){_PARTICLE}?")
# M/D without a weekday: a date or a fraction, see FRACTION_DENOMINATORS.
_SLASH_DATE_RE = re.compile(rf"(?<![\d/.,:√])(?P<m>\d{{1,2}})/(?P<d>\d{{1,2}})(?![\d/]|[.,]\d){_PARTICLE}?")
_FRACTION_BEFORE_RE = re.compile(
    rf"(?:(?<=[가-힣])의|(?<![가-힣])(?:{_alternation(w for w in FRACTION_WORDS_BEFORE if w != '의')}))[ \t]*$"
)
_NOT_GENITIVE_RE = re.compile(rf"(?<![가-힣])(?:{_alternation(NOT_GENITIVE)})[ \t]*$")
_FRACTION_AFTER_RE = re.compile(rf"[ \t]*(?:{_alternation(FRACTION_WORDS_AFTER)})")
_DATE_AFTER_RE = re.compile(
    rf"[ \t]*(?:{_alternation(DATE_WORDS_AFTER)}|\(|[~-][ \t]*\d{{1,2}}/\d)|[ \t]+\d{{1,2}}(?::\d\d|[ \t]*시(?!간))"
)
_DATE_BEFORE_RE = re.compile(
    rf"(?:(?<![가-힣])(?:{_alternation(DATE_WORDS_BEFORE)})[ \t]*|\d/\d{{1,2}}[ \t]*[~-][ \t]*)$"
)
_QUARTER_RE = re.compile(r"(?<![\d/.,])(?P<n>[1-4])/4[ \t]*분기")
# Two times, or two dates (with a time or not), joined by "-" or "~" (after the rules above have
# written them as N시 N분 and N월 N일): 부터 … 까지. The second date may be a bare day (3월 1일~5일).
_T = r"\d{1,2}[ \t]*시(?!간)(?:[ \t]*\d{1,2}[ \t]*분)?(?:[ \t]*\d{1,2}[ \t]*초)?(?:[ \t]*반)?"
_D = r"(?:\d{4}[ \t]*년[ \t]*)?\d{1,2}[ \t]*월[ \t]*\d{1,2}[ \t]*일(?:[ \t]*[월화수목금토일]요일)?"
_DAY = rf"\d{{1,2}}[ \t]*일(?:[ \t]*[월화수목금토일]요일)?|\d{{1,2}}(?![\d.,:/]|[ \t]*(?:{_SUFFIX}))"
_PART = rf"(?:(?:{_alternation(DAY_PARTS)})[ \t]*)?"
_APPROX = "|".join(
    re.escape(w) + ("(?=[에은이의도만]|(?![가-힣]))" if len(w) == 1 else "")
    for w in sorted(RANGE_APPROX_AFTER, key=len, reverse=True)
)
_DATETIME_RANGE_RE = re.compile(
    rf"(?<![\d.,])(?:(?P<a>{_D}(?:[ \t]+{_PART}{_T})?)[ \t]*[~-][ \t]*"
    rf"(?P<b>{_PART}{_T}|(?:{_D}|{_DAY})(?:[ \t]+{_PART}{_T})?)"
    rf"|(?P<a2>{_T})[ \t]*[~-][ \t]*(?P<b2>{_PART}{_T}))"
    rf"(?P<approx>[ \t]*(?:{_APPROX}))?(?P<end>{RANGE_TO}|에(?=(?:는|도|만)?(?![가-힣])))?{_PARTICLE}?"
)
_SCORE_AFTER = "|".join(
    re.escape(w) + ("(?![가-힣])" if len(w) == 1 else "") for w in sorted(SCORE_WORDS_AFTER, key=len, reverse=True)
)
_SCORE_RE = re.compile(
    rf"(?:(?P<ctx>(?<![가-힣])(?:{_alternation(SCORE_WORDS_BEFORE)})[ \t:]*)|(?<![\d.,:~/-]))"
    rf"(?P<a>\d{{1,2}})[ \t]*[-:][ \t]*(?P<b>\d{{1,2}})(?![\d:~/-]|[.,]\d|{_COUNTER_AHEAD})"
    rf"(?(ctx)|(?=[ \t]*(?:으로|로)?[ \t]*(?:{_SCORE_AFTER})))"
)
_LIST_MARK_RE = re.compile(rf"(?P<mark>[{''.join(LIST_MARKS)}])(?P<bun>[ \t]*번(?![째지호]))?")
# "(1)" opening an item (at the start, or after a space or punctuation), or "1)" opening a line.
_LIST_ITEM_RE = re.compile(
    r"(?:(?<![^\s:：,.;])\((?P<n>\d{1,2})\)|^[ \t]*(?P<n2>\d{1,2})\))(?=[ \t]*[가-힣A-Za-z])(?![ \t]*번)", re.M
)
_WORD_AHEAD_RE = re.compile(r"[ \t]*[가-힣A-Za-z0-9\"'「(]")
_CURRENCY_RE = re.compile(
    rf"([{re.escape(''.join(CURRENCY_PREFIXES))}])\s*({_NUM}[조억만천백]*){_PARTICLE}?"
)
_CODES = "|".join(re.escape(c) for c in sorted(CURRENCY_CODES, key=len, reverse=True))
_CODE_BEFORE_RE = re.compile(
    rf"(?<![A-Za-z])(?P<code>{_CODES})[ \t]*(?P<amt>{_NUM}[조억만천백]*)(?!\d){_PARTICLE}?", re.IGNORECASE
)
_CODE_AFTER_RE = re.compile(
    rf"(?<![\d.,])(?P<amt>{_NUM}[조억만천백]*)[ \t]*(?P<code>{_CODES})(?![A-Za-z]){_PARTICLE}?"
)  # upper case only after the amount: 10 php is not money
_UNIT_ALT = _alternation(UNITS)
_FRACTION_NUM = rf"(?:\d+[ \t]*(?:과|와)[ \t]*)?√?{_NUM}(?:/√?\d+)?"
_SPEED_RE = re.compile(
    rf"(?P<num>{_FRACTION_NUM})[ \t]*(?P<unit>{'|'.join(map(re.escape, sorted(SPEEDS, key=len, reverse=True)))})"
    r"(?![A-Za-z/])"
)
_PER_UNIT_RE = re.compile(rf"(?P<num>{_NUM})[ \t]*(?P<a>{_UNIT_ALT})/(?P<b>{_UNIT_ALT})(?![/])")
# A range whose counter is written once (3~5일) gets it on both ends first.
_RANGE_SHARED_RE = re.compile(rf"(?<!\d)({_NUM})[ \t]*[~-][ \t]*({_NUM})[ \t]*({_SUFFIX})")
_RANGE_RE = re.compile(rf"({_NUM}[조억만천백]*(?:[ \t]*(?:{_SUFFIX}))?)[ \t]*[~-][ \t]*(?=\d)")
_FRACTION_RE = re.compile(rf"(?<![\d/])(?P<rn>√?)(?P<n>\d+)/(?P<rd>√?)(?P<d>\d+)(?![\d/]){_PARTICLE}?")
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


def _counter_system(suf: str, m: re.Match) -> str:
    """The numeral system of the counter ``suf`` after the number ``m``, its context considered."""
    system = COUNTER_TABLE.systems.get(suf, "sino")
    context = _CONTEXTS.get(suf)
    if context is None:
        return system
    switch_to, after, before, keep = context
    prefix = m.string[: m.start()]
    if keep and keep.search(prefix):
        return system
    if (after and after.match(m.string, m.end())) or (before and before.search(prefix)):
        return switch_to
    return system


def _native_count(n: int, suf: str, m: re.Match | None = None) -> str | None:
    """``n`` before the native counter ``suf`` (101개 -> 백한), or None where it reads Sino."""
    table = COUNTER_TABLE
    if suf in table.sino_on_round_tens and n % 10 == 0:
        before = _ROUND_TENS_BEFORE.get(suf)
        if not (m and before and before.search(m.string, 0, m.start())):
            return None
    top = table.native_max_of.get(suf, table.native_max)
    if 0 < n <= top:
        return table.first[suf] if n == 1 and suf in table.first else _native(n)
    if top >= 99 and n > 100 and 0 < n % 100 < 10:
        # Sino hundreds, native units: 백한 개, 만 두 명 (the last Sino digit word is the units digit).
        return _sino(n)[:-1] + NATIVE_ONES[n % 10]
    return None


def _read_number(m: re.Match) -> str:
    raw, frac, mag, suf = m.group("int", "frac", "mag", "suf")
    n = int(raw.replace(",", ""))
    plain = not (frac or mag)
    if suf == "월" and plain:
        return MONTHS.get(n, _sino(n) + "월")
    # 제3장 is an ordinal: Sino whatever the counter.
    ordinal = m.start() > 0 and m.string[m.start() - 1] == "제"
    counter = UNIT_COUNTERS.get(suf, suf)  # 24h is counted as 24시간
    native = suf and plain and not ordinal and _counter_system(counter, m) == "native"
    words = _native_count(n, counter, m) if native else None
    if words is None and raw.startswith("0") and len(raw) > 1 and plain and not suf:
        words = _digits(raw.replace(",", ""))  # a code such as 007, not a quantity
    elif words is None:
        words = _sino(n)
        if frac:
            words += " 점 " + _digits(frac[1:], SINO_DIGITS)
        if mag:
            # 1만/1천/1백 are 만/천/백; 1억 and 1조 keep 일.
            words = ("" if n == 1 and not frac and mag[0] in "만천백" else words) + mag
    return words + (" " + UNITS.get(suf, suf) if suf else "")


def _read_phone(m: re.Match) -> str:
    s = m.group(0)[: m.start("bun") - m.start()] if m["bun"] else m.group(0)
    if s.isdigit() and len(s) > 8:
        area = AREA_CODE_LENGTHS.get(s[:2], AREA_CODE_LENGTHS.get(s[:3], 3))
        groups = [s[:area], s[area:-4], s[-4:]]
    else:
        groups = re.findall(r"\d+", s)
    return PHONE_PAUSE.join(_digits(g) for g in groups) + (" 번" if m["bun"] else "")


def _read_intl_phone(m: re.Match) -> str:
    groups = re.findall(r"\d+", m["rest"])
    if len(groups) < 2 or sum(map(len, groups)) < 4:
        return m.group(0)
    return f"{COUNTRY_CODE_WORD} {_digits(m['cc'])} " + PHONE_PAUSE.join(_digits(g) for g in groups)


def _read_grouped(m: re.Match) -> str:
    return PHONE_PAUSE.join(_digits(g) for g in re.findall(r"\d+", m.group(0)))


def _read_code(digits: str) -> str:
    """A code digit by digit: hyphen groups kept, a long unbroken run cut into fours."""
    groups = digits.split("-")
    if len(groups) == 1 and len(digits) > 6:
        groups = [digits[i : i + CODE_GROUP] for i in range(0, len(digits), CODE_GROUP)]
    return PHONE_PAUSE.join(_digits(g) for g in groups if g)


def _read_service(m: re.Match) -> str:
    if m["num2"]:
        return _digits(m["num2"]) + (" 번" if m["bun2"] else "")
    return m["ctx"] + _digits(m["num"]) + (" 번" if m["bun"] else "")


def _read_lot(m: re.Match) -> str:
    if m["a2"]:
        return f"{m['a2']}{LOT_HYPHEN} {m['b2']}"
    return f"{m['pre']}{m['a']}{LOT_HYPHEN} {m['b']}"


def _particle(before: str, particle: str | None) -> str:
    """``particle`` in the form that follows the last syllable of ``before`` (일 takes 은, 시 takes 는)."""
    if not particle:
        return ""
    code = ord(before[-1]) - 0xAC00
    if not 0 <= code < 11172:
        return particle
    final = code % 28  # 0: none, 8: ㄹ
    for after_consonant, after_vowel in PARTICLES:
        if particle in (after_consonant, after_vowel):
            if after_consonant == "으로":
                return after_vowel if final in (0, 8) else after_consonant
            return after_consonant if final else after_vowel
    return particle


def _read_date(m: re.Match) -> str:
    month, day = int(m["m"]), int(m["d"])
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return m.group(0)
    year = m.groupdict().get("y")
    words = (f"{int(year)}년 " if year else "") + f"{month}월 {day}일"
    return words + _particle(words, m.groupdict().get("p"))


def _read_mdy(m: re.Match) -> str:
    a, b = int(m["a"]), int(m["b"])
    if 1 <= a <= 12 and 1 <= b <= MONTH_DAYS[a - 1]:
        month, day = a, b
    elif 1 <= b <= 12 and 1 <= a <= MONTH_DAYS[b - 1]:
        month, day = b, a
    else:
        return m.group(0)
    words = f"{int(m['y'])}년 {month}월 {day}일"
    return words + _particle(words, m["p"])


def _read_fraction(m: re.Match) -> str:
    """N/M as M분의 N (√ kept on its number), the particle after it fitted to how N is read."""
    apart = " " if m.start() and "가" <= m.string[m.start() - 1] <= "힣" else ""  # 1과1/2: 일과 이 분의 일
    return f"{apart}{m['rd']}{m['d']}분의 {m['rn']}{m['n']}" + _particle(_sino(int(m["n"])), m["p"])


def _read_currency_code(m: re.Match) -> str:
    word = CURRENCY_CODES[next(c for c in CURRENCY_CODES if c.lower() == m["code"].lower())]
    return f"{m['amt']} {word}" + _particle(word, m["p"])


def _read_speed(m: re.Match) -> str:
    word, unit = SPEEDS[m["unit"]]
    said = re.search(rf"{word}[ \t]*$", m.string[: m.start()])  # 초속 10m/s: 초속 is said once
    return f"{'' if said else word + ' '}{m['num']}{unit}"


def _read_slash_date(m: re.Match) -> str:
    """M/D as a date, or left as written for the fraction rule (see FRACTION_DENOMINATORS)."""
    month, day = int(m["m"]), int(m["d"])
    if not (1 <= month <= 12 and 1 <= day <= MONTH_DAYS[month - 1]):
        return m.group(0)
    after, before = m.string[m.end("d") :], m.string[: m.start()]
    if _FRACTION_AFTER_RE.match(after):
        return m.group(0)
    if _FRACTION_BEFORE_RE.search(before) and not _NOT_GENITIVE_RE.search(before):
        return m.group(0)
    common_fraction = month < day and day in FRACTION_DENOMINATORS and gcd(month, day) == 1
    if common_fraction and not (_DATE_AFTER_RE.match(after) or _DATE_BEFORE_RE.search(before)):
        return m.group(0)
    return _read_date(m)


def _read_datetime_range(m: re.Match) -> str:
    a, b = (m["a"], m["b"]) if m["a"] else (m["a2"], m["b2"])
    rest = m.string[m.end("b" if m["a"] else "b2") : m.end()]
    if b.isdigit():  # 3/1~5: a later day of the same month
        if int(b) <= int(re.findall(r"(\d+)[ \t]*일", a)[-1]):
            return m.group(0)
        b += "일"
    if m["approx"]:
        return f"{a}{RANGE_WORD} {b}{rest}"
    words = f"{a}{RANGE_FROM} {b}{RANGE_TO}"
    return words + _particle(words, m["p"])


def _read_score(m: re.Match) -> str:
    return (m["ctx"] or "") + f"{_sino(int(m['a']))} {SCORE_WORD} {_sino(int(m['b']))}"


def _read_list_mark(m: re.Match) -> str:
    n = LIST_MARKS[m["mark"]] if m.groupdict().get("mark") else int(m["n"] or m["n2"])
    words = f"{_sino(n)} {LIST_WORD}"
    if m.groupdict().get("bun"):
        return words
    return words + (", " if _WORD_AHEAD_RE.match(m.string, m.end()) else "")


def _read_weekday_range(m: re.Match) -> str:
    if m["paren"]:
        return m["paren"] + RANGE_WORD + " "
    return f"{m['a']}요일{RANGE_WORD} {m['b']}요일"


def _read_time(m: re.Match) -> str:
    h, mi, s = int(m[1]), int(m[2]), int(m[3] or 0)
    if h > 24 or mi > 59 or s > 59:
        return m.group(0)
    words = f"{h}시" + (f" {mi}분" if mi else "") + (f" {s}초" if s else "")
    return words + _particle(words, m["p"])


def _read_latin(m: re.Match) -> str:
    word = m.group(0)
    spoken = LATIN_WORDS.get(word.lower())
    if spoken is None:
        spoken = "".join(LETTER_NAMES[c] for c in word.lower() if c in LETTER_NAMES)
    return spoken


def _spell(word: str) -> str:
    """A Latin word as a known word or letter by letter."""
    return LATIN_WORDS.get(word.lower()) or "".join(LETTER_NAMES[c] for c in word.lower() if c in LETTER_NAMES)


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
    # Addresses and file names first: their dots are not decimals, their parts not units.
    text = read_web(text, _spell, _digits)
    text = _CODE_BEFORE_RE.sub(_read_currency_code, text)
    text = _CODE_AFTER_RE.sub(_read_currency_code, text)
    text = _SPEED_RE.sub(_read_speed, text)
    text = _PER_UNIT_RE.sub(lambda m: f"{m['num']}{m['a']} {PER_WORD} {UNITS[m['b']]}", text)
    text = _FUSED_DATE_RE.sub(" ", text)
    # Whole alphanumeric words first, before digits inside them (5G, MP3) are read.
    text = _ALNUM_WORD_RE.sub(_known_latin, text)
    # Codes and phone numbers before anything reads their hyphens as ranges.
    text = _INTL_PHONE_RE.sub(_read_intl_phone, text)
    text = _PHONE_RE.sub(_read_phone, text)
    text = _GROUPED_DIGITS_RE.sub(_read_grouped, text)
    text = _DIGIT_RUN_RE.sub(lambda m: m["ctx"] + _digits(m["num"]), text)
    text = _CODE_RE.sub(lambda m: m["ctx"] + _read_code(m["num"]) + (" 번" if m["bun"] else ""), text)
    text = _SERVICE_RE.sub(_read_service, text)
    text = _EMERGENCY_RE.sub(lambda m: _digits(m.group(0)), text)
    text = _LIST_MARK_RE.sub(_read_list_mark, text)
    text = _LIST_ITEM_RE.sub(_read_list_mark, text)
    text = _LOT_RE.sub(_read_lot, text)
    text = _SCORE_RE.sub(_read_score, text)
    text = _MDY_RE.sub(_read_mdy, text)
    text = _DATE_RE.sub(_read_date, text)
    text = _SHORT_DATE_RE.sub(_read_date, text)
    text = _QUARTER_RE.sub(lambda m: f"{SINO_DIGITS[int(m['n'])]} {QUARTER_WORD}", text)
    text = _SLASH_DATE_RE.sub(_read_slash_date, text)
    text = _TIME_RE.sub(_read_time, text)
    text = _ZERO_CODE_RE.sub(lambda m: _read_code(m["num"]) + (" 번" if m["bun"] else ""), text)
    # Weekdays after dates first, so that a range of such dates is a range of dates.
    text = _DATE_WEEKDAY_RE.sub(lambda m: " " + m["w"] + WEEKDAY_SUFFIX, text)
    text = _WEEKDAY_RANGE_RE.sub(_read_weekday_range, text)
    text = _CURRENCY_RE.sub(lambda m: m[2] + CURRENCY_PREFIXES[m[1]] + _particle(CURRENCY_PREFIXES[m[1]], m["p"]), text)
    text = _RANGE_SHARED_RE.sub(lambda m: f"{m[1]}{m[3]}~{m[2]}{m[3]}", text)
    text = _DATETIME_RANGE_RE.sub(_read_datetime_range, text)
    text = _RANGE_RE.sub(rf"\1{RANGE_WORD} ", text)
    text = _FRACTION_RE.sub(_read_fraction, text)  # 3/4 -> 4분의 3 -> 사 분의 삼
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


def read_address_part(part: str) -> str:
    """One part of a web or e-mail address as ``normalize_korean`` says it ("hotmail" -> "핫메일")."""
    return read_part(part, _spell, _digits)


def read_digits(digits: str, sep: str = ", ") -> str:
    """Reads a digit string one digit at a time, 공 for 0 ("2026" -> "이, 공, 이, 육").

    Non-digits are skipped, so "2026-0001" reads the same as "20260001".
    """
    return sep.join(PHONE_DIGITS[int(c)] for c in digits if c.isdigit())
