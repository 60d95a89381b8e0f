"""The city's facts inside the one structured call: prompt, schema, directory rule, records."""

from __future__ import annotations

import pytest

from bot.config import load_config
from bot.testing.fake_llm import FakeLLM
from bot.tools.chat import DialogSession

FACTS_HEADING = "# 참고 정보"


@pytest.fixture(scope="module")
def fake():
    with FakeLLM(first_token_delay=0.02, token_delay=0.002) as server:
        yield server


@pytest.fixture
def config(fake):
    fake.reset()
    return load_config(overrides=[f"llm.base_url='{fake.base_url}'", "llm.first_token_timeout_ms=1500"])


def info_turn(reply, source):
    return {"reply": reply, "intent": "ask_info", "category": "certificates", "location": None, "time": None,
            "flow": "continue", "answer_source": source}


def system_prompt(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "system")


async def test_a_directory_question_is_answered_by_the_rule_without_the_model(fake, config):
    async with DialogSession(config) as s:
        t = await s.turn("음 청소과 전화번호 좀 알려주세요")
    assert fake.calls == 0 and t.record.llm_calls == 0
    assert t.reply.startswith("청소행정과 전화번호는 031-120-2310입니다")
    assert t.record.answer_source == "dept-clean" and t.record.route == "rule"
    assert t.record.retrieval_ms is not None and t.record.retrieval_ms >= 0


async def test_a_fee_question_puts_the_facts_into_the_one_call_after_the_static_prefix(fake, config):
    fake.script(reply_json=info_turn("등본은 한 통에 400원입니다.", "faq-doc-002"))
    fake.script(reply_json=info_turn("그 내용은 정확히 안내해 드리기 어렵습니다.", "none"))
    async with DialogSession(config) as s:
        fee = await s.turn("등본 떼는데 수수료 얼마예요")
        other = await s.turn("오늘 날씨 어때요")
    assert fake.calls == 2 and fee.record.llm_calls == 1
    first, second = system_prompt(fake.requests[0]), system_prompt(fake.requests[1])
    assert "[faq-doc-002]" in first and "400원" in first
    # The facts sit after everything static: the prefix before them is byte-identical turn to turn.
    assert first.index(FACTS_HEADING) > first.index("# 출력 형식")
    assert first.split(FACTS_HEADING)[0] == second.split(FACTS_HEADING)[0]
    assert "faq-doc-002" not in second and "참고 정보 없음" in second
    # The schema lets the model name the fact it used (or none); the record keeps it.
    schema = fake.requests[0]["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"])[:2] == ["emergency", "reply"] and list(schema["properties"])[-1] == "answer_source"
    # ... and only a fact that is in this prompt: a small model cannot cite what it was not shown.
    assert schema["properties"]["answer_source"]["enum"] == ["none", *fee.record.facts]
    second_schema = fake.requests[1]["response_format"]["json_schema"]["schema"]
    assert second_schema["properties"]["answer_source"]["enum"] == ["none"]
    assert fee.record.answer_source == "faq-doc-002" and "faq-doc-002" in fee.record.facts[:3]
    assert other.record.answer_source == "none" and other.record.facts == []


async def test_the_prompt_tells_the_model_to_answer_only_from_the_facts(fake, config):
    fake.script(reply_json=info_turn("네.", "none"))
    async with DialogSession(config) as s:
        await s.turn("인감증명서 대리 발급 되나요")
    prompt = system_prompt(fake.requests[0])
    assert "'참고 정보'에 있는 내용으로만 답하십시오" in prompt and "상담원 연결을 권하십시오" in prompt
    assert "answer_source" in prompt


async def test_a_turn_with_a_lookup_still_makes_at_most_one_model_call(fake, config):
    questions = ["주민등록초본 어떻게 떼요", "대형폐기물 버리려면 어떻게 해요", "주차 과태료 이의신청 하려면요",
                 "민원실 몇 시까지 해요", "수도요금 어디서 내요"]
    async with DialogSession(config) as s:
        for q in questions:
            fake.script(reply_json=info_turn("네, 안내해 드릴게요.", "none"))
            t = await s.turn(q)
            assert t.record.llm_calls <= 1 and t.record.retrieval_ms is not None
    assert fake.calls <= len(questions)


async def test_knowledge_can_be_switched_off(fake, config):
    import dataclasses

    config = dataclasses.replace(config, llm=dataclasses.replace(config.llm, knowledge=False))
    async with DialogSession(config) as s:
        await s.turn("청소과 전화번호 알려주세요")
    assert fake.calls == 1  # no directory rule: the model answers
    assert "answer_source" not in fake.requests[0]["response_format"]["json_schema"]["schema"]["properties"]
