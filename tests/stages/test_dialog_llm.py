"""The dialog stage (``DialogLLMService``) alone: frames in, frames out, against the fake vLLM.

Pipecat's ``run_test`` sends the caller's turns as ``LLMContextFrame``s (what the user aggregator
sends) and collects what the stage pushes: the sentences for the TTS (``AggregatedTextFrame``), the
turn facts for the record (``TurnAnsweredFrame``, ``TurnMarkFrame``), the call's end
(``EndWorkerFrame``). The model is the fake vLLM server over real HTTP; its per-request fault URLs
are the ones the fault lab (bot/tools/faults.py) gives a call, so each LLM row of the lab has its
stage-level test here, in milliseconds and with no process, STT or TTS around it.
"""

from __future__ import annotations

import time

import pytest
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    EagerEndOfTurnCancelFrame,
    EndWorkerFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from bot.call.assets import DialogAssets
from bot.call.wiring import make_llm, make_policy
from bot.config import Secrets, load_config
from bot.dialog.state import CannedReplies
from bot.languages.ko.normalize import read_digits
from bot.stages.dialog_llm import DialogLLMService
from bot.stages.filler import Filler
from bot.stages.keypad import KeypadEntryFrame
from bot.stages.records_effects import RecordsEffects
from bot.stages.turn_prompt import TurnPrompt
from bot.telemetry.turn_facts import (
    KeypadTurnFrame,
    LLMRequestFrame,
    LLMRequestWithdrawnFrame,
    TurnAnsweredFrame,
    TurnMarkFrame,
)
from bot.testing.fake_llm import FakeLLM
from bot.testing.inject import CLOSED_PORT_URL

DESK = "+8221200000"
# A line whose desk always answers (the apology offers a person; two failures transfer).
WITH_DESK = (f"call.transfer_number='{DESK}'", 'line.hours=["24/7"]', "line.breaks=[]")
# The lab's STT time (tests/call/test_faults.py): the caller went quiet this long before the request.
STT_DELAY_S = 0.4
# After an LLM failure the first words come within this of the caller's speech end (docs/faults.md).
LIMIT_FIRST_WORDS_S = 1.5
SAID = "쓰레기 수거 문의드리려고요"  # no shortcut: the model answers


@pytest.fixture(scope="module")
def fake():
    with FakeLLM(first_token_delay=0.02, token_delay=0.002) as server:
        yield server


@pytest.fixture
def llm_url(fake) -> str:
    fake.reset()
    return fake.base_url


def make_stage(url: str, *extra: str, speech_end=None, **kw) -> DialogLLMService:
    """The stage as a call builds it. With ``speech_end`` (the filler's clock) on the product's timeouts (first
    token 1.5 s, filler 1.2 s); without, on roomy ones: those tests are about the answer, and a loaded CI machine
    once took over 1.5 s for the fake's first token (the apology was spoken instead)."""
    roomy = () if speech_end else ("llm.first_token_timeout_ms=10000", "llm.total_timeout_ms=30000")
    config = load_config(overrides=[f"llm.base_url='{url}'", *roomy, *extra])
    if speech_end:
        kw["speech_end"] = speech_end
    return make_llm(config, Secrets(None, None, "EMPTY"), DialogAssets.load(config), call_id="CA-stage", **kw)


def said(*texts: str) -> LLMContextFrame:
    """One caller turn as the user aggregator sends it (earlier turns as history)."""
    messages = []
    for text in texts[:-1]:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "네."}]
    return LLMContextFrame(LLMContext(messages=[*messages, {"role": "user", "content": texts[-1]}]))


def model(reply: str, **kw) -> dict:
    return {"reply": reply, "intent": "report_problem", "category": "waste", "location": None, "time": None,
            "flow": "continue"} | kw


def sentences(frames) -> list[str]:
    return [f.text for f in frames if isinstance(f, AggregatedTextFrame)]


def answered(frames) -> list[TurnAnsweredFrame]:
    return [f for f in frames if isinstance(f, TurnAnsweredFrame)]


def first_words_at(frames, run: int) -> float:
    """When the run's first sentence (the filler, if one played) was pushed: its first "first_sentence" mark."""
    marks = [f for f in frames if isinstance(f, TurnMarkFrame) and f.run == run and f.mark == "first_sentence"]
    return marks[0].t


