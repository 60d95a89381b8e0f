"""Emergencies in the dialog policy: before any other rule or the model, at any point of a call."""

from __future__ import annotations

import io
import json

import pytest

from bot.call.assets import DialogAssets
from bot.config import load_config
from bot.dialog.policy import EMERGENCY_CHECK, AskModel, Change, DialogPolicy, Speak
from bot.dialog.state import DialogState
from bot.tools.chat import run_chat
from tests.conftest import ROOT

ASSETS = DialogAssets.load(load_config())
SAID = {  # one plain utterance per kind
    "fire": "여기 불이 났어요 빨리 와 주세요",
    "medical": "아버지가 갑자기 쓰러지셨어요 숨을 안 쉬어요",
    "crime": "지금 누가 문을 부수고 들어오려고 해요",
    "missing_child": "아이가 없어졌어요 아까부터 안 보여요",
    "gas": "집에서 가스 냄새가 심하게 나요",
    "rescue": "지하차도에 물이 차서 차 안에 사람들이 갇혔어요",
    "suicide": "너무 힘들어서 죽고 싶어요",
}
NUMBERS = {"fire": "119", "medical": "119", "crime": "112", "missing_child": "112", "gas": "119", "rescue": "119",
           "suicide": "109"}
COMPLAINT = {"reply": "네.", "intent": "report_problem", "category": "streetlight", "location": "한빛로 12",
             "time": None, "flow": "continue"}  # fmt: skip


def policy(transfer: dict[str, str] | None = None) -> DialogPolicy:
    return DialogPolicy(shortcuts=ASSETS.shortcuts, canned=ASSETS.canned, intake=ASSETS.intake, can_transfer=True,
                        emergency=ASSETS.emergency, emergency_transfer=transfer)


def test_every_kind_of_the_data_file_is_covered_here():
    assert set(ASSETS.emergency.kinds) == set(SAID)


@pytest.mark.parametrize("kind", sorted(SAID))
def test_each_emergency_is_a_rule_turn_naming_its_number(kind):
    d = policy().decide(SAID[kind], DialogState())
    assert isinstance(d, Speak), d  # not AskModel: 0 model calls
    assert d.route == "emergency" and d.escalation == NUMBERS[kind] == ASSETS.emergency.kinds[kind].number
    assert NUMBERS[kind] in d.sentences[0]
    assert not d.change.transfer and not d.ends_call  # no transfer configured: the line stays open


@pytest.mark.parametrize("kind", ["fire", "crime"])
def test_a_configured_emergency_transfer_hands_the_call_to_that_number(kind):
    d = policy({kind: "+82311190000"}).decide(SAID[kind], DialogState())
    assert d.change.transfer and d.change.transfer_to == "+82311190000" and d.ends_call
    assert d.sentences[-1] == ASSETS.canned.emergency_transfer.format(number="+82311190000")
    state = DialogState()
    d.change.apply(state, d.reply)
    assert state.transfer_requested and state.transfer_to == "+82311190000"


def test_suicide_is_answered_calmly_and_the_call_never_ends_on_it():
    d = policy().decide(SAID["suicide"], DialogState())
    assert not d.ends_call and not d.change.end and d.flow == "continue"
    assert "109" in d.reply


def test_an_emergency_during_the_read_back_still_wins():
    state = DialogState()
    Change(model_turn=COMPLAINT, awaiting="confirmation").apply(state, "read back")
    d = policy().decide("잠깐만요 지금 옆집에 불이 났어요", state)
    assert isinstance(d, Speak) and d.escalation == "119"
    d.change.apply(state, d.reply)
    assert state.awaiting is None  # the read-back is no longer pending


def test_an_emergency_outranks_a_shortcut_and_a_reception_number():
    assert policy().decide("상담원 연결해 주세요 불이 났어요", DialogState()).escalation == "119"
    assert policy().decide("접수번호 20260042 인데요 지금 가스 냄새가 나요", DialogState()).escalation == "119"


@pytest.mark.parametrize("text", [
    "복도 불이 계속 꺼져 있어요",
    "119 구급차가 불법주차 때문에 골목에 못 들어와요",
    "지난달 불탄 정자는 언제 고쳐요",
    "더워 죽겠는데 냉방 지원 되나요",
])  # fmt: skip
def test_the_issues_near_misses_stay_complaints(text):
    assert policy().decide(text, DialogState()) == AskModel(text)


def test_unsure_asks_one_question_then_a_yes_escalates_and_a_no_goes_on():
    p = policy()
    unsure = [c for c in _table() if c.get("sure") is False]
    assert unsure, "the table has unsure cases"
    case = unsure[0]
    state = DialogState()
    ask = p.decide(case["text"], state)
    kind = ASSETS.emergency.kinds[case["expect"]]
    assert isinstance(ask, Speak) and ask.sentences == (kind.question,) and ask.escalation is None
    ask.change.apply(state, ask.reply)
    assert state.awaiting == EMERGENCY_CHECK + kind.name
    yes = p.decide("네 지금이요", state)
    assert isinstance(yes, Speak) and yes.escalation == kind.number
    for no in ("아니요", "지금은 아니에요", "지금은 안 나요"):
        state2 = DialogState()
        ask.change.apply(state2, ask.reply)
        assert p.decide(no, state2) == AskModel(no)


