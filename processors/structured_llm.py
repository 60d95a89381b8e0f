"""One structured-output LLM call per caller turn, with Korean regex shortcuts in front.

The model answers a JSON object (reply, intent, category, location, time, flow). The ``reply``
string is streamed to TTS sentence by sentence while the JSON is still being generated; nothing
else of the JSON is ever spoken. Shortcut turns (greetings, thanks, "say again", "a person,
please") are answered from the rules file and never touch the model. Any failure (unreachable
server, slow first token, HTTP error, invalid or cut-off JSON) ends in a short canned apology:
never dead air, never an error read aloud.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from loguru import logger
from openai import APIConnectionError, APITimeoutError, AsyncOpenAI, DefaultAsyncHttpxClient
from pipecat.frames.frames import AggregatedTextFrame, EagerEndOfTurnCancelFrame, EndWorkerFrame, Frame, UserStoppedSpeakingFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.utils.text.base_text_aggregator import TextType

from bot.config import LLMConfig
from bot.dialog.state import CannedReplies, DialogState
from bot.dialog.domain import Domain, render_system_prompt
from bot.telemetry.latency import TurnRecord
from bot.dialog.reply_stream import KoreanSentenceSplitter, ReplyFieldExtractor, TurnParseError, parse_turn
from bot.dialog.shortcuts import ShortcutMatcher


class LLMTurnError(Exception):
    """Why a model turn failed; ``kind`` goes into the turn record."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


@dataclass
class TurnResult:
    """What one caller turn produced (the ``chat`` command prints this)."""

    route: str  # shortcut | llm | error
    reply: str
    flow: str
    intent: str | None
    llm_calls: int
    error: str | None = None


