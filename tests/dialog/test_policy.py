"""The dialog policy: plain function calls, no server, no frames, no event loop."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.call.assets import DialogAssets
from bot.config import load_config
from bot.dialog.policy import (
    SMS_OFFER,
    AfterFailure,
    AskModel,
    Change,
    CreateTicket,
    DialogPolicy,
    KeyBuffer,
    LLMFailure,
    LookUpStatus,
    Speak,
    StageFailure,
    TextTicket,
)
from bot.dialog.state import DialogState

ASSETS = DialogAssets.load(load_config())
COMPLAINT = {"reply": "네, 확인했습니다.", "intent": "report_problem", "category": "streetlight",
             "location": "한빛로 12", "time": None, "flow": "continue"}  # fmt: skip


def policy(can_transfer: bool = True, intake: bool = True, offer_sms: bool = False) -> DialogPolicy:
    return DialogPolicy(shortcuts=ASSETS.shortcuts, canned=ASSETS.canned,
                        intake=ASSETS.intake if intake else None, can_transfer=can_transfer, offer_sms=offer_sms)


def awaiting_yes() -> DialogState:
    state = DialogState()
    Change(model_turn=COMPLAINT, awaiting="confirmation").apply(state, "read back")
    return state


def test_a_shortcut_is_answered_by_rule_with_its_canned_reply():
    d = policy().decide("감사합니다", DialogState())
    assert isinstance(d, Speak) and d.route == "shortcut" and d.rule == "thanks_goodbye"
    assert d.flow == "end" and d.ends_call and d.change.end


def test_anything_else_goes_to_the_model():
    assert policy().decide("가로등이 고장났어요", DialogState()) == AskModel("가로등이 고장났어요")


def test_say_again_repeats_the_last_reply_and_does_not_replace_it():
    state = DialogState(last_reply="수거일은 화요일입니다.")
    d = policy().decide("다시 말씀해 주세요", state)
    assert isinstance(d, Speak) and d.sentences[-1] == "수거일은 화요일입니다."
    d.change.apply(state, d.reply)
    assert state.last_reply == "수거일은 화요일입니다."
    empty = policy().decide("다시 말씀해 주세요", DialogState())
    assert empty.sentences == (ASSETS.canned.nothing_to_repeat,)


@pytest.mark.parametrize("can_transfer", [True, False])
def test_asking_for_a_person_transfers_only_when_there_is_a_desk(can_transfer):
    d = policy(can_transfer).decide("상담원 연결해 주세요", DialogState())
    assert isinstance(d, Speak) and d.change.transfer is can_transfer and d.ends_call is can_transfer
    if not can_transfer:
        assert d.sentences == (ASSETS.canned.transfer_unavailable,)


def test_yes_to_the_read_back_makes_a_ticket_and_the_number_closes_the_intake():
    state = awaiting_yes()
    d = policy().decide("네", state)
    assert d == CreateTicket(dict(state.slots))
    said = policy().ticket_created("20260042")
    assert "이, 공, 이, 육, 공, 공, 사, 이" in said.reply
    said.change.apply(state, said.reply)
    assert state.tickets == ["20260042"] and state.awaiting is None and not state.known_slots()


def test_a_failed_ticket_keeps_the_slots_and_says_so():
    state = awaiting_yes()
    said = policy().ticket_created(None)
    said.change.apply(state, said.reply)
    assert said.reply == ASSETS.intake.text("ticket_failed")
    assert state.known_slots()["location"] == "한빛로 12" and state.awaiting is None and not state.tickets


def test_no_to_the_read_back_asks_what_to_correct():
    state = awaiting_yes()
    d = policy().decide("아니요", state)
    assert isinstance(d, Speak) and d.sentences == (ASSETS.intake.text("ask_correction"),)
    d.change.apply(state, d.reply)
    assert state.awaiting is None and state.known_slots()


def test_yes_outside_a_read_back_is_no_confirmation():
    assert not isinstance(policy().decide("네", DialogState()), CreateTicket)


def test_a_spoken_reception_number_is_looked_up_without_the_model():
    assert policy().decide("이공이육 공공사이", DialogState()) == LookUpStatus("20260042")
    assert policy(intake=False).decide("이공이육 공공사이", DialogState()) != LookUpStatus("20260042")
    said = policy().status_found("20260042", {"category": "streetlight", "status": "done"})
    assert "처리 완료" in said.reply and said.intent == "check_status"
    assert policy().status_found("20260042", None, failed=True).reply == ASSETS.intake.text("status_failed")


def test_the_read_back_follows_a_complete_complaint():
    follow = policy().after_model(COMPLAINT, DialogState())
    assert len(follow.sentences) == 1 and "한빛로 12" in follow.sentences[0]
    assert follow.change.awaiting == "confirmation" and not follow.ends_call
    incomplete = policy().after_model({**COMPLAINT, "location": None}, DialogState())
    assert incomplete.sentences == () and incomplete.change.awaiting is None


def test_a_model_transfer_without_a_desk_says_no_person_is_available():
    turn = {**COMPLAINT, "intent": "transfer", "category": "none", "location": None}
    assert policy(False).after_model(turn, DialogState()).sentences == (ASSETS.canned.transfer_unavailable,)
    follow = policy(True).after_model(turn, DialogState())
    # With a desk: a person is coming, in the rules' words (issue 47), whatever the model said.
    assert follow.sentences == (ASSETS.canned.person_coming,) and follow.change.transfer and follow.ends_call


def test_the_second_failed_model_turn_in_a_row_transfers_or_ends_politely():
    first = policy(True).model_failed(previous_turn_failed=False)
    assert first.sentences == (ASSETS.canned.apology,) and not first.ends_call
    assert policy(False).model_failed(False).sentences == (ASSETS.canned.apology_no_agent,)
    again = policy(True).model_failed(True)
    assert again.sentences == (ASSETS.canned.transfer_after_errors,) and again.change.transfer and again.ends_call
    closing = policy(False).model_failed(True)
    assert closing.sentences == (ASSETS.canned.closing_hours,) and closing.flow == "end" and closing.ends_call
    state = DialogState(last_reply="before")
    first.change.apply(state, first.reply)
    assert state.last_reply == "before"  # "say again" repeats the answer, not the apology


def test_stage_failures_apologise_once_a_turn_and_end_on_the_second_failed_turn():
    p = policy()
    assert p.stage_failed(StageFailure.STT, failed_turns=1, first_of_turn=True) is AfterFailure.UNCLEAR
    assert p.stage_failed(StageFailure.TTS, failed_turns=1, first_of_turn=True) is AfterFailure.APOLOGY
    assert p.stage_failed(StageFailure.TTS, failed_turns=1, first_of_turn=False) is AfterFailure.NOTHING
    assert p.stage_failed(StageFailure.TTS, failed_turns=2, first_of_turn=True) is AfterFailure.END
    assert p.stage_failed(StageFailure.STT, failed_turns=2, first_of_turn=False) is AfterFailure.NOTHING


def test_a_stage_failure_is_answered_with_a_typed_decision_never_a_string():
    p = policy()
    decisions = {p.stage_failed(stage, failed_turns, first_of_turn) for stage in StageFailure
                 for failed_turns in (1, 2, 3) for first_of_turn in (True, False)}
    assert decisions == set(AfterFailure)
    assert not any(isinstance(d, str) for d in decisions)
    # Every STT failure of a first failed turn ends it as unclear speech; the TTS apologises once a turn.
    assert p.stage_failed(StageFailure.STT, failed_turns=1, first_of_turn=False) is AfterFailure.UNCLEAR


def test_the_model_failure_kind_reaches_the_policy_and_changes_nothing_said():
    for failure in LLMFailure:
        for can_transfer, previous_turn_failed in ((True, False), (False, False), (True, True), (False, True)):
            answer = policy(can_transfer).model_failed(previous_turn_failed, failure=failure)
            assert answer.rule == f"llm_failed:{failure.value}"  # named in the logs
            assert replace(answer, rule=None) == policy(can_transfer).model_failed(previous_turn_failed)


def test_keys_make_entries_zero_at_once_digits_until_hash_star_starts_over():
    keys, state = KeyBuffer(), DialogState()
    assert keys.press("0", state) == "0"
    assert [keys.press(k, state) for k in "2026"] == [None] * 4
    assert keys.press("*", state) is None and keys.keys == ""
    assert [keys.press(k, state) for k in "20260042"] == [None] * 8
    assert keys.press("#", state) == "20260042"
    assert keys.press("#", state) is None  # nothing keyed
    assert keys.press("1", awaiting_yes()) == "1"


def test_keypad_entries_decide_like_spoken_ones():
    p, state = policy(), awaiting_yes()
    assert p.keypad("1", state) == CreateTicket(dict(state.slots))
    assert p.keypad("2", state).sentences == (ASSETS.intake.text("ask_correction"),)
    assert p.keypad("20260042", DialogState()) == LookUpStatus("20260042")
    assert p.keypad("0", DialogState()).change.transfer
    short = p.keypad("123", DialogState())
    assert isinstance(short, Speak) and "8자리" in short.reply


# --- the reception number by SMS: offered, and sent only on a yes -------------------------------


def offered(number: str = "20260042") -> tuple[DialogPolicy, DialogState]:
    """A phone call (a number to text) whose read-back was just confirmed, with SMS on."""
    p, state = policy(offer_sms=True), awaiting_yes()
    state.textable = True
    said = p.ticket_created(number, state)
    assert said.sentences == (ASSETS.intake.confirmed(number), ASSETS.canned.sms_offer)
    assert "접수번호를 문자로 보내드릴까요?" in said.reply
    said.change.apply(state, said.reply)
    assert state.awaiting == SMS_OFFER and state.tickets == [number] and not state.known_slots()
    return p, state


@pytest.mark.parametrize("yes", ["네", "네 보내 주세요", "예 부탁드립니다", "좋아요"])
def test_a_spoken_yes_to_the_offer_texts_the_new_number_and_promises_no_more(yes):
    p, state = offered()
    assert p.decide(yes, state) == TextTicket("20260042")
    will = p.sms_requested(ok=True)
    assert will.sentences == (ASSETS.canned.sms_will_send,)
    assert "보내드리겠습니다" in will.reply and "보냈습니다" not in will.reply  # queued, not yet sent
    will.change.apply(state, will.reply)
    assert state.awaiting is None
    failed = p.sms_requested(ok=False)
    assert failed.sentences == (ASSETS.canned.sms_failed,) and "보내드리겠" not in failed.reply


@pytest.mark.parametrize("no", ["아니요", "아뇨", "아니요 아니요"])
def test_a_no_to_the_offer_sends_nothing_and_the_call_goes_on(no):
    p, state = offered()
    d = p.decide(no, state)
    assert isinstance(d, Speak) and d.sentences == (ASSETS.canned.sms_declined,)
    d.change.apply(state, d.reply)
    assert state.awaiting is None and not state.ended and p.decide("네", state) != TextTicket("20260042")


def test_keys_one_and_two_answer_the_offer_at_once():
    p, state = offered()
    keys = KeyBuffer()
    assert keys.press("1", state) == "1" and p.keypad("1", state) == TextTicket("20260042")
    assert keys.press("2", state) == "2"
    assert p.keypad("2", state).sentences == (ASSETS.canned.sms_declined,)


def test_the_offer_is_only_made_with_sms_on_and_a_number_to_text():
    state = awaiting_yes()
    state.textable = True
    assert policy().ticket_created("20260042", state).sentences == (ASSETS.intake.confirmed("20260042"),)
    qa_page = awaiting_yes()  # no caller number
    assert policy(offer_sms=True).ticket_created("20260042", qa_page).sentences == (
        ASSETS.intake.confirmed("20260042"),)
    said = policy().ticket_created("20260042", state)
    said.change.apply(state, said.reply)
    assert state.awaiting is None and policy().decide("네", state) != TextTicket("20260042")


def test_yes_words_elsewhere_are_no_consent():
    p, state = offered()
    other = p.decide("가로등이 또 꺼졌어요", state)  # not an answer to the offer: the model hears it
    assert other == AskModel("가로등이 또 꺼졌어요")
    plain = DialogState(tickets=["20260042"], textable=True)  # a ticket, but no offer pending
    assert p.decide("네", plain) != TextTicket("20260042") and p.keypad("1", plain) != TextTicket("20260042")
    withdrawn = policy(offer_sms=True).ticket_created(None, offered()[1])  # the database failed: no offer
    assert withdrawn.sentences == (ASSETS.intake.text("ticket_failed"),)
