"""The one structured-output model call of a turn, streamed: nothing else.

``StructuredLLMClient`` asks the model (vLLM's OpenAI-compatible server, or llama.cpp's) for a
JSON object constrained by the turn's schema (emergency, reply, intent, category, location, time,
flow, answer_source) and streams the ``reply`` string out sentence by sentence while the rest of the
JSON is still being generated. An ``emergency`` flag other than "none" ends the call to the model at
once: nothing of its reply is spoken (the dialog stage escalates instead). It parses and validates
the whole answer, and turns every way a call can fail (unreachable server, slow first token, HTTP
error, invalid or cut-off JSON, empty reply) into one ``LLMTurnError`` with a ``kind`` for the turn
record and a ``failure`` for the policy.

It is no pipeline stage: the dialog stage (``bot/stages/dialog_llm.py``) holds one and gives each
model turn its instruction and schema (``stream_turn``). What a turn *means* (rules, the model or
not, what follows a failure) is that stage's and the policy's (``bot/dialog/policy.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from loguru import logger
from openai import APIConnectionError, APITimeoutError, AsyncOpenAI, DefaultAsyncHttpxClient
from openai.types import CompletionUsage
from pipecat.metrics.metrics import LLMTokenUsage

from bot.config import LLMConfig
from bot.dialog.domain import EMERGENCY_FIELD, Domain, response_format_for
from bot.dialog.policy import LLMFailure
from bot.dialog.reply_stream import KoreanSentenceSplitter, ReplyFieldExtractor, TurnParseError, parse_turn


class LLMTurnError(Exception):
    """Why a model turn failed: ``kind`` (detailed, e.g. "http_503") goes into the turn record,
    ``failure`` (its class) to the policy."""

    def __init__(self, kind: str, detail: str, *, failure: LLMFailure):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.failure = failure


async def _nothing() -> None:
    return None


async def _ignore_usage(_usage: LLMTokenUsage) -> None:
    return None


class StructuredLLMClient:
    """One streamed JSON-schema completion per call of ``stream_turn``, over an OpenAI-compatible server.

    Args:
        config: The ``[llm]`` section (server, model, sampling, timeouts, dialect).
        domain: Intents, categories and emergencies: what an answer must hold to be valid.
        api_key: Sent as the bearer token ("EMPTY" for a local server).
    """

    def __init__(self, *, config: LLMConfig, domain: Domain, api_key: str) -> None:
        self.config = config
        self._domain = domain
        # max_retries=0: a retry would be a second model call the caller waits for.
        self._openai = AsyncOpenAI(
            api_key=api_key,
            base_url=config.base_url,
            max_retries=0,
            # The ignore: openai 3.x hints httpx2's Timeout only, but converts httpx's (normalize_httpx_timeout).
            timeout=httpx.Timeout(config.total_timeout_ms / 1000.0, connect=2.0),  # type: ignore[arg-type]  # see above
            http_client=DefaultAsyncHttpxClient(),
        )

    @property
    def model(self) -> str:
        """The model's name (the stage's metrics carry it)."""
        return self.config.model

    async def aclose(self) -> None:
        """Close the HTTP client (its keep-alive sockets to the LLM server otherwise stay open,
        CLOSE-WAIT, until garbage collection: the soak counted one per call)."""
        try:
            await self._openai.close()
        except Exception as e:  # noqa: BLE001 - teardown must not fail
            logger.debug("closing the LLM client: {}", e)

    async def stream_turn(
        self,
        messages: list[dict[str, Any]],
        *,
        instruction: str,
        schema: dict[str, Any],
        on_sentence: Callable[[str], Awaitable[None]],
        on_first_token: Callable[[], Awaitable[None]] = _nothing,
        on_usage: Callable[[LLMTokenUsage], Awaitable[None]] = _ignore_usage,
    ) -> dict:
        """Make the one model call: ``instruction`` as the system message before ``messages``, the
        answer constrained by ``schema``. Each complete reply sentence goes to ``on_sentence`` as it
        arrives; returns the parsed, validated turn or raises ``LLMTurnError``.

        A turn whose ``emergency`` field names a kind before the reply opens comes back at once as
        ``{"emergency": kind}`` alone (the stream is closed: the rest would be replaced anyway).
        """
        answer = _Answer(self._domain.emergency_names[1:], on_sentence)
        t0 = time.monotonic()
        stream = None
        try:
            async with asyncio.timeout(self.config.first_token_timeout_ms / 1000.0):
                stream = await self._openai.chat.completions.create(**self._request(messages, instruction, schema))
                chunks = stream.__aiter__()
                chunk = await _next_content_chunk(chunks)
            await on_first_token()
            logger.debug("LLM first token after {:.0f} ms", (time.monotonic() - t0) * 1000)
            async with asyncio.timeout(self.config.total_timeout_ms / 1000.0):
                while chunk is not None and not await answer.feed(chunk, on_usage):
                    chunk = await anext(chunks, None)
        except LLMTurnError:
            raise
        except Exception as e:
            raise self._turn_error(e, answering=bool(answer.raw)) from e
        finally:
            # Also on interruption (CancelledError): release the HTTP stream so vLLM stops generating.
            if stream is not None:
                await stream.close()
        return await answer.finish(self._domain)

    def _request(self, messages: list[dict[str, Any]], instruction: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The chat completion's parameters (streamed, with the usage at the end)."""
        params: dict[str, Any] = {
            "model": self.config.model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "messages": [{"role": "system", "content": instruction}, *messages] if instruction else messages,
            "response_format": response_format_for(self.config.dialect, schema),
        }
        if self.config.dialect == "openai":
            params["extra_body"] = {"chat_template_kwargs": {"enable_thinking": self.config.enable_thinking}}
        return params

    def _turn_error(self, e: Exception, *, answering: bool) -> LLMTurnError:
        """What went wrong, for the record (``kind``) and the policy (``failure``)."""
        if isinstance(e, TimeoutError):
            phase = "total_timeout" if answering else "first_token_timeout"
            return LLMTurnError(phase, f"no {'complete answer' if answering else 'first token'} in time",
                                failure=LLMFailure.TIMEOUT)
        if isinstance(e, APITimeoutError):
            return LLMTurnError("total_timeout", repr(e), failure=LLMFailure.TIMEOUT)
        if isinstance(e, (httpx.HTTPError, APIConnectionError)):
            return LLMTurnError("unreachable", f"{type(e).__name__}: {e} ({self.config.base_url})",
                                failure=LLMFailure.UNREACHABLE)
        status = getattr(e, "status_code", None)  # openai.APIError and friends carry the HTTP status
        kind = f"http_{status}" if status else type(e).__name__
        return LLMTurnError(kind, str(e)[:300], failure=LLMFailure.REFUSED)


