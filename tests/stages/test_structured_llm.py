"""The structured LLM stage against a fake vLLM server: one call, streamed reply, slots, failures."""

import asyncio
import dataclasses
import json
import re
import time

import pytest

from bot.config import load_config
from bot.dialog.policy import DialogPolicy, LLMFailure
from bot.testing.fake_llm import FakeLLM
from bot.tools.chat import DialogSession


@pytest.fixture(scope="module")
def fake():
    with FakeLLM(first_token_delay=0.05, token_delay=0.005) as server:
        yield server


@pytest.fixture
def config(fake):
    fake.reset()
    return load_config(overrides=[f"llm.base_url='{fake.base_url}'", "llm.first_token_timeout_ms=600",
                                  "llm.total_timeout_ms=3000"])


def turn(reply, **kw):
    base = {"reply": reply, "intent": "report_problem", "category": "waste", "location": None, "time": None,
            "flow": "continue"}
    base.update(kw)
    return base


def _patient(config):
    """The module's config without its short model timeouts, for a test of what is sent or streamed, not of
    the timeouts: the 0.6 s first token and 3 s whole answer gave the apology on a loaded CI machine
    (stress-ng beside a fresh-clone .ci/run), the request not yet at the fake."""
    return dataclasses.replace(config, llm=dataclasses.replace(config.llm, first_token_timeout_ms=10_000,
                                                               total_timeout_ms=30_000))


APOLOGY_START = "죄송합니다"
JSON_DEBRIS = re.compile(r'[{}"\\]|"?(intent|category|location|flow)"?\s*:')


async def test_schema_is_sent_in_the_openai_dialect(fake, config):
    async with DialogSession(_patient(config)) as s:
        await s.turn("쓰레기 수거 문의드리려고요")
    body = fake.requests[-1]
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    props = rf["json_schema"]["schema"]["properties"]
    assert list(props)[:2] == ["emergency", "reply"]  # the flag is known before a sentence is spoken
    assert "waste" in props["category"]["enum"] and set(props["flow"]["enum"]) == {"continue", "end", "new_topic"}
    assert body["stream"] is True
    assert body["chat_template_kwargs"] == {"enable_thinking": False}  # no hidden reasoning tokens


async def test_schema_is_sent_in_the_llama_cpp_dialect(fake, config):
    config = _patient(config)
    config = dataclasses.replace(config, llm=dataclasses.replace(config.llm, dialect="llama_cpp"))
    async with DialogSession(config) as s:
        await s.turn("쓰레기 수거 문의드리려고요")
    rf = fake.requests[-1]["response_format"]
    assert rf["type"] == "json_object" and rf["schema"]["properties"]["reply"]["type"] == "string"


async def test_first_sentence_reaches_tts_before_the_json_ends(fake, config):
    long_tail = "수거 일정은 동마다 다릅니다. " * 3
    fake.script(turn("네, 대형 폐기물 수거를 도와드릴게요. " + long_tail + "어느 동이신가요?"), token_delay=0.03)
    async with DialogSession(_patient(config)) as s:  # streaming is what is tested, not the timeouts
        t = await s.turn("대형 폐기물 버리려고요")
    first_at, first = t.sentences[0]
    assert first == "네, 대형 폐기물 수거를 도와드릴게요."
    # The rest of the JSON (about 100 more chunks at 30 ms) was still streaming.
    assert t.ended_at - first_at > 1.0
    assert len(t.sentences) == 5
    for _, sentence in t.sentences:
        assert not JSON_DEBRIS.search(sentence), sentence
    assert t.record.llm_calls == 1 and t.record.route == "llm"


async def test_escaped_quotes_and_newlines_in_the_reply_are_spoken_as_text(fake, config):
    fake.script(turn('"민원24"에서 발급하실 수 있어요.\n다른 문의 있으신가요?', intent="ask_info", category="certificates"),
                chunk_chars=1)
    async with DialogSession(_patient(config)) as s:  # the escapes are what is tested, not the timeouts
        t = await s.turn("등본 어디서 떼요")
    assert t.reply == '"민원24"에서 발급하실 수 있어요. 다른 문의 있으신가요?'
    assert "\\" not in t.reply