async def run(stage: DialogLLMService, *frames):
    down, _ = await run_test(stage, frames_to_send=list(frames), expected_down_frames=None)
    return down


def canned(stage: DialogLLMService) -> CannedReplies:
    """The line's canned sentences (their hours filled in), as the stage speaks them."""
    return stage.policy.canned


# --- a turn answered by rule: no model call -----------------------------------------------------


async def test_a_shortcut_turn_makes_no_model_call_and_pushes_its_sentence(fake, llm_url):
    stage = make_stage(llm_url)
    down = await run(stage, said("여보세요?"))
    assert fake.calls == 0
    (turn,) = answered(down)
    assert turn.route == "shortcut" and turn.intent == "greeting" and turn.reply == sentences(down)[0]
    # Framed as one response, the sentence before the record's answer.
    kinds = [type(f) for f in down if isinstance(f, (LLMFullResponseStartFrame, AggregatedTextFrame,
                                                     TurnAnsweredFrame, LLMFullResponseEndFrame))]
    assert kinds == [LLMFullResponseStartFrame, AggregatedTextFrame, TurnAnsweredFrame, LLMFullResponseEndFrame]
    assert not any(isinstance(f, LLMRequestFrame) for f in down)


async def test_an_emergency_said_escalates_by_rule_without_the_model(fake, llm_url):
    stage = make_stage(llm_url)
    down = await run(stage, said("지금 옆집에 불이 났어요"))
    assert fake.calls == 0
    (turn,) = answered(down)
    assert turn.route == "emergency" and turn.escalation == "119"
    assert "119" in sentences(down)[0]


FIRE = "지금 옆집에 불이 났어요"


async def test_an_emergency_answer_talked_over_before_it_played_comes_first_in_the_next_answer(fake, llm_url):
    # The caller went on ("…우리 집 앞이에요") before a word of the 119 answer played: the barge-in
    # dropped it, and the next turn is about something else. The number must still be heard.
    fake.script(model("네, 위치 확인했습니다."))
    fake.script(model("네, 알겠습니다."))
    stage = make_stage(llm_url)
    down = await run(stage, said(FIRE), SleepFrame(0.1), InterruptionFrame(), SleepFrame(0.1),
                     said(FIRE, "우리 집 앞이에요"), SleepFrame(0.3),
                     BotStartedSpeakingFrame(), said(FIRE, "우리 집 앞이에요", "네"), SleepFrame(0.3))
    turns = [[]]
    for f in down:
        if isinstance(f, AggregatedTextFrame):
            turns[-1].append(f.text)
        elif isinstance(f, TurnAnsweredFrame):
            turns.append([])
    told, again, after = turns[:3]
    assert "119" in told[0] and [a.escalation for a in answered(down)] == ["119", None, None]
    assert again == [*told, "네, 위치 확인했습니다."]  # the unheard answer first, then this turn's
    assert after == ["네, 알겠습니다."]  # heard this time: not said a third time


async def test_an_emergency_answer_that_played_is_not_repeated(fake, llm_url):
    fake.script(model("네, 위치 확인했습니다."))
    stage = make_stage(llm_url)
    down = await run(stage, said(FIRE), SleepFrame(0.1), BotStartedSpeakingFrame(), InterruptionFrame(),
                     SleepFrame(0.1), said(FIRE, "우리 집 앞이에요"), SleepFrame(0.3))
    spoken = sentences(down)
    assert spoken[-1] == "네, 위치 확인했습니다." and sum("119" in s for s in spoken) == 1


class _Records:
    """The records database's calls the stage makes: tickets made, tickets looked up."""

    def __init__(self, tickets: dict[str, dict] | None = None):
        self.tickets = tickets or {}
        self.made: list[dict] = []

    async def create_ticket(self, **kw) -> str:
        self.made.append(kw)
        return "20260001"

    async def find_ticket(self, number: str) -> dict | None:
        return self.tickets.get(number)


