"""The one structured-output model call of a turn, streamed: nothing else.

``StructuredLLMService`` asks the model (vLLM's OpenAI-compatible server, or llama.cpp's) for a
JSON object constrained by this turn's schema (emergency, reply, intent, category, location, time,
flow, answer_source) and streams the ``reply`` string out sentence by sentence while the rest of the
JSON is still being generated. An ``emergency`` flag other than "none" ends the call to the model at
once: nothing of its reply is spoken (the dialog stage escalates instead). It parses and validates the whole answer, and turns every way a call can
fail (unreachable server, slow first token, HTTP error, invalid or cut-off JSON, empty reply) into
one ``LLMTurnError`` with a ``kind`` for the turn record and a ``failure`` for the policy. What a turn *means* (rules, the model or
not, what follows a failure) is the dialog stage's (``bot/stages/dialog_llm.py``) and the policy's
(``bot/dialog/policy.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from loguru import logger
from openai import APIConnectionError, APITimeoutError, AsyncOpenAI, DefaultAsyncHttpxClient
from pipecat.adapters.llm.services.open_ai_adapter import OpenAILLMInvocationParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.base_llm import OpenAILLMSettings
from pipecat.services.openai.llm import OpenAILLMService

from bot.config import LLMConfig
from bot.dialog.domain import EMERGENCY_FIELD, Domain
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


class StructuredLLMService(OpenAILLMService):
    """One streamed JSON-schema completion per call of ``stream_turn``.

    Args:
        config: The ``[llm]`` section (server, model, timeouts, dialect, reply length).
        domain: Intents and categories: the schema and its validation.
        api_key: Sent as the bearer token ("EMPTY" for a local server).
        **kwargs: Passed to ``OpenAILLMService``.
    """

    # Pipecat's own hint (its class attribute alias ``Settings``) does not resolve for mypy.
    _settings: OpenAILLMSettings

    def __init__(self, *, config: LLMConfig, domain: Domain, api_key: str, **kwargs: Any) -> None:
        self._cfg = config  # create_client() reads the timeouts during super().__init__
        super().__init__(
            api_key=api_key,
            base_url=config.base_url,
            settings=OpenAILLMService.Settings(
                model=config.model,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                system_instruction="",
            ),
            **kwargs,
        )
        self._domain = domain
        self.response_format = domain.response_format(config.dialect, config.reply_max_chars, None)

    async def cleanup(self):
        """The call is over: close this call's HTTP client (its keep-alive sockets to the LLM server
        otherwise stay open, CLOSE-WAIT, until garbage collection: the soak counted one per call)."""
        await super().cleanup()
        try:
            await self._client.close()
        except Exception as e:  # noqa: BLE001 - teardown must not fail
            logger.debug("closing the LLM client: {}", e)

    def create_client(self, api_key=None, base_url=None, organization=None, project=None, default_headers=None, **kw):
        # max_retries=0: a retry would be a second model call the caller waits for.
        return AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            # The ignore: openai 3.x hints httpx2's Timeout only, but converts httpx's (normalize_httpx_timeout).
            timeout=httpx.Timeout(self._timeout_total(), connect=2.0),  # type: ignore[arg-type]  # see above
            http_client=DefaultAsyncHttpxClient(),
            default_headers=default_headers,
        )

    def _timeout_total(self) -> float:
        return self._cfg.total_timeout_ms / 1000.0

    def build_chat_completion_params(self, params_from_context: OpenAILLMInvocationParams) -> dict:
        params = super().build_chat_completion_params(params_from_context)
        params["response_format"] = self.response_format
        if self._cfg.dialect == "openai":
            self._merge_extra_body(params, {"chat_template_kwargs": {"enable_thinking": self._cfg.enable_thinking}})
        return params

    def schema_for(self, fact_ids: list[str] | None) -> dict:
        """A turn's schema: ``answer_source`` may only name a fact in this prompt (None: no knowledge)."""
        return self._domain.response_format(self._cfg.dialect, self._cfg.reply_max_chars, fact_ids)

    async def stream_turn(
        self,
        context: LLMContext,
        *,
        on_sentence: Callable[[str], Awaitable[None]],
        on_first_token: Callable[[], Awaitable[None]] = _nothing,
    ) -> dict:
        """Make the one model call with ``response_format``; each complete reply sentence goes to
        ``on_sentence`` as it arrives; returns the parsed, validated turn or raises ``LLMTurnError``.

        A turn whose ``emergency`` field names a kind before the reply opens comes back at once as
        ``{"emergency": kind}`` alone (the stream is closed: the rest would be replaced anyway).
        """
        extractor = ReplyFieldExtractor()
        flag = ReplyFieldExtractor(EMERGENCY_FIELD)
        flagged: str | None = None
        splitter = KoreanSentenceSplitter()
        raw: list[str] = []
        finish_reason = None
        sentences = 0

        async def sentence_out(sentence: str) -> None:
            nonlocal sentences
            sentence = sentence.strip()
            if sentence:
                sentences += 1
                await on_sentence(sentence)

        t0 = time.monotonic()
        await self.start_ttfb_metrics()
        stream = None
        try:
            async with asyncio.timeout(self._cfg.first_token_timeout_ms / 1000.0):
                stream = await self.get_chat_completions(context)
                chunks = stream.__aiter__()
                chunk = await _next_content_chunk(chunks)
            await self.stop_ttfb_metrics()
            await on_first_token()
            logger.debug("LLM first token after {:.0f} ms", (time.monotonic() - t0) * 1000)
            async with asyncio.timeout(self._timeout_total()):
                while chunk is not None:
                    if chunk.usage:
                        await self.start_llm_usage_metrics(self._token_usage(chunk.usage))
                    if chunk.choices:
                        choice = chunk.choices[0]
                        text = choice.delta.content if choice.delta else None
                        if text:
                            raw.append(text)
                            flag.feed(text)
                            if flag.done and not extractor.started and flag.reply in self._domain.emergency_names[1:]:
                                flagged = flag.reply
                                break
                            for sentence in splitter.push(extractor.feed(text)):
                                await sentence_out(sentence)
                        finish_reason = choice.finish_reason or finish_reason
                    chunk = await anext(chunks, None)
        except LLMTurnError:
            raise
        except TimeoutError as e:
            phase = "first_token_timeout" if not raw else "total_timeout"
            raise LLMTurnError(phase, f"no {'first token' if not raw else 'complete answer'} in time",
                               failure=LLMFailure.TIMEOUT) from e
        except APITimeoutError as e:
            raise LLMTurnError("total_timeout", repr(e), failure=LLMFailure.TIMEOUT) from e
        except (httpx.HTTPError, APIConnectionError) as e:
            raise LLMTurnError("unreachable", f"{type(e).__name__}: {e} ({self._cfg.base_url})",
                               failure=LLMFailure.UNREACHABLE) from e
        except Exception as e:  # openai.APIError and friends carry the HTTP status
            status = getattr(e, "status_code", None)
            kind = f"http_{status}" if status else type(e).__name__
            raise LLMTurnError(kind, str(e)[:300], failure=LLMFailure.REFUSED) from e
        finally:
            # Also on interruption (CancelledError): release the HTTP stream so vLLM stops generating.
            if stream is not None:
                await stream.close()

        if flagged is not None:
            logger.warning("the model flagged an emergency ({}) before its reply", flagged)
            return {EMERGENCY_FIELD: flagged}
        text = "".join(raw)
        if finish_reason == "length":
            raise LLMTurnError("cut_off", f"finish_reason=length after {len(text)} chars (raise llm.max_tokens?)",
                               failure=LLMFailure.CUT_OFF)
        try:
            turn = parse_turn(text)
        except TurnParseError as e:
            raise LLMTurnError("invalid_json", str(e), failure=LLMFailure.INVALID) from e
        errors = self._domain.validate(turn)
        if errors:
            raise LLMTurnError("schema", "; ".join(errors)[:300], failure=LLMFailure.INVALID)
        # Whatever the splitter still holds is the last sentence of the reply.
        for sentence in splitter.flush():
            await sentence_out(sentence)
        if not sentences:
            raise LLMTurnError("empty_reply", "the reply field was empty", failure=LLMFailure.EMPTY)
        return turn


async def _next_content_chunk(chunks):
    """Wait for the first chunk that carries content or a finish reason (the 'first token')."""
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta and (chunk.choices[0].delta.content or chunk.choices[0].finish_reason):
            return chunk
        if chunk.choices and chunk.choices[0].finish_reason:
            return chunk
    raise LLMTurnError("empty_stream", "the stream ended before any token", failure=LLMFailure.EMPTY)
