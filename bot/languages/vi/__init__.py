"""Vietnamese (tiếng Việt): the second largest group of foreign residents who call the line."""

from __future__ import annotations

import datetime as dt

from bot.languages.base import Language
from bot.languages.vi.normalize import normalize_vietnamese, read_digits_vi

DAYS = ("thứ Hai", "thứ Ba", "thứ Tư", "thứ Năm", "thứ Sáu", "thứ Bảy", "Chủ nhật")
_GROUPS = {(0, 1, 2, 3, 4): "từ thứ Hai đến thứ Sáu", (5, 6): "thứ Bảy và Chủ nhật", tuple(range(7)): "hằng ngày",
           (0, 1, 2, 3, 4, 5): "từ thứ Hai đến thứ Bảy"}
_ALTERNATIVE = "Alternative holiday for "


def spoken_time(hour: int, minute: int = 0) -> str:
    """"9 giờ sáng", "12 giờ trưa", "1 giờ 30 chiều", "7 giờ tối", "12 giờ đêm" (midnight)."""
    hour %= 24
    part = ("đêm" if hour == 0 or hour >= 22 else "sáng" if hour < 11 else "trưa" if hour < 13
            else "chiều" if hour <= 18 else "tối")
    return f"{hour % 12 or 12} giờ{f' {minute}' if minute else ''} {part}"


def spoken_date(day: dt.date) -> str:
    """"thứ Hai, ngày 28 tháng 9"."""
    return f"{DAYS[day.weekday()]}, ngày {day.day} tháng {day.month}"


HOLIDAYS = {
    "New Year's Day": "Tết Dương lịch",
    "The day preceding Korean New Year": "ngày trước Tết Âm lịch",
    "Korean New Year": "Tết Âm lịch",
    "The second day of Korean New Year": "mùng hai Tết Âm lịch",
    "Independence Movement Day": "Ngày Phong trào Độc lập",
    "Labor Day": "Ngày Quốc tế Lao động",
    "Children's Day": "Ngày Thiếu nhi",
    "Buddha's Birthday": "Lễ Phật đản",
    "Memorial Day": "Ngày Tưởng niệm",
    "Constitution Day": "Ngày Hiến pháp",
    "Liberation Day": "Ngày Giải phóng",
    "The day preceding Chuseok": "ngày trước Tết Trung thu",
    "Chuseok": "Tết Trung thu",
    "The second day of Chuseok": "ngày sau Tết Trung thu",
    "Armed Forces Day": "Ngày Quân đội",
    "National Foundation Day": "Ngày Lập quốc",
    "Hangul Day": "Ngày Chữ Hàn",
    "Christmas Day": "Lễ Giáng sinh",
    "Local Election Day": "ngày bầu cử địa phương",
    "National Assembly Election Day": "ngày bầu cử Quốc hội",
    "Presidential Election Day": "ngày bầu cử Tổng thống",
    "Temporary Public Holiday": "ngày nghỉ lễ tạm thời",
}


# No holiday_locale: the `holidays` package's KR calendar speaks ko, en_US and th only. The hours' parts
# are joined by "; ": each has its own commas ("từ thứ Hai đến thứ Sáu, từ 9 giờ sáng ...").
class Vietnamese(Language, code="vi", name="Tiếng Việt", label="VI", names={"ko": "베트남어", "en": "Vietnamese"},
                 tag="vi", say_voice="vi-VN", holiday_names=HOLIDAYS, closed_day="ngày nghỉ", now="ngay bây giờ",
                 always="hai mươi bốn giờ mỗi ngày, kể cả ngày lễ", spans="từ {start} đến {end}", shifts="{days}, {span}",
                 pauses=("nghỉ trưa {span}", "nghỉ giải lao {span}"), joiner="; ",
                 openings=("lúc {time}", "ngày mai lúc {time}", "vào {date}, lúc {time}")):
    normalize = staticmethod(normalize_vietnamese)
    read_digits = staticmethod(read_digits_vi)
    time = staticmethod(spoken_time)
    date = staticmethod(spoken_date)

    def weekdays(self, days: tuple[int, ...]) -> str:
        if days in _GROUPS:
            return _GROUPS[days]
        if len(days) > 2 and list(days) == list(range(days[0], days[-1] + 1)):
            return f"từ {DAYS[days[0]]} đến {DAYS[days[-1]]}"
        names = [DAYS[d] for d in days]
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " và " + names[-1]

    def holiday(self, english_name: str) -> str:
        """"Chuseok; National Foundation Day" -> "Tết Trung thu và Ngày Lập quốc";
        "Alternative holiday for Chuseok" -> "ngày nghỉ bù Tết Trung thu"."""
        def one(name: str) -> str:
            if name.startswith(_ALTERNATIVE):
                return "ngày nghỉ bù " + one(name[len(_ALTERNATIVE):])
            return self.holiday_names.get(name, name)

        return " và ".join(one(n.strip()) for n in english_name.split(";"))


LANGUAGE = Vietnamese()