async def test_a_reception_number_keyed_in_reads_its_status_without_the_model(fake, llm_url):
    number = "20260007"
    records = _Records({number: {"reception_no": number, "category": "street_lights", "status": "open"}})
    stage = make_stage(llm_url, records=records)
    down = await run(stage, KeypadEntryFrame(keys=number), SleepFrame(0.5))  # a keypad turn is a task of its own
    assert fake.calls == 0
    (keyed,) = [f for f in down if isinstance(f, KeypadTurnFrame)]
    assert keyed.transcript == f"[keypad] {number}#"
    assert sentences(down) == [f"접수번호 {read_digits(number)}, 가로등·보안등 민원은 현재 접수 상태입니다."]
    (turn,) = answered(down)
    assert turn.route == "rule" and turn.intent == "check_status"
    kinds = [type(f) for f in down if isinstance(f, (LLMFullResponseStartFrame, LLMFullResponseEndFrame))]
    assert kinds == [LLMFullResponseStartFrame, LLMFullResponseEndFrame]  # one response, as a spoken turn's


# --- a model turn -------------------------------------------------------------------------------


async def test_a_model_turn_makes_one_call_and_streams_its_sentences_in_order(fake, llm_url):
    fake.script(model("네, 대형 폐기물 수거를 도와드릴게요. 수거 일정은 동마다 다릅니다. 어느 동이신가요?"))
    stage = make_stage(llm_url)
    down = await run(stage, said(SAID))
    assert fake.calls == 1 and fake.requests[0]["stream"] is True
    assert sentences(down) == ["네, 대형 폐기물 수거를 도와드릴게요.", "수거 일정은 동마다 다릅니다.", "어느 동이신가요?"]
    (turn,) = answered(down)
    assert turn.route == "llm" and turn.intent == "report_problem" and turn.slots == {"category": "waste"}
    assert turn.reply == " ".join(sentences(down))
    assert [f.run for f in down if isinstance(f, LLMRequestFrame)] == [turn.run]
    assert stage.dialog.known_slots() == {"category": "waste"}
    assert stage.client._openai.is_closed()  # the call's HTTP client is closed at its end (no CLOSE-WAIT socket left)


async def test_a_model_that_says_end_ends_the_call_after_its_goodbye(fake, llm_url):
    fake.script(model("네, 감사합니다. 좋은 하루 보내세요.", intent="thanks_goodbye", category="none", flow="end"))
    stage = make_stage(llm_url)
    down = await run(stage, said(SAID))
    ends = [i for i, f in enumerate(down) if isinstance(f, EndWorkerFrame)]
    last_sentence = max(i for i, f in enumerate(down) if isinstance(f, AggregatedTextFrame))
    assert len(ends) == 1 and ends[0] > last_sentence  # the caller hears the goodbye, then the call ends
    assert down[ends[0]].reason == "dialog ended"


@pytest.mark.parametrize("desk", [True, False])
async def test_the_model_choosing_a_person_transfers_only_to_a_desk(fake, llm_url, desk):
    fake.script(model("상담원에게 연결해 드리겠습니다.", intent="transfer", category="none"))
    stage = make_stage(llm_url, *(WITH_DESK if desk else ()))
    down = await run(stage, said("이건 담당하시는 분께 직접 설명드려야 할 것 같아요"))
    (turn,) = answered(down)
    assert fake.calls == 1 and turn.route == "llm" and turn.intent == "transfer"
    ends = [f.reason for f in down if isinstance(f, EndWorkerFrame)]
    if desk:  # said, then that a person (not the AI) answers next, then the call goes to the desk (<Dial>)
        assert sentences(down) == ["상담원에게 연결해 드리겠습니다.", "곧 담당 직원이 직접 전화를 받습니다. 잠시만 기다려 주세요."]
        assert ends == ["transfer"]
        assert stage.dialog.transfer_requested
    else:  # no person to take it: the caller is told so, and the call goes on
        assert ends == [] and not stage.dialog.transfer_requested and len(sentences(down)) > 1


