"""bot/testing/fake_llm.py against the real openai client and raw HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from bot.config import load_config
from bot.dialog.domain import load_domain
from bot.dialog.reply_stream import ReplyFieldExtractor, TurnParseError, parse_turn
from bot.testing.fake_llm import FakeLLM
from bot.testing.responders import DEFAULT_TURN
from tests.conftest import ROOT

DOMAIN = load_domain(ROOT / "bot" / "data" / "domain.toml")
MESSAGES = [{"role": "system", "content": "당신은 상담원입니다."}, {"role": "user", "content": "도로가 파였어요."}]
TURN = {
    "reply": '네, "포트홀" 신고 접수해 드릴게요. 위치가 어디인가요?',
    "intent": "report_problem",
    "category": "roads",
    "location": None,
    "time": None,
    "flow": "continue",
}


@pytest.fixture
def fake():
    with FakeLLM(first_token_delay=0.02, token_delay=0.0) as f:
        yield f


def client(fake: FakeLLM, **kw) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=fake.base_url, api_key="EMPTY", max_retries=0, **kw)


async def stream(fake: FakeLLM, **kw):
    """Stream one completion; returns (chunks, content, finish_reason, usage, first_chunk_secs)."""
    params = dict(
        model="test-model",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=256,
        temperature=0.2,
        response_format=DOMAIN.response_format("openai", 160),
    )
    params.update(kw)
    t0 = time.monotonic()
    first = None
    chunks, content, finish, usage = [], "", None, None
    async with client(fake) as c:
        s = await c.chat.completions.create(**params)
        async for chunk in s:
            first = first if first is not None else time.monotonic() - t0
            chunks.append(chunk)
            if chunk.choices:
                content += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage:
                usage = chunk.usage
    return chunks, content, finish, usage, first


async def test_ok_stream(fake: FakeLLM) -> None:
    fake.script(reply_json=TURN, first_token_delay=0.15, token_delay=0.002, chunk_chars=3)
    chunks, content, finish, usage, first = await stream(fake)
    assert json.loads(content) == TURN
    assert list(json.loads(content)) == list(TURN)  # key order kept
    assert finish == "stop"
    assert first >= 0.14
    # vLLM framing: role chunk first, then content deltas of <= chunk_chars, finish chunk, usage chunk.
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    deltas = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert all(0 < len(d) <= 3 for d in deltas) and "".join(deltas) == content
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and usage.completion_tokens == len(deltas)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert all(c.object == "chat.completion.chunk" and c.model == "test-model" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    # the extractor gets exactly the reply out of the streamed deltas
    ex = ReplyFieldExtractor()
    assert "".join(ex.feed(d) for d in deltas) == TURN["reply"]
    assert ex.finish() == TURN


async def test_request_is_recorded(fake: FakeLLM) -> None:
    await stream(fake)
    assert fake.calls == 1 and len(fake.requests) == 1
    body = fake.requests[0]
    assert body["response_format"] == DOMAIN.response_format("openai", 160)
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["messages"] == MESSAGES
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "test-model" and body["max_tokens"] == 256


async def test_llama_cpp_format_recorded(fake: FakeLLM) -> None:
    await stream(fake, response_format=DOMAIN.response_format("llama_cpp", 100))
    assert fake.requests[0]["response_format"]["type"] == "json_object"
    assert fake.requests[0]["response_format"]["schema"]["properties"]["reply"]["maxLength"] == 100


async def test_default_responder_is_a_valid_turn(fake: FakeLLM) -> None:
    _, content, finish, _, _ = await stream(fake)
    turn = parse_turn(content)
    assert turn == DEFAULT_TURN and finish == "stop"
    assert DOMAIN.validate(turn, reply_max_chars=160) == []


async def test_default_responder_follows_request_schema(fake: FakeLLM) -> None:
    schema = DOMAIN.response_schema(5)
    schema["properties"]["intent"]["enum"] = ["ask_info"]
    rf = {"type": "json_schema", "json_schema": {"name": "turn", "schema": schema, "strict": True}}
    _, content, _, _, _ = await stream(fake, response_format=rf)
    turn = json.loads(content)
    assert turn["intent"] == "ask_info" and len(turn["reply"]) == 5


async def test_length_mode(fake: FakeLLM) -> None:
    text = json.dumps(TURN, ensure_ascii=False)
    fake.script(reply_json=TURN, mode="length", cut_at=len(text) - 20)
    _, content, finish, _, _ = await stream(fake)
    assert finish == "length"
    assert content == text[: len(text) - 20]
    with pytest.raises(TurnParseError):
        parse_turn(content)
    ex = ReplyFieldExtractor()
    assert ex.feed(content) == TURN["reply"] and ex.done  # the reply was complete before the cut


async def test_length_default_cut_is_half(fake: FakeLLM) -> None:
    fake.script(mode="length")
    _, content, finish, _, _ = await stream(fake)
    assert finish == "length"
    assert len(content) == len(json.dumps(DEFAULT_TURN, ensure_ascii=False)) // 2


async def test_max_tokens_cuts_with_length(fake: FakeLLM) -> None:
    fake.script(reply_json=TURN, chunk_chars=2)
    _, content, finish, usage, _ = await stream(fake, max_tokens=5)
    assert finish == "length" and len(content) == 10 and usage.completion_tokens == 5


async def test_http_error_mode(fake: FakeLLM) -> None:
    fake.script(mode="http_error", error_message="engine dead")
    with pytest.raises(openai.InternalServerError) as e:
        await stream(fake)
    assert e.value.status_code == 500
    assert e.value.body["message"] == "engine dead"
    assert fake.calls == 1


async def test_http_error_status(fake: FakeLLM) -> None:
    fake.script(mode="http_error", status=400, error_message="bad schema")
    with pytest.raises(openai.BadRequestError):
        await stream(fake)


async def test_invalid_json_mode(fake: FakeLLM) -> None:
    fake.script(mode="invalid_json")
    _, content, finish, _, _ = await stream(fake)
    assert finish == "stop"
    with pytest.raises(TurnParseError):
        parse_turn(content)
    ex = ReplyFieldExtractor()
    assert ex.feed(content) == "네, 확인해 드릴게요."


async def test_raw_text_script(fake: FakeLLM) -> None:
    fake.script(reply_json="그냥 글", chunk_chars=1)
    _, content, finish, usage, _ = await stream(fake)
    assert content == "그냥 글" and usage.completion_tokens == 4


async def test_drop_mode(fake: FakeLLM) -> None:
    fake.script(reply_json=TURN, mode="drop")
    got = []
    with pytest.raises((openai.APIConnectionError, httpx.HTTPError)):
        async with client(fake) as c:
            s = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            async for chunk in s:
                if chunk.choices:
                    got.append(chunk.choices[0].delta.content or "")
    text = "".join(got)
    assert 0 < len(text) < len(json.dumps(TURN, ensure_ascii=False))


async def test_hang_mode(fake: FakeLLM) -> None:
    fake.script(mode="hang")
    async with client(fake) as c:
        s = await asyncio.wait_for(c.chat.completions.create(model="m", messages=MESSAGES, stream=True), 2)
        it = s.__aiter__()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(it.__anext__(), 0.4)
        await s.close()
    # the server is still fine afterwards
    _, content, _, _, _ = await stream(fake)
    assert parse_turn(content) == DEFAULT_TURN


async def test_scripts_are_consumed_in_order(fake: FakeLLM) -> None:
    fake.script(reply_json=dict(TURN, reply="하나."))
    fake.script(reply_json=dict(TURN, reply="둘."))
    assert fake.pending_scripts == 2
    replies = [json.loads((await stream(fake))[1])["reply"] for _ in range(3)]
    assert replies == ["하나.", "둘.", DEFAULT_TURN["reply"]]
    assert fake.calls == 3 and fake.pending_scripts == 0
    fake.reset()
    assert fake.calls == 0 and fake.requests == []


async def test_a_script_for_heard_words_waits_for_the_call_that_has_them(fake: FakeLLM) -> None:
    # A speculative call on the caller's first words comes first and must not take the script.
    fake.script(reply_json=dict(TURN, reply="긴 답."), heard="파였어요")
    partial = [MESSAGES[0], {"role": "user", "content": "도로가"}]
    first = json.loads((await stream(fake, messages=partial))[1])["reply"]
    assert first == DEFAULT_TURN["reply"] and fake.pending_scripts == 1
    assert json.loads((await stream(fake))[1])["reply"] == "긴 답." and fake.pending_scripts == 0


async def test_no_usage_chunk_without_include_usage(fake: FakeLLM) -> None:
    chunks, _, finish, usage, _ = await stream(fake, stream_options=openai.NOT_GIVEN)
    assert usage is None and finish == "stop" and chunks[-1].choices[0].finish_reason == "stop"


async def test_non_streaming(fake: FakeLLM) -> None:
    fake.script(reply_json=TURN)
    async with client(fake) as c:
        r = await c.chat.completions.create(model="m", messages=MESSAGES, response_format=DOMAIN.response_format("openai", 160))
    assert json.loads(r.choices[0].message.content) == TURN
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens > 0


async def test_models_endpoint(fake: FakeLLM) -> None:
    async with client(fake) as c:
        models = await c.models.list()
    assert [m.id for m in models.data] == ["fake-model"]


async def test_raw_sse_framing(fake: FakeLLM) -> None:
    fake.script(reply_json={"reply": "네."}, chunk_chars=4)
    body = {"model": "m", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    async with httpx.AsyncClient() as http:
        r = await http.post(fake.base_url + "/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    data = [json.loads(e[6:]) for e in events[:-1]]
    assert data[0]["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    assert set(data[0]) == {"id", "object", "created", "model", "choices"}
    assert [d["choices"][0]["delta"].get("content") for d in data[1:-2]] == ['{"re', 'ply"', ': "네', '."}']
    assert data[-2]["choices"][0]["finish_reason"] == "stop" and data[-2]["choices"][0]["delta"] == {}
    assert data[-1]["choices"] == [] and set(data[-1]["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_stop_is_quick_with_a_hanging_request() -> None:
    fake = FakeLLM(first_token_delay=0).start()
    fake.script(mode="hang")

    result: dict[str, object] = {}

    async def go() -> None:
        try:
            async with client(fake) as c:
                s = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                result["chunks"] = [ch async for ch in s]
        except Exception as e:  # the server going away may end the stream either way
            result["error"] = e

    t = threading.Thread(target=lambda: asyncio.run(go()), daemon=True)
    t.start()
    assert fake.wait_for_calls(1, timeout=5)
    t0 = time.monotonic()
    fake.stop()
    assert time.monotonic() - t0 < 5
    t.join(5)
    assert not t.is_alive()
    assert result.get("chunks", []) == []  # never a token


def test_standalone_cli() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.testing.fake_llm", "--port", str(port), "--first-token-delay", "0", "--log-level", "warning"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                break
            except httpx.HTTPError as e:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.stdout.read().decode() if proc.stdout else "no output") from e
                time.sleep(0.1)
        # Without --model it serves config.toml's llm.model: the README's `fake_llm --port 8000` passes `check`.
        assert r.json()["data"][0]["id"] == load_config().llm.model
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "x", "messages": MESSAGES})
        assert parse_turn(r.json()["choices"][0]["message"]["content"]) == DEFAULT_TURN
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_script_file_answers_caller_turns_in_order_but_not_the_startup_probe(tmp_path):
    from bot.ops.preflight import PROBE_CALLER_LINE
    from bot.testing.fake_llm import scripted_responder

    path = tmp_path / "turns.jsonl"
    path.write_text('{"reply": "하나."}\n\n{"reply": "둘."}\n', encoding="utf-8")
    respond = scripted_responder(str(path), lambda body: {"reply": "기본."})

    def body(text):
        return {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": text}]}

    assert respond(body(PROBE_CALLER_LINE)) == {"reply": "기본."}
    assert [respond(body("아무 말"))["reply"] for _ in range(3)] == ["하나.", "둘.", "기본."]