class StructuredLLMService(OpenAILLMService):
    """Pipecat LLM stage: shortcut rules first, else one streamed JSON-schema completion."""

    def __init__(
        self,
        *,
        config: LLMConfig,
        domain: Domain,
        shortcuts: ShortcutMatcher,
        prompt_template: str,
        canned: CannedReplies,
        api_key: str,
        dialog: DialogState | None = None,
        current_record: Callable[[], TurnRecord | None] = lambda: None,
        end_call_on_end_flow: bool = True,
        can_transfer: bool = False,
        **kwargs,
    ):
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
        self._shortcuts = shortcuts
        self._template = prompt_template
        self._canned = canned
        self.dialog = dialog or DialogState()
        self._current_record = current_record
        self._end_call = end_call_on_end_flow
        self._can_transfer = can_transfer
        self._response_format = domain.response_format(config.dialect, config.reply_max_chars)
        self.last_result: TurnResult | None = None
        # Speculation bookkeeping (one run at a time: the LLM's process task is serial).
        self._run_speculative = False
        self._run_active = False
        self._run_made_call = False
        self._turn_confirmed = False
        self._pending_commit: tuple | None = None

    def create_client(self, api_key=None, base_url=None, organization=None, project=None, default_headers=None, **kw):
        # max_retries=0: a retry would be a second model call the caller waits for.
        return AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=httpx.Timeout(self._timeout_total(), connect=2.0),
            http_client=DefaultAsyncHttpxClient(),
            default_headers=default_headers,
        )

    def _timeout_total(self) -> float:
        return self._cfg.total_timeout_ms / 1000.0

    def build_chat_completion_params(self, params_from_context) -> dict:
        params = super().build_chat_completion_params(params_from_context)
        params["response_format"] = self._response_format
        if self._cfg.dialect == "openai":
            self._merge_extra_body(params, {"chat_template_kwargs": {"enable_thinking": self._cfg.enable_thinking}})
        return params

    # --- the turn -----------------------------------------------------------------------------

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        if isinstance(frame, EagerEndOfTurnCancelFrame):
            self._withdraw_speculation()
        elif isinstance(frame, UserStoppedSpeakingFrame):
            await self._confirm_speculation()
        await super().process_frame(frame, direction)

    def _withdraw_speculation(self):
        """The caller kept talking: the speculative answer is discarded and never committed."""
        if not (self._run_speculative and (self._run_active or self._pending_commit)):
            return
        record = self._current_record()
        if record and self._run_made_call:
            record.llm_calls -= 1
            record.llm_cancelled_calls += 1
        self._pending_commit = None
        self._run_speculative = False
        logger.debug("speculative answer withdrawn (the caller went on speaking)")

    async def _confirm_speculation(self):
        """The turn really ended: a held speculative answer becomes the answer."""
        self._turn_confirmed = True
        if self._pending_commit:
            pending, self._pending_commit = self._pending_commit, None
            await self._commit(*pending)

    async def _process_context(self, context: LLMContext):
        # A speculative run answers a turn that has not ended yet: the gate holds its frames,
        # and the dialog state changes only once the turn is confirmed.
        self._run_speculative = self._speculation_gate.is_speculating
        self._turn_confirmed = False
        self._run_made_call = False
        self._run_active = True
        try:
            record = self._current_record()
            user_text = _last_user_text(context)
            shortcut = self._shortcuts.match(user_text) if user_text else None
            if shortcut is not None:
                await self._answer_shortcut(shortcut, record)
            else:
                await self._answer_with_model(context, record)
        finally:
            self._run_active = False

    async def _answer_shortcut(self, shortcut, record: TurnRecord | None):
        if shortcut.action == "repeat":
            last = self.dialog.last_reply
            sentences = [shortcut.reply, last] if last else [self._canned.nothing_to_repeat]
        elif shortcut.action == "transfer" and not self._can_transfer:
            logger.warning("caller asked for a person but call.transfer_number is not set")
            sentences = [self._canned.transfer_unavailable]
        else:
            sentences = [shortcut.reply]
        if record:
            record.mark("first_sentence", overwrite=True)
        for sentence in sentences:  # separately: each canned sentence is pre-synthesized
            await self._speak(sentence)
        reply = " ".join(sentences)

        def commit():
            if shortcut.action != "repeat":
                self.dialog.last_reply = reply
            if shortcut.action == "transfer" and self._can_transfer:
                self.dialog.transfer_requested = True
            if shortcut.flow == "end":
                self.dialog.ended = True
            if record:
                record.route, record.intent, record.flow = "shortcut", shortcut.intent, shortcut.flow
            logger.info("turn route=shortcut rule={} flow={}", shortcut.name, shortcut.flow)

        await self._finish_turn(TurnResult("shortcut", reply, shortcut.flow, shortcut.intent, 0), record, commit)

    async def _answer_with_model(self, context: LLMContext, record: TurnRecord | None):
        self._settings.system_instruction = render_system_prompt(
            self._template, self._domain, self.dialog.known_slots()
        )
        trimmed = LLMContext(messages=_recent_messages(context.get_messages(), self._cfg.history_turns))
        spoken: list[str] = []
        try:
            turn = await self._stream_turn(trimmed, record, spoken)
        except LLMTurnError as e:
            error = str(e)  # `e` is unbound after the except block; a held commit runs later
            logger.error("LLM turn failed ({}): {} - speaking the apology", e.kind, e)
            if record:
                record.mark("first_sentence", overwrite=not spoken)
            await self._speak(self._canned.apology)

            def commit_error():
                if record:
                    record.route, record.error = "error", error

            result = TurnResult("error", self._canned.apology, "continue", None, 1, error)
            await self._finish_turn(result, record, commit_error)
            return
        if turn["intent"] == "transfer" and not self._can_transfer:
            logger.warning("the model chose transfer but call.transfer_number is not set")
            await self._speak_sentence(self._canned.transfer_unavailable, record, spoken)
        reply = " ".join(spoken)

        def commit():
            self.dialog.apply_turn(turn)
            self.dialog.last_reply = reply
            if turn["intent"] == "transfer" and self._can_transfer:
                self.dialog.transfer_requested = True
            if record:
                record.route, record.intent, record.flow = "llm", turn["intent"], turn["flow"]
                record.slots = self.dialog.known_slots()
            logger.info("turn route=llm intent={} flow={} slots={}", turn["intent"], turn["flow"], list(self.dialog.known_slots()))

        await self._finish_turn(TurnResult("llm", reply, turn["flow"], turn["intent"], 1), record, commit)

    async def _stream_turn(self, context: LLMContext, record: TurnRecord | None, spoken: list[str]) -> dict:
        """Make the one model call; speak reply sentences as they complete; return the parsed turn."""
        extractor = ReplyFieldExtractor()
        splitter = KoreanSentenceSplitter()
        raw: list[str] = []
        finish_reason = None
        self._run_made_call = True
        if record:
            record.llm_calls += 1
            record.mark("llm_request", overwrite=True)
        t0 = time.monotonic()
        await self.start_ttfb_metrics()
        stream = None
        try:
            async with asyncio.timeout(self._cfg.first_token_timeout_ms / 1000.0):
                stream = await self.get_chat_completions(context)
                chunks = stream.__aiter__()
                chunk = await _next_content_chunk(chunks)
            await self.stop_ttfb_metrics()
            if record:
                record.mark("llm_first_token", overwrite=True)
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
                            for sentence in splitter.push(extractor.feed(text)):
                                await self._speak_sentence(sentence, record, spoken)
                        finish_reason = choice.finish_reason or finish_reason
                    chunk = await anext(chunks, None)
        except LLMTurnError:
            raise
        except TimeoutError as e:
            phase = "first_token_timeout" if not raw else "total_timeout"
            raise LLMTurnError(phase, f"no {'first token' if not raw else 'complete answer'} in time") from e
        except APITimeoutError as e:
            raise LLMTurnError("total_timeout", repr(e)) from e
        except (httpx.HTTPError, APIConnectionError) as e:
            raise LLMTurnError("unreachable", f"{type(e).__name__}: {e} ({self._cfg.base_url})") from e
        except Exception as e:  # openai.APIError and friends carry the HTTP status
            status = getattr(e, "status_code", None)
            kind = f"http_{status}" if status else type(e).__name__
            raise LLMTurnError(kind, str(e)[:300]) from e
        finally:
            # Also on interruption (CancelledError): release the HTTP stream so vLLM stops generating.
            if stream is not None:
                await stream.close()

        text = "".join(raw)
        if finish_reason == "length":
            raise LLMTurnError("cut_off", f"finish_reason=length after {len(text)} chars (raise llm.max_tokens?)")
        try:
            turn = parse_turn(text)
        except TurnParseError as e:
            raise LLMTurnError("invalid_json", str(e)) from e
        errors = self._domain.validate(turn)
        if errors:
            raise LLMTurnError("schema", "; ".join(errors)[:300])
        # Whatever the splitter still holds is the last sentence of the reply.
        for sentence in splitter.flush():
            await self._speak_sentence(sentence, record, spoken)
        if not spoken:
            raise LLMTurnError("empty_reply", "the reply field was empty")
        return turn

    async def _speak_sentence(self, sentence: str, record: TurnRecord | None, spoken: list[str]):
        sentence = sentence.strip()
        if not sentence:
            return
        if record:
            record.mark("first_sentence", overwrite=not spoken)
        spoken.append(sentence)
        await self._speak(sentence)

    async def _speak(self, text: str):
        await self.push_frame(AggregatedTextFrame(text, TextType.SENTENCE))

    async def _finish_turn(self, result: TurnResult, record: TurnRecord | None, commit: Callable[[], None]):
        transfer = result.intent == "transfer" and self._can_transfer
        if (result.flow == "end" or transfer) and self._end_call:
            # Queued behind the closing sentence (and held with it while speculative): the caller
            # hears it, then the call ends, or is handed to a person (see PhoneSerializer).
            await self.push_frame(EndWorkerFrame(reason="transfer" if transfer else "dialog ended"))
        if self._run_speculative and not self._turn_confirmed:
            self._pending_commit = (result, record, commit)
            return
        await self._commit(result, record, commit)

    async def _commit(self, result: TurnResult, record: TurnRecord | None, commit: Callable[[], None]):
        commit()
        self.last_result = result
        if record:
            record.reply_chars = len(result.reply)


async def _next_content_chunk(chunks):
    """Wait for the first chunk that carries content or a finish reason (the 'first token')."""
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta and (chunk.choices[0].delta.content or chunk.choices[0].finish_reason):
            return chunk
        if chunk.choices and chunk.choices[0].finish_reason:
            return chunk
    raise LLMTurnError("empty_stream", "the stream ended before any token")


def _last_user_text(context: LLMContext) -> str:
    """The caller's words this turn: the final message, if it is the caller's.

    Pipecat may end a turn with a developer message instead (an empty turn that cut the bot off:
    "ask them to repeat"); an older caller message must not be matched against the shortcuts then.
    """
    messages = context.get_messages()
    msg = messages[-1] if messages else None
    if not isinstance(msg, dict) or msg.get("role") != "user":
        return ""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _recent_messages(messages: list, turns: int) -> list:
    """The last ``turns`` user/assistant exchanges (the system prompt is rebuilt each turn)."""
    convo = [m for m in messages if isinstance(m, dict) and m.get("role") in ("user", "assistant", "developer")]
    return convo[-2 * turns :] if turns > 0 else convo
