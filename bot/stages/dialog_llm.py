"""The dialog stage: each caller turn decided by the policy, carried out, recorded.

``DialogLLMService`` is the LLM stage of a call. For every turn (the caller's words from the user
aggregator, or a keypad entry from ``KeypadProcessor``) it asks ``DialogPolicy``
(``bot/dialog/policy.py``) what the turn is, and carries that out: speaks a rule answer, runs the
side effect (a ticket, a status lookup: ``RecordsEffects``) and speaks what the policy makes of its
result, looks up the city's facts, or makes the one structured model call through the client it
holds (``StructuredLLMClient.stream_turn``, the file beside this one, given the turn's instruction
and schema by ``TurnPrompt``) and speaks what follows it. It owns what only the pipeline can: the
"one moment" filler while the model is slow (``Filler``), and speculation: a turn answered before
the caller is known to have finished (Pipecat's speculation gate holds its frames) changes the
dialog state, and makes a ticket, only once it is confirmed (``SpeculativeRun``). What it decided
and measured for the turn record it pushes as turn-fact frames (``bot/telemetry/turn_facts.py``),
each with its run's number; ``TurnObserver`` writes them into the record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    EagerEndOfTurnCancelFrame,
    EndWorkerFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMTokenUsage
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings
from pipecat.utils.text.base_text_aggregator import TextType

from bot.dialog.domain import EMERGENCY_FIELD, NO_EMERGENCY
from bot.dialog.policy import (
    AskModel,
    BookCallback,
    CreateTicket,
    Decision,
    DialogPolicy,
    LookUpStatus,
    Speak,
    TextTicket,
)
from bot.dialog.state import DialogState
from bot.knowledge import Lookup, directory_reply
from bot.stages.filler import Filler
from bot.stages.keypad import KeypadEntryFrame
from bot.stages.language_heard import LanguageHeardFrame, told_language
from bot.stages.records_effects import RecordsEffects
from bot.stages.structured_llm import LLMTurnError
from bot.stages.turn_prompt import Hits, TurnPrompt
from bot.telemetry.turn_facts import (
    DialogTurnFrame,
    FactsFoundFrame,
    KeypadTurnFrame,
    LLMRequestFrame,
    LLMRequestWithdrawnFrame,
    TurnAnsweredFrame,
    TurnMarkFrame,
)

# Longest wait for a speculative turn to be confirmed before a side effect (a ticket) is dropped.
SPECULATION_WAIT_SECS = 10.0


@dataclass
class TurnResult:
    """What one caller turn produced (the ``chat`` command prints this)."""

    route: str  # shortcut | rule | llm | error
    reply: str
    flow: str
    intent: str | None
    llm_calls: int
    error: str | None = None


class SpeculativeRun:
    """One answering run and whether its turn is final yet (one run at a time: the stage is serial).

    Pipecat's speculation gate holds the run's frames; this holds its effects: the dialog state's
    change waits here (``hold``) until the turn is confirmed, and is dropped if the caller goes on.
    """

    def __init__(self):
        self.number = 0  # the run's number (its turn facts carry it)
        self.speculative = False
        self.active = False
        self.made_call = False
        self.confirmed = False
        self.pending: tuple | None = None  # (result, run, commit) held until confirmed
        self._settled = asyncio.Event()

    def begin(self, number: int, speculative: bool) -> None:
        self.number = number
        self.speculative, self.active, self.made_call, self.confirmed = speculative, True, False, False
        self._settled.clear()

    def withdraw(self) -> bool:
        """The caller kept talking: True when there was a speculative answer to discard."""
        if not (self.speculative and (self.active or self.pending)):
            return False
        self.pending = None
        self.speculative = False
        self._settled.set()
        return True

    def confirm(self) -> tuple | None:
        """The turn really ended: the held commit, if any, to run now."""
        self.confirmed = True
        self._settled.set()
        pending, self.pending = self.pending, None
        return pending

    def must_hold(self) -> bool:
        return self.speculative and not self.confirmed

    async def is_final(self) -> bool:
        """Side effects wait until a speculative turn is confirmed; False if it was withdrawn."""
        if not self.speculative:
            return True
        try:
            async with asyncio.timeout(SPECULATION_WAIT_SECS):
                await self._settled.wait()
        except TimeoutError:
            return False
        return self.confirmed and self.speculative


class TurnClient(Protocol):
    """The model call the stage holds: ``bot.stages.structured_llm.StructuredLLMClient``, or a fake."""

    @property
    def model(self) -> str: ...

    async def stream_turn(self, messages: list[dict[str, Any]], *, instruction: str, schema: dict[str, Any],
                          on_sentence: Callable[[str], Awaitable[None]],
                          on_first_token: Callable[[], Awaitable[None]],
                          on_usage: Callable[[LLMTokenUsage], Awaitable[None]]) -> dict: ...

    async def aclose(self) -> None: ...


class DialogLLMService(LLMService):
    """The LLM stage of a call: the policy decides, this carries it out (see the module doc).

    A Pipecat ``LLMService`` for its place in the pipeline (the speculation gate, interruptions,
    metrics) that makes no request itself: the model call is the client's.

    Args:
        client: Makes a model turn's one call (``stream_turn``); closed when the stage is cleaned up.
        policy: The line's rules (in the caller's language: ``DialogPolicy.for_language``).
        prompt: Each model turn's instruction, schema and history; the facts lookup.
        records: The turn's side effects on the records database (tickets, texts, callbacks, status).
        filler: The "one moment" sentence while the model is slow to start.
        dialog: The call's dialog state (a fresh one if None).
        end_call_on_end_flow: A closing turn ends the call (``EndWorkerFrame``); ``chat`` goes on.
    """

    def __init__(
        self,
        *,
        client: TurnClient,
        policy: DialogPolicy,
        prompt: TurnPrompt,
        records: RecordsEffects,
        filler: Filler,
        dialog: DialogState | None = None,
        end_call_on_end_flow: bool = True,
    ) -> None:
        # The settings only name the model (the metrics carry it): the client makes the request.
        super().__init__(settings=LLMSettings(
            model=client.model, system_instruction=None, temperature=None, max_tokens=None, top_p=None, top_k=None,
            frequency_penalty=None, presence_penalty=None, seed=None, filter_incomplete_user_turns=False,
            user_turn_completion_config=None))
        self.client = client
        self.policy = policy
        self._prompt = prompt
        self._records = records
        self._filler = filler
        self.dialog = dialog or DialogState()
        self._end_call = end_call_on_end_flow
        self._last_messages: list = []
        self.last_result: TurnResult | None = None
        self.last_model_turn: dict | None = None  # the validated answer of the latest model call (eval)
        self._run = SpeculativeRun()
        self._runs = 0  # answering runs so far: the number each run's turn facts carry
        # An emergency answer committed while none of it has played yet (the caller went on talking).
        self._unheard_emergency: Speak | None = None

    @property
    def _lp(self) -> DialogPolicy:
        """The line's rules in the caller's language."""
        return self.policy.for_language(self.dialog.language)

    def can_generate_metrics(self) -> bool:
        return True

    async def cleanup(self):
        """The call is over: its client's HTTP connections are closed too."""
        await super().cleanup()
        await self.client.aclose()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, BotStartedSpeakingFrame):
            self._unheard_emergency = None  # the line played the bot's words: the number was heard
        if isinstance(frame, EagerEndOfTurnCancelFrame):
            await self._withdraw_speculation()
        elif isinstance(frame, UserStoppedSpeakingFrame):
            await self._confirm_speculation()
        elif isinstance(frame, KeypadEntryFrame):
            self.create_task(self._keypad_turn(frame.keys), name="keypad-turn")
            return
        elif isinstance(frame, LanguageHeardFrame):
            await self._language_heard(frame)
            return
        await super().process_frame(frame, direction)  # the speculation gate, interruptions, settings
        if isinstance(frame, LLMContextFrame):
            await self._respond(frame.context)
        else:
            await self.push_frame(frame, direction)

    async def _respond(self, context: LLMContext) -> None:
        """One caller turn's response, framed as Pipecat's LLM services frame theirs."""
        try:
            await self.push_frame(LLMFullResponseStartFrame())
            await self.start_processing_metrics()
            await self._process_context(context)
        except Exception as e:  # a fault of ours, not the model's (that is an LLMTurnError, answered)
            await self.push_error(error_msg=f"Error during completion: {e}", exception=e)
        finally:
            await self.stop_processing_metrics()
            await self.push_frame(LLMFullResponseEndFrame())

    async def _withdraw_speculation(self) -> None:
        """The caller kept talking: the speculative answer is discarded and never committed."""
        made_call, run = self._run.made_call, self._run.number
        if not self._run.withdraw():
            return
        if made_call:
            await self.push_frame(LLMRequestWithdrawnFrame(run=run))
        logger.debug("speculative answer withdrawn (the caller went on speaking)")

    async def _confirm_speculation(self) -> None:
        """The turn really ended: a held speculative answer becomes the answer."""
        pending = self._run.confirm()
        if pending:
            await self._commit(*pending)

    # --- the caller's language ------------------------------------------------------------------

    async def _language_heard(self, frame: LanguageHeardFrame) -> None:
        """What the STT heard a segment in: the policy's change, applied at once (before the turn is
        answered); STT and TTS are told when the call's language moved."""
        before, unserved = self.dialog.language, self.dialog.heard_unserved
        self._lp.language_heard(frame.guess, frame.heard).apply(self.dialog, "")
        if self.dialog.language != before:
            logger.info("call language -> {} (Whisper p={:.2f})", self.dialog.language,
                        frame.guess.p if frame.guess else 0.0)
            await self._tell_language(self.dialog.language)
        if self.dialog.heard_unserved and self.dialog.heard_unserved != unserved and frame.heard:
            logger.warning("caller heard in {} (Whisper p={:.2f}), a language this line does not serve: "
                           "telling them where to call", frame.heard.language, frame.heard.p)

    async def _tell_language(self, language: str) -> None:
        """The call's language, in band: the STT (upstream) decodes in it, the TTS (downstream) speaks it."""
        stt, tts = told_language(language)
        await self.push_frame(stt, FrameDirection.UPSTREAM)
        await self.push_frame(tts)

    async def _process_context(self, context: LLMContext) -> None:
        # A speculative run answers a turn that has not ended yet: the gate holds its frames,
        # and the dialog state changes only once the turn is confirmed.
        self._runs += 1
        run = self._runs
        self._run.begin(run, self._speculation_gate.is_speculating)
        self._last_messages = context.get_messages()
        try:
            user_text = _last_user_text(context)
            # A turn heard in a language the line does not serve is recorded in that language.
            heard = self.dialog.heard_unserved if not self.dialog.unserved_told else None
            await self.push_frame(DialogTurnFrame(run=run, transcript=user_text or None,
                                                  line_open=self._lp.line_open(), language=heard or self.dialog.language))
            decision = self._lp.decide(user_text, self.dialog)
            await self._say_unheard_emergency(decision, run)
            await self._carry_out(decision, run, user_text, context)
        finally:
            self._run.active = False

    async def _say_unheard_emergency(self, decision: Decision, run: int) -> None:
        """The caller talked over an emergency answer before a word of it played: it comes first now.

        A barge-in drops the unplayed sentences; without this the next turn, about anything else,
        would leave the caller never having heard the number to call."""
        urgent = self._unheard_emergency
        if urgent is None or (isinstance(decision, Speak) and decision.escalation):
            return  # nothing unheard, or this answer tells the number itself
        logger.warning("EMERGENCY answer (rule {}) was not heard: the caller spoke before it played; saying it "
                       "again before this turn's answer", urgent.rule)
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence", overwrite=True))
        for sentence in urgent.sentences:
            await self._speak(sentence)

    async def _carry_out(self, decision: Decision, run: int, text: str, context: LLMContext | None = None) -> None:
        """Do what the policy decided; side effects come back to it for the words."""
        if isinstance(decision, CreateTicket):
            if not await self._run.is_final():
                return  # the caller went on speaking: no ticket for a withdrawn "yes"
            number = await self._records.create_ticket(decision.slots, excerpt=self._excerpt(text),
                                                       language=self.dialog.language)
            decision = self._lp.ticket_created(number, self.dialog)
        elif isinstance(decision, TextTicket):
            if not await self._run.is_final():
                return  # a withdrawn "yes" is no consent
            decision = self._lp.sms_requested(await self._records.text_ticket(decision.number))
        elif isinstance(decision, BookCallback):
            if not await self._run.is_final():
                return
            decision = self._lp.callback_booked(await self._records.book_callback(decision.after, decision.reception_no))
        elif isinstance(decision, LookUpStatus):
            ticket, ok = await self._records.find_ticket(decision.number)
            decision = self._lp.status_found(decision.number, ticket, failed=not ok)
        elif isinstance(decision, AskModel):
            found = await self._look_up(decision.text, run)
            if found is not None and found.directory_hit is not None:
                decision = self._lp.directory(directory_reply(found.directory_hit))
            elif context is not None:
                await self._answer_with_model(context, run, found.hits if found else [])
                return
            else:
                return
        await self._say(decision, run)

    async def _say(self, answer: Speak, run: int, llm_calls: int = 0) -> None:
        """A rule answer: each sentence on its own (each canned sentence is pre-synthesized)."""
        if answer.route == "shortcut" and answer.intent == "transfer" and not answer.change.transfer:
            logger.warning("caller asked for a person but call.transfer_number is not set")
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence", overwrite=True))
        if answer.change.language and answer.change.language != self.dialog.language:
            await self._tell_language(answer.change.language)  # the caller chose: heard in it at once
        for sentence in answer.sentences:
            await self._speak(sentence)
        reply = answer.reply

        def commit() -> TurnAnsweredFrame:
            answer.change.apply(self.dialog, reply)
            if answer.escalation:
                self._unheard_emergency = answer  # until the line plays it (BotStartedSpeakingFrame)
                logger.warning("EMERGENCY turn: answered with the number {} (rule {}); transfer to {}",
                               answer.escalation, answer.rule, answer.change.transfer_to or "none configured")
            elif answer.rule:
                logger.info("turn route={} rule={} flow={}", answer.route, answer.rule, answer.flow)
            else:
                logger.info("turn route={} intent={}", answer.route, answer.intent)
            return TurnAnsweredFrame(run=run, route=answer.route, intent=answer.intent, flow=answer.flow,
                                     escalation=answer.escalation)

        await self._finish_turn(TurnResult(answer.route, reply, answer.flow, answer.intent, llm_calls), run, commit,
                                ends_call=answer.ends_call, transfer=answer.change.transfer)

    def _excerpt(self, text: str) -> str:
        """The caller's recent words, for the ticket (masked when stored)."""
        said = [m.get("content") for m in self._last_messages if isinstance(m, dict) and m.get("role") == "user"]
        return " / ".join(str(x) for x in said[-4:] if isinstance(x, str))[-500:] or text

    # --- the phone pad ------------------------------------------------------------------------

    async def _keypad_turn(self, keys: str) -> None:
        decision = self._lp.keypad(keys, self.dialog)
        if decision is None:
            return
        self._runs += 1
        run = self._runs
        transcript = f"[keypad] {keys}#" if len(keys) > 1 else f"[keypad] {keys}"
        await self.push_frame(KeypadTurnFrame(run=run, transcript=transcript, line_open=self._lp.line_open(),
                                              language=self.dialog.language))
        await self.push_frame(LLMFullResponseStartFrame())
        try:
            await self._carry_out(decision, run, transcript)
        finally:
            await self.push_frame(LLMFullResponseEndFrame())

    # --- the model ----------------------------------------------------------------------------

    async def _look_up(self, text: str, run: int) -> Lookup | None:
        """The city's facts for this turn, recorded as found."""
        found = await self._prompt.look_up(text, self.dialog.known_slots())
        if found is not None:
            hit = found.directory_hit.id if found.directory_hit is not None else None
            await self.push_frame(FactsFoundFrame(run=run, retrieval_ms=round(found.ms, 3),
                                                  facts=[entry.id for entry, _ in found.hits], directory_hit=hit))
        return found

    async def _answer_with_model(self, context: LLMContext, run: int, hits: Hits) -> None:
        """The turn's one model call, told this turn's instruction and schema, and what follows it."""
        slots = self.dialog.known_slots()
        messages = self._prompt.recent(context.get_messages())
        self._log_llm_response(LLMContext(messages=messages))  # Pipecat's debug line (PIPECAT_LOG_LLM_CONTEXT)
        spoken: list[str] = []
        self._run.made_call = True
        await self.push_frame(LLMRequestFrame(run=run))

        async def first_token() -> None:
            await self.stop_ttfb_metrics()
            await self._filler.stop()
            await self.push_frame(TurnMarkFrame(run=run, mark="llm_first_token", overwrite=True))

        await self.start_ttfb_metrics()
        self._filler.start(self, lambda: self._say_filler(run))
        try:
            turn = await self.client.stream_turn(
                messages, instruction=self._prompt.instruction(slots, hits, self._lp.instruction),
                schema=self._prompt.schema(hits), on_first_token=first_token, on_usage=self.start_llm_usage_metrics,
                on_sentence=lambda s: self._speak_sentence(s, run, spoken))
        except LLMTurnError as e:
            await self._filler.stop()
            await self._model_failed(e, run, spoken)
            return
        finally:
            await self._filler.stop()
        self.last_model_turn = turn
        await self._after_model(turn, run, spoken)

    async def _after_model(self, turn: dict, run: int, spoken: list[str]) -> None:
        """The model's answer is in: an emergency it flagged, or what the policy makes of it."""
        flagged = turn.get(EMERGENCY_FIELD, NO_EMERGENCY)
        if flagged != NO_EMERGENCY and (urgent := self._lp.model_emergency(flagged)) is not None:
            # The second net: the model saw an emergency the rules missed. Its reply (if any was
            # streamed before the flag) is followed by the escalation, as a rule hit would say it.
            await self._say(urgent, run, llm_calls=1)
            return
        follow = self._lp.after_model(turn, self.dialog)
        if turn["intent"] == "transfer" and not self._lp.can_transfer:
            logger.warning("the model chose transfer but call.transfer_number is not set")
        for sentence in follow.sentences:
            await self._speak_sentence(sentence, run, spoken)
        reply = " ".join(spoken)

        def commit() -> TurnAnsweredFrame:
            follow.change.apply(self.dialog, reply)
            logger.info("turn route=llm intent={} flow={} slots={}", turn["intent"], turn["flow"], list(self.dialog.known_slots()))
            return TurnAnsweredFrame(run=run, route="llm", intent=turn["intent"], flow=turn["flow"],
                                     answer_source=turn.get("answer_source") or "none",
                                     slots=self.dialog.known_slots())

        await self._finish_turn(TurnResult("llm", reply, turn["flow"], turn["intent"], 1), run, commit,
                                ends_call=follow.ends_call, transfer=follow.change.transfer)

    async def _model_failed(self, e: LLMTurnError, run: int, spoken: list[str]) -> None:
        error = str(e)
        answer = self._lp.model_failed(self.last_result is not None and self.last_result.route == "error",
                                       failure=e.failure)
        logger.error("LLM turn failed ({}): {} - speaking the {}", e.kind, e,
                     "transfer" if answer.change.transfer else "closing" if answer.change.end else "apology")
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence",
                                            overwrite=not spoken and not self._filler.played))
        for sentence in answer.sentences:
            await self._speak(sentence)

        def commit() -> TurnAnsweredFrame:
            answer.change.apply(self.dialog, answer.reply)
            return TurnAnsweredFrame(run=run, route="error", error=error)

        result = TurnResult("error", answer.reply, answer.flow, answer.intent, 1, error)
        await self._finish_turn(result, run, commit, ends_call=answer.ends_call, transfer=answer.change.transfer)

    async def _say_filler(self, run: int) -> None:
        # What the caller hears first.
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence", overwrite=True))
        await self._speak(self._lp.canned.filler)  # canned: from memory, never synthesized

    async def _speak_sentence(self, sentence: str, run: int, spoken: list[str]) -> None:
        sentence = sentence.strip()
        if not sentence:
            return
        # The filler, if it played, stays the first thing the caller heard.
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence",
                                            overwrite=not spoken and not self._filler.played))
        spoken.append(sentence)
        await self._speak(sentence)

    async def _speak(self, text: str) -> None:
        await self.push_frame(AggregatedTextFrame(text, TextType.SENTENCE))

    # --- the turn's end -----------------------------------------------------------------------

    async def _finish_turn(self, result: TurnResult, run: int, commit: Callable[[], TurnAnsweredFrame], *,
                           ends_call: bool, transfer: bool) -> None:
        if ends_call and self._end_call:
            # Queued behind the closing sentence (and held with it while speculative): the caller
            # hears it, then the call ends, or is handed to a person (see PhoneSerializer).
            await self.push_frame(EndWorkerFrame(reason="transfer" if transfer else "dialog ended"))
        if self._run.must_hold():
            self._run.pending = (result, run, commit)
            return
        await self._commit(result, run, commit)

    async def _commit(self, result: TurnResult, run: int, commit: Callable[[], TurnAnsweredFrame]) -> None:
        answered = commit()
        self.last_result = result
        answered.reply = result.reply
        await self.push_frame(answered)


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