async def test_slots_carry_over_and_new_topic_clears_them(fake, config):
    fake.script(turn("어느 위치인가요?", location="역삼동 123", category="illegal_parking"))
    fake.script(turn("언제부터 주차되어 있었나요?", time="오늘 아침", category="none"))
    fake.script(turn("가로등 고장 신고 접수해 드릴게요.", category="street_lights", flow="new_topic"))
    async with DialogSession(config) as s:
        await s.turn("불법 주차 신고하려고요. 역삼동 123이요")
        t2 = await s.turn("오늘 아침부터요")
        assert s.llm.dialog.known_slots() == {"category": "illegal_parking", "location": "역삼동 123", "time": "오늘 아침"}
        await s.turn("그리고 가로등이 고장났어요")
        assert s.llm.dialog.known_slots() == {"category": "street_lights"}
    # The second request's prompt already knew the location: the bot does not ask again.
    system = fake.requests[1]["messages"][0]
    assert system["role"] == "system" and "역삼동 123" in system["content"]
    assert t2.record.llm_calls == 1


async def test_shortcut_turns_make_zero_model_calls(fake, config):
    async with DialogSession(config) as s:
        greet = await s.turn("여보세요?")
        again = await s.turn("다시 말씀해 주세요")
        person = await s.turn("상담원 연결해 주세요")
        bye = await s.turn("네 감사합니다!")
    assert fake.calls == 0
    assert [t.record.route for t in (greet, again, person, bye)] == ["shortcut"] * 4
    assert all(t.record.llm_calls == 0 for t in (greet, again, person, bye))
    assert greet.reply in again.reply  # repeat replays the last reply
    # No transfer number configured: the bot says so instead of promising a person.
    assert person.reply.startswith("죄송합니다, 지금은 상담원 연결이 어렵습니다")
    assert not s.llm.dialog.transfer_requested
    assert s.llm.last_result.flow == "end"


async def test_a_person_is_promised_only_when_a_transfer_number_is_set(fake, config):
    config = dataclasses.replace(config, call=dataclasses.replace(config.call, transfer_number="+8221200000"),
                                 line=dataclasses.replace(config.line, hours=["24/7"], breaks=[]))
    async with DialogSession(config) as s:
        person = await s.turn("상담원 연결해 주세요")
    assert person.reply.startswith("상담원에게 연결해 드리겠습니다")
    assert s.llm.dialog.transfer_requested and fake.calls == 0


async def test_a_greeting_with_a_request_goes_to_the_model(fake, config):
    async with DialogSession(config) as s:
        t = await s.turn("안녕하세요 쓰레기 수거 문의드리려고요")
    assert fake.calls == 1 and t.record.route == "llm"


@pytest.mark.parametrize(
    ("mode", "kind", "failure"),
    [
        ("http_error", "http_500", LLMFailure.REFUSED),
        ("invalid_json", "invalid_json", LLMFailure.INVALID),
        ("length", "cut_off", LLMFailure.CUT_OFF),
        ("hang", "first_token_timeout", LLMFailure.TIMEOUT),
        ("drop", "unreachable", LLMFailure.UNREACHABLE),  # a connection cut mid-stream (httpx2 under openai)
    ],
)
async def test_failures_give_the_apology_within_the_timeout(fake, config, mode, kind, failure, monkeypatch):
    told = []
    model_failed = DialogPolicy.model_failed

    def spy(self, previous_turn_failed, failure=None):
        told.append(failure)
        return model_failed(self, previous_turn_failed, failure=failure)

    monkeypatch.setattr(DialogPolicy, "model_failed", spy)
    body = turn("네, 확인해 드릴게요. 잠시만요, 조금 더 길게 말씀드리면 이렇습니다. 끝.")
    if mode == "invalid_json":  # the reply streams fine, then the JSON breaks
        body = json.dumps(body, ensure_ascii=False).replace('"report_problem"', "report_problem")
    fake.script(body, mode=mode, token_delay=0.01)
    async with DialogSession(config) as s:
        started = time.monotonic()
        t = await asyncio.wait_for(s.turn("쓰레기 수거 문의요"), timeout=5)
    assert time.monotonic() - started < 0.6 + 1.0  # first-token timeout plus slack
    assert t.sentences[-1][1].startswith(APOLOGY_START)
    assert t.record.route == "error" and t.record.error
    if kind:
        assert t.record.error.startswith(kind)
        assert told == [failure]  # the policy is told the kind of failure, typed
    assert len(told) == 1 and isinstance(told[0], LLMFailure)
    assert fake.calls == 1 and t.record.llm_calls == 1  # no silent retry
    for _, sentence in t.sentences:
        assert not JSON_DEBRIS.search(sentence) and "Error" not in sentence