async def test_the_model_flagging_an_emergency_escalates_instead_of_its_reply(fake, llm_url):
    # The flag is the first field (the schema's order): nothing of the reply is spoken.
    fake.script({"emergency": "crime"} | model("무슨 일인지 조금 더 말씀해 주시겠어요?", intent="other", category="none"))
    text = "저기요 그게 말씀드리기가 좀 어려운데요"  # hesitant: no net of the rules reads it, only the model can
    stage = make_stage(llm_url)
    assert stage.policy.emergency.classify(text) is None, "a turn the rules leave to the model (pick another)"
    down = await run(stage, said(text))
    assert fake.calls == 1
    (turn,) = answered(down)
    assert turn.route == "emergency" and turn.escalation == "112"
    assert "112" in sentences(down)[0] and not any("조금 더 말씀해" in s for s in sentences(down))


class _ToldClient:
    """A model client that answers from a script and keeps what each turn told it (the stage's client, faked)."""

    model = "told-model"

    def __init__(self, *answers: dict):
        self.answers = list(answers)
        self.told: list[dict] = []
        self.closed = False

    async def stream_turn(self, messages, *, instruction, schema, on_sentence, on_first_token, on_usage):
        self.told.append({"messages": messages, "instruction": instruction, "schema": schema})
        await on_first_token()
        answer = self.answers.pop(0)
        await on_sentence(answer["reply"])
        return answer

    async def aclose(self) -> None:
        self.closed = True


async def test_the_model_client_is_injected_and_told_each_turns_instruction_and_schema():
    config = load_config()
    assets = DialogAssets.load(config)
    client = _ToldClient(model("어느 위치인가요?", category="illegal_parking", location="역삼동 123"),
                         model("여권은 민원실에서 신청하실 수 있습니다.", intent="ask_info", category="none",
                               answer_source="faq-doc-011"))
    stage = DialogLLMService(client=client, policy=make_policy(config, assets),
                             prompt=TurnPrompt(assets.prompt, assets.domain, knowledge=assets.knowledge),
                             records=RecordsEffects(), filler=Filler(after_ms=0, first_token_timeout_ms=1500))
    settings = dict(vars(stage._settings))
    first, second = "불법 주차 신고하려고요. 역삼동 123이요", "여권 발급은 어디서 하나요"
    down = await run(stage, said(first), said(first, second))
    assert sentences(down) == ["어느 위치인가요?", "여권은 민원실에서 신청하실 수 있습니다."]
    assert [t.route for t in answered(down)] == ["llm", "llm"] and len(client.told) == 2
    assert len([f for f in down if isinstance(f, LLMRequestFrame)]) == 2  # one call per turn
    one, two = client.told
    # Each turn its own facts: in the instruction, and the only sources its schema allows.
    sources = [told["schema"]["properties"]["answer_source"]["enum"] for told in client.told]
    assert "faq-park-005" in sources[0] and "faq-doc-011" not in sources[0]
    assert "faq-doc-011" in sources[1] and "faq-park-005" not in sources[1]
    assert "[faq-park-005]" in one["instruction"] and "[faq-doc-011]" in two["instruction"]
    # The slot the first answer gave is known to the second turn's instruction, not the first's.
    assert "역삼동 123" not in one["instruction"] and "역삼동 123" in two["instruction"]
    assert one["messages"][-1] == {"role": "user", "content": first}
    assert two["messages"][-1] == {"role": "user", "content": second}
    # Told, not configured: the stage's own settings are what they were before the turns.
    assert dict(vars(stage._settings)) == settings and stage._settings.system_instruction is None
    assert client.closed  # the stage closes its client when the call is over


# --- the model failing (the fault lab's LLM rows) -----------------------------------------------


@pytest.mark.parametrize(("fault", "kind"), [
    ("500", "http_500"),
    ("down", "http_502"),  # a proxy's 502 page: the model server behind it is gone
    ("refused", "unreachable"),
    ("invalid_json", "invalid_json"),
    ("hang", "first_token_timeout"),
])
async def test_a_failed_model_turn_gives_the_apology_in_time_and_records_why(fake, llm_url, fault, kind):
    url = CLOSED_PORT_URL if fault == "refused" else fake.fault_url(fault)
    stage = make_stage(url, *WITH_DESK, speech_end=lambda: quiet)
    quiet = time.time() - STT_DELAY_S  # after the build: loading the stage (Kiwi, the nets) is startup's time, not the turn's
    down = await run(stage, said(SAID))
    spoken = sentences(down)
    # A hanging model is covered by the filler until the first-token timeout gives the apology.
    assert spoken == ([canned(stage).filler] if fault == "hang" else []) + [canned(stage).apology], spoken
    (turn,) = answered(down)
    assert turn.route == "error" and turn.error.startswith(kind), turn.error
    assert first_words_at(down, turn.run) - quiet <= LIMIT_FIRST_WORDS_S
    assert not any(isinstance(f, EndWorkerFrame) for f in down) and not stage.dialog.transfer_requested
    assert fake.calls == (0 if fault == "refused" else 1)  # no silent retry