def _table() -> list[dict]:
    import tomllib

    return tomllib.loads((ROOT / "bench" / "emergency_table.toml").read_text())["case"]


async def test_chat_turn_json_carries_the_escalation(tmp_path):
    config = load_config(overrides=[f"records.url='sqlite:///{tmp_path / 'calls.db'}'"])
    out = io.StringIO()
    assert await run_chat(config, io.StringIO(f"{SAID['gas']}\n"), out) == 0
    (turn,) = (json.loads(line) for line in out.getvalue().splitlines())
    assert turn["escalation"] == "119" and turn["route"] == "emergency" and turn["llm_calls"] == 0
    assert turn["line_open"] in (True, False)


# --- issue 33: ask only when it is truly unclear; the 109 line stays ---------------------------------


def _after(d, state: DialogState | None = None) -> DialogState:
    state = state or DialogState()
    d.change.apply(state, d.reply)
    return state


@pytest.mark.parametrize("first, again", [
    ("어디서 연기가 좀 나는 것 같아요", "타는 냄새도 나요"),
    ("윗집에서 비명이 들렸어요", "또 비명 소리가 나요"),
])
def test_the_danger_said_again_after_the_question_escalates(first, again):
    p = policy()
    ask = p.decide(first, DialogState())
    assert ask.escalation is None and ask.change.awaiting.startswith(EMERGENCY_CHECK)  # unsure: one question
    d = p.decide(again, _after(ask))
    assert isinstance(d, Speak) and d.escalation is not None and "repeated" in d.rule


def test_the_decisive_fact_is_never_asked_about():
    for text in ("교통사고가 났는데 운전자가 머리에서 피를 흘리고 있어요", "아래층에서 연기가 올라오고 타는 냄새가 나요",
                 "며칠째 저를 따라다니던 남자가 지금 우리 집 문 앞에 서 있어요", "수면제를 모아 뒀어요 오늘 밤에 다 먹으려고요"):
        d = policy().decide(text, DialogState())
        assert d.escalation is not None, text


def test_after_109_a_goodbye_is_met_with_the_stay_sentences_until_the_caller_will_call():
    p = policy()
    told = p.decide("그냥 사라지고 싶어요", DialogState())
    assert told.escalation == "109" and not told.ends_call
    state = _after(told)
    assert state.awaiting == "crisis:suicide"
    bye = p.decide("네 알겠어요 수고하세요", state)
    kind = ASSETS.emergency.kinds["suicide"]
    assert bye.sentences == kind.stay and not bye.ends_call
    state = _after(bye, state)
    assert state.awaiting == "crisis:suicide" and not state.ended
    done = p.decide("네 109에 전화해 볼게요", state)
    assert done.sentences == kind.closing and done.ends_call
    assert not _after(done, state).awaiting


def test_after_109_the_model_may_answer_but_not_end_the_call():
    p = policy()
    state = _after(p.decide("죽고 싶어요", DialogState()))
    turn = {**COMPLAINT, "reply": "네, 잘 지내세요.", "intent": "thanks_goodbye", "flow": "end"}
    follow = p.after_model(turn, state)
    assert not follow.ends_call and follow.sentences == ASSETS.emergency.kinds["suicide"].stay
    follow.change.apply(state, "네, 잘 지내세요.")
    assert state.awaiting == "crisis:suicide"


def test_a_crisis_kind_must_have_all_three_keys(tmp_path):
    from bot.dialog.emergency import DEFAULT_PATH, EmergencyDataError, EmergencyRules

    lines = DEFAULT_PATH.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "emergency.toml"
    path.write_text("\n".join(line for line in lines if not line.startswith("closing = [")), encoding="utf-8")
    with pytest.raises(EmergencyDataError, match="stay, will_call and closing go together"):
        EmergencyRules.load(path)


def test_an_escalation_the_learned_net_doubts_is_one_question_and_a_yes_still_escalates():
    """Round 10 (docs/line.md, the learned net's doubt): a near miss in a danger's words hears the kind's
    question, not the number; a caller who says yes to it is escalated as before."""
    text = "남편이 출근길에 차가 막혀서 도로에 갇혔다고 하네요 그 구간 공사 언제 끝나요"
    p = policy()
    ask = p.decide(text, DialogState())
    rescue = ASSETS.emergency.kinds["rescue"]
    assert isinstance(ask, Speak) and ask.sentences == (rescue.question,) and ask.escalation is None
    assert ask.rule.startswith("unsure:") and ask.rule.endswith("-doubted")
    yes = p.decide("네 지금이요", _after(ask))
    assert isinstance(yes, Speak) and yes.escalation == rescue.number
    assert p.decide("아니요 길이 막혔다는 거예요", _after(ask)) == AskModel("아니요 길이 막혔다는 거예요")
