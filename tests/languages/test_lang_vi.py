"""Vietnamese as a language of the line (issue 38): its normalizer, digits, calendar phrases, pack, shortcuts."""

import re
import tomllib
import unicodedata
from datetime import date, datetime
from zoneinfo import ZoneInfo

import holidays
import pytest

from bot import languages
from bot.dialog.calendar import Hours, LineCalendar
from bot.dialog.domain import load_domain
from bot.dialog.language_packs import load_language
from bot.languages.vi.normalize import number_words
from tests.conftest import ROOT

VI = ROOT / "bot" / "languages" / "vi"
SEOUL = ZoneInfo("Asia/Seoul")


def _cases() -> list[tuple[str, str]]:
    rows = []
    for line in (ROOT / "tests" / "data" / "normalize_vi.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            written, spoken = line.split("\t")
            rows.append((written, spoken))
    return rows


CASES = _cases()


def test_the_table_has_at_least_fifty_cases():
    assert len(CASES) >= 50


@pytest.mark.parametrize(("written", "spoken"), CASES, ids=[c[0] for c in CASES])
def test_normalize(written, spoken):
    assert languages.get("vi").normalize(written) == spoken


@pytest.mark.parametrize(("n", "words"), [
    (0, "không"), (5, "năm"), (15, "mười lăm"), (21, "hai mươi mốt"), (105, "một trăm lẻ năm"),
    (1001, "một nghìn không trăm lẻ một"), (2026, "hai nghìn không trăm hai mươi sáu"),
    (15000, "mười lăm nghìn"), (1_000_000, "một triệu"), (1_200_000_000, "một tỷ hai trăm triệu"),
])
def test_number_words(n, words):
    assert number_words(n) == words


def test_read_digits():
    vi = languages.get("vi")
    assert vi.read_digits("20260042") == "hai, không, hai, sáu, không, không, bốn, hai"
    assert vi.read_digits("2026-0042") == vi.read_digits("20260042")
    assert vi.read_digits("010-1234-5678") == "không, một, không, một, hai, ba, bốn, năm, sáu, bảy, tám"


def test_the_language_itself():
    vi = languages.get("vi")
    assert "vi" in languages.known()
    assert (vi.code, vi.name, vi.label, vi.tag, vi.say_voice, vi.holiday_locale) == \
        ("vi", "Tiếng Việt", "VI", "vi", "vi-VN", None)
    assert vi.folder == VI


# --- the calendar's phrases -----------------------------------------------------------------------

def _calendar(*specs, breaks=("12:00-13:00",), closed=()):
    return LineCalendar(Hours.parse(list(specs or ["mon-fri 09:00-18:00"]), list(breaks)), extra_closed=list(closed))


def test_times():
    vi = languages.get("vi")
    assert [vi.time(h, m) for h, m in ((9, 0), (12, 0), (13, 30), (18, 0), (19, 0), (0, 0))] == \
        ["9 giờ sáng", "12 giờ trưa", "1 giờ 30 chiều", "6 giờ chiều", "7 giờ tối", "12 giờ đêm"]
    assert vi.date(date(2026, 9, 28)) == "thứ Hai, ngày 28 tháng 9"
    assert vi.date(date(2026, 9, 27)) == "Chủ nhật, ngày 27 tháng 9"


def test_hours_phrase():
    assert _calendar().hours_phrase(language="vi") == \
        "từ thứ Hai đến thứ Sáu, từ 9 giờ sáng đến 6 giờ chiều; nghỉ trưa từ 12 giờ trưa đến 1 giờ chiều"
    assert _calendar("mon-fri 09:00-18:00", "sat 09:00-13:30", breaks=()).hours_phrase(language="vi") == \
        "từ thứ Hai đến thứ Sáu, từ 9 giờ sáng đến 6 giờ chiều; thứ Bảy, từ 9 giờ sáng đến 1 giờ 30 chiều"
    assert _calendar("mon,wed 10:00-19:00", breaks=("15:00-15:30",)).hours_phrase(language="vi") == \
        "thứ Hai và thứ Tư, từ 10 giờ sáng đến 7 giờ tối; nghỉ giải lao từ 3 giờ chiều đến 3 giờ 30 chiều"
    assert _calendar("24/7", breaks=()).hours_phrase(language="vi") == "hai mươi bốn giờ mỗi ngày, kể cả ngày lễ"
    # what the caller hears: the TTS reads the phrase's numbers
    assert languages.get("vi").normalize(_calendar().hours_phrase(language="vi")) == \
        "từ thứ Hai đến thứ Sáu, từ chín giờ sáng đến sáu giờ chiều; nghỉ trưa từ mười hai giờ trưa đến một giờ chiều"


@pytest.mark.parametrize(("at", "phrase"), [
    (datetime(2026, 12, 3, 10, 0), "ngay bây giờ"),
    (datetime(2026, 12, 3, 7, 0), "lúc 9 giờ sáng"),
    (datetime(2026, 12, 3, 12, 30), "lúc 1 giờ chiều"),
    (datetime(2026, 12, 3, 19, 0), "ngày mai lúc 9 giờ sáng"),
    (datetime(2026, 12, 4, 19, 0), "vào thứ Hai, ngày 7 tháng 12, lúc 9 giờ sáng"),
    (datetime(2026, 9, 23, 19, 0), "vào thứ Hai, ngày 28 tháng 9, lúc 9 giờ sáng"),  # over Chuseok
])
def test_opening_phrase(at, phrase):
    assert _calendar().opening_phrase(at.replace(tzinfo=SEOUL), language="vi") == phrase


def test_holidays_in_vietnamese():
    cal = _calendar(closed=["2026-12-31"])
    assert cal.holiday(date(2026, 9, 25), "vi") == "Tết Trung thu"
    assert cal.holiday(date(2026, 9, 24), "vi") == "ngày trước Tết Trung thu"
    assert cal.holiday(date(2026, 10, 5), "vi") == "ngày nghỉ bù Ngày Lập quốc"
    assert cal.holiday(date(2026, 1, 1), "vi") == "Tết Dương lịch"
    assert cal.holiday(date(2026, 12, 31), "vi") == "ngày nghỉ"
    assert cal.holiday(date(2026, 12, 3), "vi") is None


def test_every_kr_holiday_name_is_translated():
    vi = languages.get("vi")
    names = {n for y in range(2024, 2031) for n in holidays.country_holidays("KR", years=y, language="en_US").values()}
    assert names
    for name in names:
        said = vi.holiday(name)
        assert not re.search(r"\b(?:Day|holiday|Alternative|Chuseok|Korean|The|Birthday)\b", said), (name, said)
    assert vi.holiday("Chuseok; National Foundation Day") == "Tết Trung thu và Ngày Lập quốc"
    assert vi.holiday("Alternative holiday for Buddha's Birthday; Alternative holiday for Children's Day") == \
        "ngày nghỉ bù Lễ Phật đản và ngày nghỉ bù Ngày Thiếu nhi"


# --- the pack -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pack():
    return load_language("vi", load_domain(ROOT / "bot" / "data" / "domain.toml"))


def _keys(table: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out |= _keys(v, f"{prefix}{k}.")
        else:
            out[prefix + k] = v
    return out


def test_pack_loads(pack):
    assert (pack.code, pack.name, pack.tag) == ("vi", "Tiếng Việt", "vi")
    assert pack.menu.format(key="7") == "Nhấn 7 để nghe bằng tiếng Việt."
    assert "Vietnamese" in pack.instruction
    assert pack.intake.confirmed("20260042") == (
        "Phản ánh của quý vị đã được tiếp nhận. Số tiếp nhận là hai, không, hai, sáu, không, không, bốn, hai. "
        "Quý vị có thể dùng số này để kiểm tra tình trạng xử lý.")


def test_every_english_key_is_translated_with_the_same_placeholders():
    en = _keys(tomllib.loads((ROOT / "bot" / "languages" / "en" / "language.toml").read_text(encoding="utf-8")))
    vi = _keys(tomllib.loads((VI / "language.toml").read_text(encoding="utf-8")))
    assert set(vi) == set(en)
    for key, text in en.items():
        assert set(re.findall(r"\{\w+\}", str(vi[key]))) == set(re.findall(r"\{\w+\}", str(text))), key
        if key not in ("language.tag", "intake.time_part"):  # the same in both
            assert vi[key] != text, key


def test_data_files_are_nfc():
    for name in ("language.toml", "shortcuts.toml"):
        text = (VI / name).read_text(encoding="utf-8")
        assert unicodedata.normalize("NFC", text) == text, name


@pytest.mark.parametrize(("said", "context", "rule"), [
    ("Xin chào", None, "greeting"),
    ("Alô, alô", None, "greeting"),
    ("Cảm ơn, tạm biệt.", None, "thanks_goodbye"),
    ("Vâng, cảm ơn chị nhiều ạ", None, "thanks_goodbye"),
    ("Nói lại giúp tôi", None, "repeat"),
    ("Anh nói gì ạ?", None, "repeat"),
    ("Xin lỗi, tôi nghe không rõ", None, "repeat"),
    ("Cho tôi gặp nhân viên", None, "transfer"),
    ("Gặp nhân viên", None, "transfer"),  # what the apology tells the caller to say
    ("Cho tôi gặp nhân viên được không?", None, "transfer"),
    ("Tôi muốn nói chuyện với nhân viên tư vấn.", None, "transfer"),
    ("Vâng", "confirmation", "confirm_yes"),
    ("Dạ, đúng rồi ạ", "confirmation", "confirm_yes"),
    ("Có", "confirmation", "confirm_yes"),
    ("Không", "confirmation", "confirm_no"),
    ("Không phải", "confirmation", "confirm_no"),
    ("Dạ không", "confirmation", "confirm_no"),
    # near misses: the model answers these
    ("Vâng", None, None),
    ("Cho tôi hỏi giờ làm việc của nhân viên", None, None),
    ("Có một cái đèn đường bị hỏng", "confirmation", None),
    ("Cảm ơn, nhưng tôi muốn hỏi thêm", None, None),
])
def test_shortcuts(pack, said, context, rule):
    hit = pack.shortcuts.match(said, context)
    assert (hit.name if hit else None) == rule
    # Whisper may give decomposed (NFD) letters; the matcher's NFKC folds them
    hit = pack.shortcuts.match(unicodedata.normalize("NFD", said), context)
    assert (hit.name if hit else None) == rule