async def test_a_reply_cut_off_mid_json_keeps_what_was_said_and_apologises(fake, llm_url):
    stage = make_stage(fake.fault_url("cut_off"), *WITH_DESK, speech_end=lambda: quiet)
    quiet = time.time() - STT_DELAY_S  # after the build: loading the stage (Kiwi, the nets) is startup's time, not the turn's
    down = await run(stage, said(SAID))
    spoken = sentences(down)
    assert spoken[-1] == canned(stage).apology and len(spoken) >= 2  # the reply's first sentence, then the apology
    (turn,) = answered(down)
    assert turn.route == "error" and turn.error.startswith("cut_off")
    assert first_words_at(down, turn.run) - quiet <= LIMIT_FIRST_WORDS_S


async def test_a_slow_model_gets_the_filler_then_its_answer(fake, llm_url):
    fake.script(model("네, 확인해 드릴게요."), first_token_delay=1.2)  # the lab's "slow-1200"
    stage = make_stage(llm_url, speech_end=lambda: quiet)
    quiet = time.time() - STT_DELAY_S  # after the build: loading the stage (Kiwi, the nets) is startup's time, not the turn's
    down = await run(stage, said(SAID))
    assert sentences(down) == [canned(stage).filler, "네, 확인해 드릴게요."]
    (turn,) = answered(down)
    assert turn.route == "llm"
    # The filler is what the caller hears first, within the limit; it stays the first sentence.
    assert first_words_at(down, turn.run) - quiet <= LIMIT_FIRST_WORDS_S


async def test_a_prompt_model_gets_no_filler(fake, llm_url):
    quiet = time.time()  # reassigned after the build below
    stage = make_stage(llm_url, speech_end=lambda: quiet)
    down = await run(stage, said(SAID))
    assert canned(stage).filler not in sentences(down)


async def test_two_failed_turns_in_a_row_transfer_to_the_desk(fake, llm_url):
    stage = make_stage(fake.fault_url("500"), *WITH_DESK)
    down = await run(stage, said(SAID), said(SAID, SAID))
    assert sentences(down) == [canned(stage).apology, canned(stage).transfer_after_errors]
    assert [t.route for t in answered(down)] == ["error", "error"]
    (end,) = [f for f in down if isinstance(f, EndWorkerFrame)]
    assert end.reason == "transfer"
    # The phone serializer reads these to redirect the call to the desk (<Dial>).
    assert stage.dialog.transfer_requested and stage.dialog.transfer_reason == "errors"


async def test_two_failed_turns_without_a_desk_end_politely_with_the_opening_hours(fake, llm_url):
    stage = make_stage(fake.fault_url("500"))
    down = await run(stage, said(SAID), said(SAID, SAID))
    assert sentences(down) == [canned(stage).apology_no_agent, canned(stage).closing_hours]
    assert "{hours}" not in canned(stage).closing_hours  # the line's hours are said
    (end,) = [f for f in down if isinstance(f, EndWorkerFrame)]
    assert end.reason == "dialog ended" and not stage.dialog.transfer_requested


async def test_a_good_turn_between_failures_resets_the_count(fake, llm_url):
    fake.script(mode="http_error")
    fake.script(model("네, 확인해 드릴게요."))
    fake.script(mode="http_error")
    stage = make_stage(llm_url, *WITH_DESK)
    down = await run(stage, said(SAID), said(SAID, SAID), said(SAID, SAID, SAID))
    assert [t.route for t in answered(down)] == ["error", "llm", "error"]
    assert sentences(down)[-1] == canned(stage).apology and not any(isinstance(f, EndWorkerFrame) for f in down)


# --- barge-in and speculation -------------------------------------------------------------------


