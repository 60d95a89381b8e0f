"""The model's second net for emergencies (issue 33): the one structured answer carries an
``emergency`` field, and a flagged turn escalates like a rule hit, still with one model call.

The fake vLLM server streams scripted answers in the schema's order, as vLLM's guided decoding does.
"""

import time

import pytest

from bot.config import load_config
from bot.testing.fake_llm import FakeLLM
from bot.tools.chat import DialogSession

# Words the rules do not catch (checked below): only the model can see the danger in them.
MISSED = "아 그게 좀 말씀드리기 어려운데요 그 사람이 밤에 다시 온대요"


@pytest.fixture(scope="module")
def fake():
    with FakeLLM(first_token_delay=0.02, token_delay=0.002) as server:
        yield server


@pytest.fixture
def config(fake):
    fake.reset()
    return load_config(overrides=[f"llm.base_url='{fake.base_url}'", "llm.first_token_timeout_ms=1500",
                                  "llm.total_timeout_ms=20000", "call.emergency_transfer={}"])


def answer(emergency: str, reply: str = "무슨 일인지 조금 더 말씀해 주시겠어요?", **kw) -> dict:
    return {"emergency": emergency, "reply": reply, "intent": "other", "category": "none", "location": None,
            "time": None, "flow": "continue"} | kw


def test_the_rules_miss_the_sentence():
    from bot.dialog.emergency import EmergencyRules

    assert EmergencyRules.load().classify(MISSED) is None


@pytest.mark.parametrize(("kind", "number"), [("crime", "112"), ("rescue", "119"), ("suicide", "109")])
async def test_a_flagged_turn_escalates_instead_of_the_reply(fake, config, kind, number):
    fake.script(answer(kind))
    async with DialogSession(config) as s:
        t = await s.turn(MISSED)
    assert len(fake.requests) == 1  # one model call, no second one to confirm
    assert t.record.route == "emergency" and t.record.escalation == number and t.record.llm_calls == 1
    assert number in t.sentences[0][1]
    assert "조금 더 말씀해" not in t.reply  # the model's reply is replaced, never spoken


async def test_no_flag_is_an_ordinary_model_turn(fake, config):
    fake.script(answer("none", "네, 어떤 일이신가요?"))
    async with DialogSession(config) as s:
        t = await s.turn(MISSED)
    assert t.record.route == "llm" and t.record.escalation is None and t.reply == "네, 어떤 일이신가요?"


async def test_the_stream_is_left_as_soon_as_the_flag_is_read(fake, config):
    # 300 characters at 8 characters per 0.1 s: the whole answer would stream for about 4 s.
    fake.script(answer("medical", "가" * 150 + "."), token_delay=0.1, chunk_chars=8)
    start = time.monotonic()
    async with DialogSession(config) as s:
        t = await s.turn(MISSED)
    assert t.record.escalation == "119"
    assert time.monotonic() - start < 2.0  # the flag is the first field: read within a few chunks


async def test_a_flag_after_the_reply_still_escalates(fake, config):
    # A server that ignores the schema's order: what was spoken stays, the escalation follows it.
    scripted = answer("none", "네, 알겠습니다.")
    del scripted["emergency"]
    fake.script({**scripted, "emergency": "fire"})
    async with DialogSession(config) as s:
        t = await s.turn(MISSED)
    assert t.reply.startswith("네, 알겠습니다.") and "119" in t.reply and t.record.escalation == "119"


async def test_a_kind_outside_the_schema_is_an_invalid_answer(fake, config):
    fake.script(answer("earthquake"))
    async with DialogSession(config) as s:
        t = await s.turn(MISSED)
    assert t.record.route == "error" and "emergency" in (t.record.error or "")


async def test_the_model_flag_counts_as_a_yes_to_the_clarifying_question(fake, config):
    async with DialogSession(config) as s:
        ask = await s.turn("윗집에서 쿵 하는 소리가 나고 비명 소리가 났어요")
        assert ask.record.route == "emergency" and ask.record.escalation is None  # unsure: one question
        fake.script(answer("crime"))
        t = await s.turn("잘 모르겠는데 지금은 조용해졌어요 근데 아까 그 남자가 소리를 질렀어요")
    assert t.record.escalation == "112"
