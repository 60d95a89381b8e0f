"""Table-driven tests for the Korean TTS text normalizer."""

from pathlib import Path

import pytest

from bot.languages.ko.normalize import normalize_korean, read_digits, remove_unsupported
from tests.conftest import ROOT

CASES_FILE = ROOT / "tests" / "data" / "normalize_cases.tsv"
# Issue 33: slash dates, 부터 … 까지 ranges of times and dates, list numbers, the copies counter 부.
ISSUE_33_FILE = CASES_FILE.with_name("normalize_cases_33.tsv")
# Issue 44: web addresses, fractions, units and speeds, phone shapes, currency codes, date orders, 대.
ISSUE_44_FILE = CASES_FILE.with_name("normalize_cases_44.tsv")
RANGE_WORDS = ("에서", "부터", "까지")
PHONE_CATEGORIES = ("phone", "service", "extension", "code", "card")


def read_cases(path: Path = CASES_FILE) -> list[tuple[str, str, str]]:
    """(category, written, spoken) rows of the normalizer table."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("category\t"):
            continue
        category, written, spoken = line.split("\t")
        rows.append((category, written, spoken))
    return rows


TABLE = read_cases()
ISSUE_33 = read_cases(ISSUE_33_FILE)
ISSUE_44 = read_cases(ISSUE_44_FILE)
# Cases a TSV line cannot hold (tabs, newlines, nothing at all).
SPECIAL = [("text", "  줄\n바꿈\t탭 ", "줄 바꿈 탭"), ("text", "", "")]
CASES = [(written, spoken) for _, written, spoken in TABLE + SPECIAL]
ALL_CASES = CASES + [(written, spoken) for _, written, spoken in ISSUE_33 + ISSUE_44]


def test_table_size_and_categories():
    assert len(CASES) >= 400
    categories = {c for c, _, _ in TABLE}
    assert categories >= {"phone", "service", "extension", "code", "address", "weekday", "money", "percent",
                          "decimal", "ordinal", "native", "unit", "range"}


@pytest.mark.parametrize(("text", "spoken"), CASES)
def test_normalize_korean(text, spoken):
    assert normalize_korean(text) == spoken


def test_issue_33_table_covers_every_family():
    assert len(ISSUE_33) >= 60
    assert {c for c, _, _ in ISSUE_33} >= {"slash_date", "date_range", "time_range", "list", "copies", "fraction",
                                           "range", "score", "phone", "code"}
    assert not {w for _, w, _ in ISSUE_33} & {w for _, w, _ in TABLE}, "rows already in normalize_cases.tsv"


@pytest.mark.parametrize(("category", "text", "spoken"), ISSUE_33)
def test_issue_33_rows(category, text, spoken):
    assert normalize_korean(text) == spoken


def test_issue_44_table_covers_every_family():
    assert len(ISSUE_44) >= 70
    assert {c for c, _, _ in ISSUE_44} >= {"web", "email", "file", "fraction", "unit", "speed", "phone", "card",
                                           "currency", "date_order", "counter", "near_miss"}
    assert not {w for _, w, _ in ISSUE_44} & {w for _, w, _ in TABLE + ISSUE_33}, "rows already in another table"


@pytest.mark.parametrize(("category", "text", "spoken"), ISSUE_44)
def test_issue_44_rows(category, text, spoken):
    assert normalize_korean(text) == spoken


@pytest.mark.parametrize("text", [text for text, _ in ALL_CASES])
def test_normalize_is_idempotent(text):
    once = normalize_korean(text)
    assert normalize_korean(once) == once


@pytest.mark.parametrize("text", [text for text, _ in ALL_CASES])
def test_output_has_no_digits_or_latin(text):
    spoken = normalize_korean(text)
    assert not any(ch.isascii() and ch.isalnum() for ch in spoken), spoken


# Every phone-number, service-number, extension and code case whose text has no range of its own.
PHONE_CASES = [
    written
    for category, written, _ in TABLE + ISSUE_33 + ISSUE_44
    if category in PHONE_CATEGORIES and "~" not in written and not any(w in written for w in RANGE_WORDS)
]


@pytest.mark.parametrize("text", PHONE_CASES)
@pytest.mark.parametrize("frame", ["{}", "문의는 {}로 주세요.", "{} (평일)", "번호는 {}입니다"])
def test_phone_numbers_never_read_as_ranges(text, frame):
    spoken = normalize_korean(frame.format(text))
    assert not any(word in spoken for word in RANGE_WORDS), spoken


@pytest.mark.parametrize(
    ("digits", "sep", "spoken"),
    [("2026", ", ", "이, 공, 이, 육"), ("20260001", " ", "이 공 이 육 공 공 공 일"), ("2026-0001", "", "이공이육공공공일"),
     ("", ", ", "")],
)
def test_read_digits(digits, sep, spoken):
    assert read_digits(digits, sep) == spoken


def test_read_digits_default_separator():
    assert read_digits("0109") == "공, 일, 공, 구"


HANGUL_AND_PUNCT = lambda ch: "가" <= ch <= "힣" or ch in " .,?!"  # noqa: E731

REMOVE_CASES = [
    ("안녕하세요.", "안녕하세요.", []),
    ("문의: 공이 (평일)", "문의 공이 평일", [":", "(", ")"]),
    ("좋아요 ♥ ♥!", "좋아요!", ["♥"]),
    ("a♥b", "", ["a", "♥", "b"]),
    ("", "", []),
]


@pytest.mark.parametrize(("text", "cleaned", "removed"), REMOVE_CASES)
def test_remove_unsupported(text, cleaned, removed):
    assert remove_unsupported(text, HANGUL_AND_PUNCT) == (cleaned, removed)