async def test_an_interruption_stops_the_reply_and_the_next_turn_is_answered(fake, llm_url):
    long = "네, 안내해 드릴게요. " + "수거 일정은 동마다 다릅니다. " * 6 + "마지막 문장입니다."
    fake.script(model(long), token_delay=0.05)  # about 5 s of streaming
    fake.script(model("네, 말씀하세요."))
    stage = make_stage(llm_url)
    # The first sentence is out after ~0.4 s of streaming; the interruption comes well after it.
    down = await run(stage, said(SAID), SleepFrame(1.0), InterruptionFrame(), SleepFrame(0.2), said(SAID, "잠깐만요"))
    spoken = sentences(down)
    assert spoken[0] == "네, 안내해 드릴게요." and "마지막 문장입니다." not in spoken
    assert spoken[-1] == "네, 말씀하세요." and fake.calls == 2
    # The cut-off turn is never recorded as answered; the next one is.
    assert [t.reply for t in answered(down)] == ["네, 말씀하세요."]


async def test_a_withdrawn_speculative_answer_is_never_spoken_nor_kept(fake, llm_url):
    fake.script(model("네, 확인해 드릴게요.", category="roads"), first_token_delay=0.6)
    stage = make_stage(llm_url)
    early = said(SAID)
    early.speculation = True
    down = await run(stage, early, SleepFrame(0.3), EagerEndOfTurnCancelFrame())
    assert sentences(down) == [] and answered(down) == []
    assert [type(f) for f in down if isinstance(f, LLMRequestWithdrawnFrame)] == [LLMRequestWithdrawnFrame]
    assert stage.dialog.known_slots() == {} and stage.last_result is None


async def test_a_confirmed_speculative_answer_is_spoken_and_kept(fake, llm_url):
    fake.script(model("네, 확인해 드릴게요.", category="roads"), first_token_delay=0.05)
    stage = make_stage(llm_url)
    early = said(SAID)
    early.speculation = True
    down = await run(stage, early, SleepFrame(0.5), UserStoppedSpeakingFrame(), SleepFrame(0.3))
    assert sentences(down) == ["네, 확인해 드릴게요."]
    # Held until the turn was confirmed, then released behind the frame that confirmed it.
    confirmed_at = next(i for i, f in enumerate(down) if isinstance(f, UserStoppedSpeakingFrame))
    assert all(i > confirmed_at for i, f in enumerate(down) if isinstance(f, AggregatedTextFrame))
    assert [t.route for t in answered(down)] == ["llm"] and stage.dialog.known_slots() == {"category": "roads"}


async def test_a_withdrawn_speculative_yes_makes_no_ticket_and_a_confirmed_one_does(fake, llm_url):
    tickets = _Records()
    first = make_stage(llm_url, records=tickets)
    fake.script(model("위치를 말씀해 주시겠어요?", category="street_lights"))
    fake.script(model("알겠습니다.", category="street_lights", location="중앙로 12번길"))
    history = ("가로등이 꺼졌어요", "중앙로 12번길이요")
    down = await run(first, said(history[0]), said(*history))
    assert sentences(down)[-1].endswith("이 내용으로 접수할까요?") and first.dialog.awaiting == "confirmation"

    # The same call's dialog, each yes in a run of its own: the speculative turn is the only one in flight.
    withdrawn = make_stage(llm_url, records=tickets, dialog=first.dialog)
    yes = said(*history, "네")
    yes.speculation = True
    down = await run(withdrawn, yes, SleepFrame(0.3), EagerEndOfTurnCancelFrame())
    assert tickets.made == [] and sentences(down) == []  # the caller went on: a withdrawn yes is no consent
    assert first.dialog.awaiting == "confirmation"

    confirmed = make_stage(llm_url, records=tickets, dialog=first.dialog)
    yes = said(*history, "네")
    yes.speculation = True
    down = await run(confirmed, yes, SleepFrame(0.3), UserStoppedSpeakingFrame(), SleepFrame(0.3))
    assert len(tickets.made) == 1 and tickets.made[0]["location"] == "중앙로 12번길"
    assert sentences(down)[0].startswith("접수되었습니다") and answered(down)[0].route == "rule"
    assert fake.calls == 2  # the yes is a rule: no model call