def test_a_stream_without_tokens_fails_as_empty():
    from bot.stages.structured_llm import LLMTurnError, _next_content_chunk

    async def no_chunks():
        return
        yield

    with pytest.raises(LLMTurnError) as e:
        asyncio.run(_next_content_chunk(no_chunks()))
    assert e.value.kind == "empty_stream" and e.value.failure is LLMFailure.EMPTY


async def test_unreachable_server_gives_the_apology(config):
    config = load_config(overrides=["llm.base_url='http://127.0.0.1:9/v1'"])
    async with DialogSession(config) as s:
        t = await asyncio.wait_for(s.turn("쓰레기 수거 문의요"), timeout=5)
    assert t.record.error.startswith("unreachable")
    assert t.reply.startswith(APOLOGY_START)


@pytest.mark.slow  # a subprocess or a real model
def test_chat_command_prints_one_json_line_per_turn(fake):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "run_bot.py", "chat", "--set", f"llm.base_url='{fake.base_url}'"],
        input="여보세요\n쓰레기 수거 문의드리려고요\n감사합니다\n이 줄은 읽히지 않습니다\n",
        capture_output=True, text=True, timeout=60,
    )
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [line["route"] for line in lines] == ["shortcut", "llm", "shortcut"]
    assert [line["llm_calls"] for line in lines] == [0, 1, 0]
    assert lines[-1]["flow"] == "end"
    assert set(lines[1]) >= {"route", "reply", "slots", "flow", "llm_calls", "ms"}
    assert lines[1]["ms"]["llm_first_token"] > 0


def test_the_http_client_uses_the_configured_timeouts_and_never_retries():
    from bot.call.assets import DialogAssets
    from bot.call.wiring import make_llm
    from bot.config import Secrets

    config = load_config(overrides=["llm.total_timeout_ms=90000"])
    llm = make_llm(config, Secrets(None, None, "EMPTY"), DialogAssets.load(config))
    assert llm.client._openai.timeout.read == 90.0  # a slow model is not cut at the client's default
    assert llm.client._openai.max_retries == 0  # a retry would be a second model call in one turn


async def test_an_empty_turn_prompt_goes_to_the_model_not_to_an_old_shortcut(fake, config):
    # Pipecat answers an empty turn that cut the bot off with a developer message; the caller's
    # previous words ("감사합니다" = goodbye) must not be replayed as a shortcut.
    from pipecat.frames.frames import LLMContextFrame

    fake.script(turn("죄송합니다, 다시 한 번 말씀해 주시겠어요?", intent="other", category="none"))
    async with DialogSession(config) as s:
        s._context.add_message({"role": "user", "content": "감사합니다"})
        s._context.add_message({"role": "assistant", "content": "네, 좋은 하루 보내세요."})
        s._context.add_message({"role": "developer", "content": "The user may have said something; ask them to repeat."})
        s._collector.done.clear()
        await s._worker.queue_frame(LLMContextFrame(s._context))
        await s._collector.done.wait()
    assert fake.calls == 1
    assert s.llm.last_result.route == "llm" and s.llm.last_result.flow == "continue"
    sent = fake.requests[0]["messages"]
    assert "ask them to repeat" in sent[-1]["content"]


@pytest.mark.parametrize("dialect", ["openai", "llama_cpp"])
async def test_the_client_sends_the_turns_instruction_and_schema_as_given(fake, config, dialect):
    from bot.call.assets import DialogAssets
    from bot.stages.structured_llm import StructuredLLMClient

    domain = DialogAssets.load(config).domain
    client = StructuredLLMClient(config=dataclasses.replace(config.llm, dialect=dialect), domain=domain,
                                 api_key="EMPTY")
    fake.script(turn("네, 확인해 드릴게요. 어느 동이신가요?"))
    said: list[str] = []

    async def on_sentence(sentence: str) -> None:
        said.append(sentence)

    schema = domain.response_schema(40, ["faq-x"])
    answer = await client.stream_turn([{"role": "user", "content": "쓰레기 수거요"}], instruction="INSTRUCTION-1",
                                      schema=schema, on_sentence=on_sentence)
    await client.aclose()
    assert said == ["네, 확인해 드릴게요.", "어느 동이신가요?"] and answer["intent"] == "report_problem"
    body = fake.requests[-1]
    assert body["messages"] == [{"role": "system", "content": "INSTRUCTION-1"}, {"role": "user", "content": "쓰레기 수거요"}]
    sent = body["response_format"]["json_schema"]["schema"] if dialect == "openai" else body["response_format"]["schema"]
    assert sent == schema