class _Answer:
    """One answer as it streams in: the reply's sentences out, the emergency flag, the raw JSON."""

    def __init__(self, emergencies: list[str], on_sentence: Callable[[str], Awaitable[None]]):
        self._emergencies = emergencies
        self._on_sentence = on_sentence
        self._reply = ReplyFieldExtractor()
        self._flag = ReplyFieldExtractor(EMERGENCY_FIELD)
        self._splitter = KoreanSentenceSplitter()
        self.flagged: str | None = None
        self.raw: list[str] = []
        self.finish_reason: str | None = None
        self.sentences = 0

    async def feed(self, chunk: Any, on_usage: Callable[[LLMTokenUsage], Awaitable[None]]) -> bool:
        """Take one streamed chunk; True when the model flagged an emergency (read no further)."""
        if chunk.usage:
            await on_usage(_token_usage(chunk.usage))
        if not chunk.choices:
            return False
        choice = chunk.choices[0]
        text = choice.delta.content if choice.delta else None
        if text:
            self.raw.append(text)
            self._flag.feed(text)
            if self._flag.done and not self._reply.started and self._flag.reply in self._emergencies:
                self.flagged = self._flag.reply
                return True
            for sentence in self._splitter.push(self._reply.feed(text)):
                await self._sentence(sentence)
        self.finish_reason = choice.finish_reason or self.finish_reason
        return False

    async def finish(self, domain: Domain) -> dict:
        """The whole answer, parsed and validated (or the emergency flag alone)."""
        if self.flagged is not None:
            logger.warning("the model flagged an emergency ({}) before its reply", self.flagged)
            return {EMERGENCY_FIELD: self.flagged}
        text = "".join(self.raw)
        if self.finish_reason == "length":
            raise LLMTurnError("cut_off", f"finish_reason=length after {len(text)} chars (raise llm.max_tokens?)",
                               failure=LLMFailure.CUT_OFF)
        try:
            turn = parse_turn(text)
        except TurnParseError as e:
            raise LLMTurnError("invalid_json", str(e), failure=LLMFailure.INVALID) from e
        errors = domain.validate(turn)
        if errors:
            raise LLMTurnError("schema", "; ".join(errors)[:300], failure=LLMFailure.INVALID)
        # Whatever the splitter still holds is the last sentence of the reply.
        for sentence in self._splitter.flush():
            await self._sentence(sentence)
        if not self.sentences:
            raise LLMTurnError("empty_reply", "the reply field was empty", failure=LLMFailure.EMPTY)
        return turn

    async def _sentence(self, sentence: str) -> None:
        sentence = sentence.strip()
        if sentence:
            self.sentences += 1
            await self._on_sentence(sentence)


def _token_usage(usage: CompletionUsage) -> LLMTokenUsage:
    """The completion's usage as Pipecat's (the same reading as its OpenAI service)."""
    prompt, completion = usage.prompt_tokens_details, usage.completion_tokens_details
    return LLMTokenUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                         total_tokens=usage.total_tokens,
                         cache_read_input_tokens=prompt.cached_tokens if prompt else None,
                         cache_creation_input_tokens=getattr(prompt, "cache_write_tokens", None) if prompt else None,
                         reasoning_tokens=completion.reasoning_tokens if completion else None)


async def _next_content_chunk(chunks: AsyncIterator[Any]) -> Any:
    """Wait for the first chunk that carries content or a finish reason (the 'first token')."""
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta and (chunk.choices[0].delta.content or chunk.choices[0].finish_reason):
            return chunk
        if chunk.choices and chunk.choices[0].finish_reason:
            return chunk
    raise LLMTurnError("empty_stream", "the stream ended before any token", failure=LLMFailure.EMPTY)
