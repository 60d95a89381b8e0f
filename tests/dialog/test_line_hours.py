"""The desk's hours in the dialog: outside them nobody takes a transfer, so the bot says when the desk
opens and offers a callback; the machine itself never closes (complaints, numbers, statuses, FAQs)."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot.call.assets import DialogAssets
from bot.config import load_config
from bot.dialog.policy import CALLBACK, AskModel, BookCallback, CreateTicket, DialogPolicy, LookUpStatus, Speak
from bot.dialog.state import DialogState
from bot.store.db import Store
from bot.tools.chat import parse_at, run_chat
from bot.tools.desk import list_callbacks

SEOUL = ZoneInfo("Asia/Seoul")
ASSETS = DialogAssets.load(load_config())
WEDNESDAY_10 = datetime(2026, 12, 2, 10, 0, tzinfo=SEOUL)
WEDNESDAY_1801 = datetime(2026, 12, 2, 18, 1, tzinfo=SEOUL)
LUNCH = datetime(2026, 12, 2, 12, 30, tzinfo=SEOUL)
SATURDAY = datetime(2026, 12, 5, 11, 0, tzinfo=SEOUL)
CHUSEOK = datetime(2026, 9, 25, 10, 0, tzinfo=SEOUL)
COMPLAINT = {"reply": "네.", "intent": "report_problem", "category": "streetlight", "location": "한빛로 12",
             "time": None, "flow": "continue"}  # fmt: skip


def policy(at: datetime, *, can_transfer: bool = True) -> DialogPolicy:
    return DialogPolicy(shortcuts=ASSETS.shortcuts, canned=ASSETS.canned, intake=ASSETS.intake,
                        can_transfer=can_transfer, emergency=ASSETS.emergency, calendar=ASSETS.calendar,
                        clock=lambda: at)


def test_in_hours_a_person_is_a_transfer():
    d = policy(WEDNESDAY_10).decide("상담원 연결해 주세요", DialogState())
    assert isinstance(d, Speak) and d.change.transfer and d.ends_call
    assert policy(WEDNESDAY_10).line_open()


@pytest.mark.parametrize("at, opens", [
    (WEDNESDAY_1801, "내일 오전 9시에"),
    (LUNCH, "오후 1시에"),
    (SATURDAY, "12월 7일 월요일 오전 9시에"),
    (CHUSEOK, "9월 28일 월요일 오전 9시에"),
])  # fmt: skip
def test_closed_a_person_is_when_the_desk_opens_and_a_callback_offer(at, opens):
    p, state = policy(at), DialogState()
    d = p.decide("상담원 연결해 주세요", state)
    assert isinstance(d, Speak) and not d.change.transfer and not d.ends_call
    assert d.sentences == (ASSETS.canned.desk_closed.format(opens=opens), ASSETS.canned.callback_offer)
    assert not p.line_open()
    d.change.apply(state, d.reply)
    assert state.awaiting == CALLBACK and not state.transfer_requested

    yes = p.decide("네 부탁드려요", state)
    assert yes == BookCallback(ASSETS.calendar.next_opening(at))
    booked = p.callback_booked(ok=True)
    assert booked.sentences == (ASSETS.canned.callback_booked.format(opens=opens),)
    booked.change.apply(state, booked.reply)
    assert state.awaiting is None
    assert p.callback_booked(ok=False).sentences == (ASSETS.canned.callback_failed,)


def test_a_no_to_the_callback_offer_is_kept_short_and_the_call_goes_on():
    p, state = policy(WEDNESDAY_1801), DialogState(awaiting=CALLBACK)
    d = p.decide("아니요", state)
    assert isinstance(d, Speak) and d.sentences == (ASSETS.canned.callback_declined,)
    d.change.apply(state, d.reply)
    assert state.awaiting is None and not state.ended


def test_key_zero_closed_offers_the_callback_and_one_books_it():
    p, state = policy(SATURDAY), DialogState()
    d = p.keypad("0", state)
    assert isinstance(d, Speak) and d.change.awaiting == CALLBACK and not d.change.transfer
    d.change.apply(state, d.reply)
    assert isinstance(p.keypad("1", state), BookCallback)
    assert isinstance(p.keypad("2", state), Speak)


def test_the_machine_never_closes_complaints_numbers_and_statuses_work_at_3am_on_chuseok():
    at = datetime(2026, 9, 25, 3, 0, tzinfo=SEOUL)
    p = policy(at)
    assert p.decide("가로등이 고장났어요", DialogState()) == AskModel("가로등이 고장났어요")
    assert p.decide("접수번호 20260042 처리 상황 알려 주세요", DialogState()) == LookUpStatus("20260042")
    state = DialogState()
    follow = p.after_model(COMPLAINT, state)
    follow.change.apply(state, "read back")
    assert state.awaiting == "confirmation"
    assert isinstance(p.decide("네", state), CreateTicket)


def test_the_model_choosing_a_transfer_when_closed_gets_the_offer_not_a_transfer():
    p, state = policy(WEDNESDAY_1801), DialogState()
    turn = {**COMPLAINT, "intent": "transfer", "category": "none", "location": None}
    follow = p.after_model(turn, state)
    assert not follow.change.transfer and not follow.ends_call
    assert follow.sentences[-1] == ASSETS.canned.callback_offer and follow.change.awaiting == CALLBACK
    assert policy(WEDNESDAY_10).after_model(turn, DialogState()).change.transfer


def test_two_failures_when_closed_end_politely_with_the_hours_instead_of_a_transfer():
    closed = policy(WEDNESDAY_1801).model_failed(previous_turn_failed=True)
    assert closed.change.end and not closed.change.transfer
    assert "평일 오전 9시부터 오후 6시까지" in closed.reply and "{hours}" not in closed.reply
    assert policy(WEDNESDAY_10).model_failed(previous_turn_failed=True).change.transfer
    assert policy(WEDNESDAY_1801).model_failed(False).sentences == (ASSETS.canned.apology_no_agent,)


def test_a_directory_answer_when_closed_says_when_it_opens():
    assert policy(WEDNESDAY_10).directory("청소행정과 전화번호는 ...").sentences == ("청소행정과 전화번호는 ...",)
    closed = policy(WEDNESDAY_1801).directory("청소행정과 전화번호는 ...")
    assert closed.sentences[1] == ASSETS.canned.department_closed.format(opens="내일 오전 9시에")


def test_the_greeting_names_a_holiday_and_the_recording_notice_once():
    notice = "민원 처리를 위해 통화 내용이 녹음되고 기록됩니다."
    assert policy(WEDNESDAY_10).greeting_notes(notice) == (notice,)
    assert policy(WEDNESDAY_10).greeting_notes() == ()
    notes = policy(CHUSEOK).greeting_notes(notice)
    assert notes == (notice, ASSETS.canned.holiday_note.format(holiday="추석"))
    # No desk on this line: a holiday changes nothing the caller can do.
    assert policy(CHUSEOK, can_transfer=False).greeting_notes() == ()


def test_an_english_call_hears_the_closed_desk_the_holiday_and_the_hours_in_english():
    from bot.call.wiring import make_policy

    config = load_config(overrides=["line.languages=['ko','en']", "call.transfer_number='+8221200000'"])
    en = make_policy(config, DialogAssets.load(config), clock=lambda: CHUSEOK).for_language("en")
    assert en.language == "en"
    assert en.greeting_notes()[1:] == ("Today is Chuseok, so no agent is available, but I can take complaints and give "
                                   "their status.",)
    d = en.decide("Can I talk to an agent?", DialogState(language="en"))
    assert isinstance(d, Speak) and d.sentences[0] == (
        "Agents are not working right now. An agent is available on Monday, September 28, at 9 AM.")
    assert en.callback_booked(True).reply.startswith("Booked. An agent will call you back on Monday, September 28")
    assert en.canned.closing_hours == ("Sorry, I can't help right now. Agents answer on weekdays from 9 AM to 6 PM, "
                                       "with a lunch break from noon to 1 PM. Please call again. Thank you.")


def test_canned_hours_are_filled_from_the_calendar_and_templates_are_not_fixed_sentences():
    assert "{" not in ASSETS.canned.closing_hours
    ids = ASSETS.canned.ids()
    assert ASSETS.canned.closing_hours in ids and ASSETS.canned.desk_closed not in ids
    assert all("{" not in s for s in ASSETS.fixed_sentences("안녕하세요"))


def test_at_parses_offsets_and_takes_the_lines_zone_without_one():
    assert parse_at("2026-09-25T10:00+09:00", "Asia/Seoul") == CHUSEOK
    assert parse_at("2026-09-25T10:00", "Asia/Seoul") == CHUSEOK
    assert parse_at("2026-09-25T01:00+00:00", "Asia/Seoul") == CHUSEOK
    with pytest.raises(ValueError, match="--at 'tomorrow'"):
        parse_at("tomorrow", "Asia/Seoul")


async def test_chat_at_a_closed_time_books_a_callback_row_the_desk_sees(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    config = load_config(overrides=[f"records.url='{url}'", "call.transfer_number='+8221200000'"])
    out = io.StringIO()
    lines = io.StringIO("상담원 연결해 주세요\n네\n")
    assert await run_chat(config, lines, out, at=CHUSEOK) == 0
    person, yes = (json.loads(line) for line in out.getvalue().splitlines())
    assert person["line_open"] is False and person["llm_calls"] == 0 and person["escalation"] is None
    assert person["language"] == "ko"
    assert "9월 28일 월요일 오전 9시에" in person["reply"]
    assert yes["llm_calls"] == 0 and yes["reply"].startswith("예약했습니다")
    store = Store(url)
    try:
        (row,) = store.list_callbacks()
        assert row["status"] == "waiting" and row["reason"] == "closed_transfer" and row["call_sid"] == "chat"
        assert row["call_after"] == datetime(2026, 9, 28, 9, 0, tzinfo=SEOUL)
    finally:
        store.close()
    table = io.StringIO()
    assert list_callbacks(config, None, table) == 0
    assert "| waiting | 2026-09-28 09:00 |" in table.getvalue() and "1 callback(s)" in table.getvalue()


def test_the_config_names_a_bad_hours_key():
    from bot.config import ConfigError
    from bot.dialog.calendar import LineCalendar

    config = load_config()
    bad = dataclasses.replace(config, line=dataclasses.replace(config.line, hours=["mon-fri 9-18"]))
    with pytest.raises(ValueError, match=r"line\.hours\[0\]"):
        LineCalendar.from_config(bad.line)
    with pytest.raises(ConfigError, match="unknown config key line.hour"):
        load_config(overrides=["line.hour=1"])


def test_no_transfer_number_a_person_is_a_callback_offer_by_words_key_or_model():
    p = policy(WEDNESDAY_10, can_transfer=False)
    for decide in (lambda s: p.decide("상담원 연결해 주세요", s), lambda s: p.keypad("0", s)):
        state = DialogState()
        d = decide(state)
        assert isinstance(d, Speak) and not d.change.transfer and not d.ends_call
        assert d.sentences == (ASSETS.canned.callback_offer_no_agent,)
        d.change.apply(state, d.reply)
        assert state.awaiting == CALLBACK and not state.transfer_requested
        assert p.decide("네 부탁드려요", state) == BookCallback(ASSETS.calendar.next_opening(WEDNESDAY_10))
    # No "지금 상담원이 전화드리겠습니다": nobody is there now; the desk calls back from its list.
    assert p.callback_booked(ok=True).sentences == (ASSETS.canned.callback_booked_no_agent,)
    state = DialogState()
    follow = p.after_model({**COMPLAINT, "intent": "transfer", "category": "none", "location": None}, state)
    assert ASSETS.canned.callback_offer_no_agent in follow.sentences and not follow.change.transfer
    assert follow.change.awaiting == CALLBACK


def test_no_transfer_number_and_no_records_a_person_is_only_not_possible_now():
    p = DialogPolicy(shortcuts=ASSETS.shortcuts, canned=ASSETS.canned, intake=None, can_transfer=False,
                     emergency=ASSETS.emergency, calendar=ASSETS.calendar, clock=lambda: WEDNESDAY_10)
    d = p.decide("상담원 연결해 주세요", DialogState())
    assert isinstance(d, Speak) and d.sentences == (ASSETS.canned.transfer_unavailable,)
    assert d.change.awaiting != CALLBACK and not d.change.transfer
