"""The line's calendar: hours, breaks, Korea's holidays (from the `holidays` package), closed days, phrases.

Every moment is passed explicitly (a frozen clock); none depends on the real date or the server's zone.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import holidays
import pytest

from bot.dialog.calendar import CalendarError, Hours, LineCalendar
from bot.languages.en import spoken_time as spoken_time_en
from bot.languages.ko import spoken_time

SEOUL = ZoneInfo("Asia/Seoul")


def kst(y, mo, d, h=10, mi=0) -> datetime:
    return datetime(y, mo, d, h, mi, tzinfo=SEOUL)


def line(extra_closed=(), departments=None) -> LineCalendar:
    return LineCalendar(Hours.parse(["mon-fri 09:00-18:00"], ["12:00-13:00"]),
                        extra_closed=list(extra_closed), departments=departments)


CAL = line()


def test_a_weekday_morning_is_open():
    st = CAL.status(kst(2026, 12, 3, 10))  # Thursday
    assert st.open and st.reason is None and st.holiday is None and st.next_open is None
    assert CAL.is_open(kst(2026, 12, 3, 9, 0)) and CAL.next_opening(kst(2026, 12, 3, 10)) == kst(2026, 12, 3, 10)
    assert CAL.opening_phrase(kst(2026, 12, 3, 10)) == "지금"


def test_lunch_is_closed_and_reopens_after_it():
    at = kst(2026, 12, 3, 12, 30)
    st = CAL.status(at)
    assert not st.open and st.reason == "break" and st.next_open == kst(2026, 12, 3, 13)
    assert CAL.opening_phrase(at) == "오후 1시에"
    assert not CAL.is_open(kst(2026, 12, 3, 12, 0)) and CAL.is_open(kst(2026, 12, 3, 13, 0))


def test_before_and_after_hours():
    st = CAL.status(kst(2026, 12, 3, 8, 59))
    assert st.reason == "before_hours" and CAL.opening_phrase(kst(2026, 12, 3, 8, 59)) == "오전 9시에"
    assert CAL.status(kst(2026, 12, 3, 18, 0)).reason == "after_hours"
    at = kst(2026, 12, 3, 18, 1)
    assert CAL.status(at).next_open == kst(2026, 12, 4, 9)
    assert CAL.opening_phrase(at) == "내일 오전 9시에"


def test_friday_evening_reopens_on_monday():
    at = kst(2026, 12, 4, 18, 1)
    assert CAL.next_opening(at) == kst(2026, 12, 7, 9)
    assert CAL.opening_phrase(at) == "12월 7일 월요일 오전 9시에"


def test_a_saturday_is_a_weekend():
    st = CAL.status(kst(2026, 12, 5, 10))
    assert not st.open and st.reason == "weekend" and st.holiday is None and st.next_open == kst(2026, 12, 7, 9)


@pytest.mark.parametrize("day, name", [
    (date(2026, 2, 16), "설날 전날"), (date(2026, 2, 17), "설날"), (date(2026, 2, 18), "설날 다음날"),
    (date(2026, 9, 24), "추석 전날"), (date(2026, 9, 25), "추석"), (date(2026, 9, 26), "추석 다음날"),
    (date(2027, 2, 6), "설날 전날"), (date(2027, 2, 7), "설날"), (date(2027, 2, 8), "설날 다음날"),
    (date(2027, 2, 9), "설날 대체 휴일"),
    (date(2027, 9, 14), "추석 전날"), (date(2027, 9, 15), "추석"), (date(2027, 9, 16), "추석 다음날"),
    (date(2026, 3, 2), "삼일절 대체 휴일"), (date(2026, 10, 5), "개천절 대체 휴일"),
])  # fmt: skip
def test_lunar_and_substitute_holidays_are_closed(day, name):
    at = kst(day.year, day.month, day.day, 10)
    st = CAL.status(at)
    assert CAL.holiday(day) == name
    assert not st.open and st.reason == "holiday" and st.holiday == name


def test_chuseok_2026_reopens_the_monday_after():
    at = kst(2026, 9, 24, 10)
    assert CAL.next_opening(at) == kst(2026, 9, 28, 9)
    assert CAL.opening_phrase(at) == "9월 28일 월요일 오전 9시에"
    assert CAL.next_opening(kst(2026, 2, 16, 10)) == kst(2026, 2, 19, 9)  # 설날 Mon-Wed


def test_election_day_is_closed():
    st = CAL.status(kst(2026, 6, 3, 10))
    assert not st.open and st.reason == "holiday" and "지방선거" in st.holiday


def test_an_extra_closed_day_from_config():
    cal = line(extra_closed=["2026-12-31"])
    st = cal.status(kst(2026, 12, 31, 10))
    assert not st.open and st.reason == "closed_day" and st.holiday == "휴무일"
    assert st.next_open == kst(2027, 1, 4, 9)  # 1 Jan is a holiday, then the weekend
    assert CAL.is_open(kst(2026, 12, 31, 10))  # only where configured


def test_a_department_with_its_own_hours():
    civil = Hours.parse(["mon-fri 09:00-18:00", "thu 09:00-20:00", "sat 09:30-13:00"], ["12:00-13:00"],
                        key="departments.civil.hours")
    cal = line(departments={"civil": civil})
    thu_evening = kst(2026, 12, 3, 19)
    assert cal.is_open(thu_evening, "civil") and not cal.is_open(thu_evening)
    assert not cal.is_open(kst(2026, 12, 2, 19), "civil")  # Wednesday: 18:00
    assert cal.opening_phrase(kst(2026, 12, 4, 19), "civil") == "내일 오전 9시 30분에"  # Saturday morning
    assert cal.opening_phrase(kst(2026, 12, 4, 19)) == "12월 7일 월요일 오전 9시에"
    assert not cal.is_open(kst(2026, 9, 26, 10), "civil")  # Saturday hours, but 추석 다음날
    with pytest.raises(ValueError, match="unknown department 'tax'"):
        cal.is_open(thu_evening, "tax")


@pytest.fixture
def new_york(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_verdict_is_seouls_whatever_the_servers_zone(new_york):
    assert time.localtime(0).tm_hour == 19  # the process really is in New York now
    morning = datetime(2026, 12, 3, 0, 30, tzinfo=UTC)  # 09:30 in Seoul, 19:30 the day before in NY
    assert CAL.is_open(morning) and CAL.local(morning) == kst(2026, 12, 3, 9, 30)
    evening = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)  # 18:30 in Seoul, 04:30 in NY
    assert CAL.status(evening).reason == "after_hours"
    assert CAL.opening_phrase(evening) == "내일 오전 9시에"
    assert CAL.next_opening(evening) == kst(2026, 12, 4, 9)
    assert CAL.now().utcoffset().total_seconds() == 9 * 3600


def test_a_naive_datetime_is_refused():
    with pytest.raises(ValueError, match="naive"):
        CAL.is_open(datetime(2026, 12, 3, 10))


def test_closed_days_are_the_weekday_holidays_of_the_kr_calendar():
    kr = holidays.country_holidays("KR", years=2026, language="ko")
    expected = [(d, ", ".join(kr.get_list(d))) for d in sorted(kr) if d.weekday() < 5]
    got = CAL.closed_days(2026)
    assert got == expected and len(got) >= 15
    named = dict(got)
    assert named[date(2026, 2, 17)] == "설날" and named[date(2026, 9, 25)] == "추석"
    assert named[date(2026, 3, 2)] == "삼일절 대체 휴일" and named[date(2026, 10, 5)] == "개천절 대체 휴일"
    assert "지방선거" in named[date(2026, 6, 3)] and named[date(2026, 12, 25)] == "기독탄신일"
    assert date(2026, 3, 1) not in named and date(2026, 6, 6) not in named  # weekends
    assert line(extra_closed=["2026-12-31"]).closed_days(2026)[-1] == (date(2026, 12, 31), "휴무일")


def test_labor_day_2026_is_a_public_holiday_in_the_package():
    # The 2026 amendment made 노동절 a public (office) holiday; the pinned package lists it.
    assert CAL.holiday(date(2026, 5, 1)) == "노동절" and not CAL.is_open(kst(2026, 5, 1, 10))


def test_a_later_spec_replaces_a_day():
    h = Hours.parse(["mon-sat 09:00-18:00", "thu 09:00-20:00", "sat closed"])
    assert h.days[3] == (540, 1200) and h.days[0] == (540, 1080) and h.days[5] is None and h.days[6] is None


def test_24_7_is_always_open():
    cal = LineCalendar(Hours.parse(["24/7"]))
    assert cal.is_open(kst(2026, 9, 25, 3)) and cal.status(kst(2026, 9, 25, 3)).holiday == "추석"
    assert cal.hours_phrase() == "연중무휴 24시간" and cal.closed_days(2026) == []


@pytest.mark.parametrize("specs, breaks, needle", [
    (["mon-fri 09:00-18:00", "mon-fri 9-18"], [], "line.hours[1]: 'mon-fri 9-18': expected 'mon-fri 09:00-18:00'"),
    (["xyz 09:00-18:00"], [], "line.hours[0]: 'xyz 09:00-18:00': unknown day 'xyz'"),
    (["mon 18:00-09:00"], [], "line.hours[0]: 'mon 18:00-09:00'"),
    (["mon 09:00-25:00"], [], "line.hours[0]: 'mon 09:00-25:00'"),
    (["mon-fri 09:00-18:00"], ["12-13"], "line.breaks[0]: '12-13': expected '12:00-13:00'"),
    (["24/7"], ["12:00-13:00"], "line.breaks"),
    (["24/7", "mon 09:00-18:00"], [], "line.hours"),
    ([], [], "line.hours"),
    ([9], [], "line.hours[0]: 9"),
])  # fmt: skip
def test_bad_specs_name_the_key(specs, breaks, needle):
    with pytest.raises(CalendarError) as e:
        Hours.parse(specs, breaks)
    assert needle in str(e.value)


def test_bad_config_names_the_key():
    with pytest.raises(CalendarError, match=r"departments\.civil\.hours\[0\]: 'mon 9-6'"):
        Hours.parse(["mon 9-6"], key="departments.civil.hours")
    with pytest.raises(CalendarError, match=r"departments\.civil\.breaks\[0\]"):
        Hours.parse(["mon 09:00-18:00"], ["noon"], key="departments.civil.hours")
    with pytest.raises(CalendarError, match=r"line\.extra_closed_days\[1\]: '2026-13-01'"):
        line(extra_closed=["2026-12-31", "2026-13-01"])
    with pytest.raises(CalendarError, match=r"line\.timezone: 'Mars/Base'"):
        LineCalendar(Hours.parse(["24/7"]), tz="Mars/Base")


@pytest.mark.parametrize("hm, spoken", [
    ((9, 0), "오전 9시"), ((9, 30), "오전 9시 30분"), ((12, 0), "낮 12시"), ((13, 0), "오후 1시"),
    ((18, 5), "오후 6시 5분"), ((0, 0), "밤 12시"), ((24, 0), "밤 12시"),
])  # fmt: skip
def test_spoken_times(hm, spoken):
    assert spoken_time(*hm) == spoken


def test_hours_phrases():
    assert CAL.hours_phrase() == "평일 오전 9시부터 오후 6시까지, 점심시간 낮 12시부터 오후 1시까지"
    civil = Hours.parse(["mon-fri 09:00-18:00", "thu 09:00-20:00", "sat 09:30-13:00"])
    assert line(departments={"civil": civil}).hours_phrase("civil") == (
        "월요일, 화요일, 수요일, 금요일 오전 9시부터 오후 6시까지, 목요일 오전 9시부터 오후 8시까지, "
        "토요일 오전 9시 30분부터 오후 1시까지")


@pytest.mark.parametrize("hm, spoken", [
    ((9, 0), "9 AM"), ((9, 30), "9:30 AM"), ((12, 0), "noon"), ((13, 0), "1 PM"),
    ((18, 5), "6:05 PM"), ((0, 0), "midnight"), ((24, 0), "midnight"), ((0, 30), "12:30 AM"),
])  # fmt: skip
def test_spoken_times_in_english(hm, spoken):
    assert spoken_time_en(*hm) == spoken


def test_an_english_call_hears_the_hours_openings_and_holidays_in_english():
    assert CAL.hours_phrase(language="en") == (
        "on weekdays from 9 AM to 6 PM, with a lunch break from noon to 1 PM")
    civil = Hours.parse(["mon-fri 09:00-18:00", "thu 09:00-20:00"])
    assert line(departments={"civil": civil}).hours_phrase("civil", language="en") == (
        "on Mondays, Tuesdays, Wednesdays, Fridays from 9 AM to 6 PM, on Thursdays from 9 AM to 8 PM")
    assert CAL.opening_phrase(kst(2026, 9, 24, 10), language="en") == "on Monday, September 28, at 9 AM"
    assert CAL.opening_phrase(kst(2026, 9, 22, 12, 30), language="en") == "at 1 PM"
    assert CAL.opening_phrase(kst(2026, 9, 22, 19), language="en") == "tomorrow at 9 AM"
    assert CAL.opening_phrase(kst(2026, 9, 22, 10), language="en") == "now"
    assert CAL.holiday(date(2026, 9, 25), "en") == "Chuseok" and CAL.holiday(date(2026, 9, 25)) == "추석"
    assert line(["2026-12-31"]).holiday(date(2026, 12, 31), "en") == "a closed day"
