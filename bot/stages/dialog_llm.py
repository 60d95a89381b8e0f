"""The dialog stage: each caller turn decided by the policy, carried out, recorded.

``DialogLLMService`` is the LLM stage of a call. For every turn (the caller's words from the user
aggregator, or a keypad entry from ``KeypadProcessor``) it asks ``DialogPolicy``
(``bot/dialog/policy.py``) what the turn is, and carries that out: speaks a rule answer, runs the
side effect (a ticket, a status lookup) and speaks what the policy makes of its result, looks up
the city's facts, or makes the one structured model call (``StructuredLLMService.stream_turn``,
the file beside this one) and speaks what follows it. It owns what only the pipeline can: the
"one moment" filler while the model is slow, and speculation: a turn answered before the caller
is known to have finished (Pipecat's speculation gate holds its frames) changes the dialog state,
and makes a ticket, only once it is confirmed (``SpeculativeRun``). What it decided and measured
for the turn record it pushes as turn-fact frames (``bot/telemetry/turn_facts.py``), each with
its run's number; ``TurnObserver`` writes them into the record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    EagerEndOfTurnCancelFrame,
    EndWorkerFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.utils.text.base_text_aggregator import TextType

from bot.config import LLMConfig
from bot.dialog.domain import EMERGENCY_FIELD, NO_EMERGENCY, Domain, render_system_prompt
from bot.dialog.intake import Intake
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
from bot.dialog.shortcuts import ShortcutMatcher
from bot.dialog.state import CannedReplies, DialogState
from bot.knowledge import Knowledge, Lookup, directory_reply, render_facts
from bot.stages.keypad import KeypadEntryFrame
from bot.stages.structured_llm import LLMTurnError, StructuredLLMService
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
# One thread for every call's fact lookups (Kiwi's analyser is shared; lookups take ~0.1-1 ms).
_LOOKUP_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge")
# The filler never comes sooner than this after the model request (a prompt answer needs no filler).
FILLER_MIN_SECS = 0.3


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


class TicketRecords(Protocol):
    """What the stage needs of the records database: ``bot.store.calls.CallLog`` (a layer above the stages)."""

    async def create_ticket(self, **fields: Any) -> str: ...

    async def text_ticket(self, reception_no: str) -> None: ...

    async def request_callback(self, *, call_sid: str | None, after: datetime, reason: str,
                               reception_no: str | None = None) -> int: ...

    async def find_ticket(self, reception_no: str) -> dict[str, Any] | None: ...


class DialogLLMService(StructuredLLMService):
    """The LLM stage of a call: the policy decides, this carries it out (see the module doc)."""

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
        speech_end: Callable[[], float | None] = lambda: None,
        end_call_on_end_flow: bool = True,
        can_transfer: bool = False,
        intake: Intake | None = None,
        knowledge: Knowledge | None = None,
        records: TicketRecords | None = None,
        call_id: str | None = None,
        policy: DialogPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config=config, domain=domain, api_key=api_key, **kwargs)
        self._template = prompt_template
        self._canned = canned
        self.dialog = dialog or DialogState()
        self._speech_end = speech_end  # when the caller went quiet this turn (the filler counts from it)
        self._end_call = end_call_on_end_flow
        # Tickets: ``records`` is the records database's CallLog (None: no tickets).
        self._knowledge = knowledge
        self._records = records
        self._call_id = call_id
        self.policy = policy or DialogPolicy(shortcuts=shortcuts, canned=canned, intake=intake,
                                             can_transfer=can_transfer)
        self._last_messages: list = []
        self.response_format = self._format_for([])
        self.last_result: TurnResult | None = None
        self.last_model_turn: dict | None = None  # the validated answer of the latest model call (eval)
        self._run = SpeculativeRun()
        self._runs = 0  # answering runs so far: the number each run's turn facts carry
        self._filler_played = False  # this run spoke the "one moment" filler

    @property
    def _lp(self) -> DialogPolicy:
        """The line's rules in the caller's language."""
        return self.policy.for_language(self.dialog.language)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, EagerEndOfTurnCancelFrame):
            await self._withdraw_speculation()
        elif isinstance(frame, UserStoppedSpeakingFrame):
            await self._confirm_speculation()
        elif isinstance(frame, KeypadEntryFrame):
            self.create_task(self._keypad_turn(frame.keys), name="keypad-turn")
            return
        await super().process_frame(frame, direction)

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
            await self._carry_out(self._lp.decide(user_text, self.dialog), run, user_text, context)
        finally:
            self._run.active = False

    async def _carry_out(self, decision: Decision, run: int, text: str, context: LLMContext | None = None) -> None:
        """Do what the policy decided; side effects come back to it for the words."""
        if isinstance(decision, CreateTicket):
            if not await self._run.is_final():
                return  # the caller went on speaking: no ticket for a withdrawn "yes"
            decision = self._lp.ticket_created(await self._create_ticket(decision.slots, text), self.dialog)
        elif isinstance(decision, TextTicket):
            if not await self._run.is_final():
                return  # a withdrawn "yes" is no consent
            decision = self._lp.sms_requested(await self._text_ticket(decision.number))
        elif isinstance(decision, BookCallback):
            if not await self._run.is_final():
                return
            decision = self._lp.callback_booked(await self._book_callback(decision.after, decision.reception_no))
        elif isinstance(decision, LookUpStatus):
            decision = await self._find_status(decision.number)
        elif isinstance(decision, AskModel):
            found = await self._look_up(decision.text, run)
            if found is not None and found.directory_hit is not None:
                decision = self._lp.directory(directory_reply(found.directory_hit))
            elif context is not None:
                hits = found.hits if found else []
                self.response_format = self._format_for([entry.id for entry, _ in hits])
                await self._answer_with_model(context, run, render_facts(hits))
                return
            else:
                return
        await self._say(decision, run)

    # --- intake and status: the records database ---------------------------------------------

    async def _create_ticket(self, slots: dict, text: str) -> str | None:
        """The ticket's reception number, or None when the database failed (the caller is told)."""
        try:
            if self._records is None:
                raise RuntimeError("no records database")
            number = await self._records.create_ticket(
                call_sid=self._call_id, category=slots["category"], location=slots.get("location"),
                time=slots.get("time"), excerpt=self._excerpt(text), language=self.dialog.language)
        except Exception as e:  # noqa: BLE001 - database down or slow: say so, keep the slots
            logger.error("TICKET NOT CREATED ({}: {}); telling the caller", type(e).__name__, e)
            return None
        logger.info("ticket {} created ({})", number, slots["category"])
        return number

    async def _text_ticket(self, number: str) -> bool:
        """The caller said yes to a text: consent and one SMS in the outbox; False when the database failed."""
        try:
            if self._records is None:
                raise RuntimeError("no records database")
            await self._records.text_ticket(number)
        except Exception as e:  # noqa: BLE001 - database down or slow: say so (no "will send")
            logger.error("SMS NOT QUEUED for ticket {} ({}: {}); telling the caller", number, type(e).__name__, e)
            return False
        logger.info("ticket {}: the caller asked for a text; queued", number)
        return True

    async def _book_callback(self, after: datetime, reception_no: str | None = None) -> bool:
        """A callback for the desk's queue; False when the database failed (the caller is told)."""
        try:
            if self._records is None:
                raise RuntimeError("no records database")
            await self._records.request_callback(call_sid=self._call_id, after=after, reason="closed_transfer",
                                              reception_no=reception_no)
        except Exception as e:  # noqa: BLE001 - database down or slow: say so
            logger.error("CALLBACK NOT BOOKED ({}: {}); telling the caller", type(e).__name__, e)
            return False
        logger.info("callback booked for after {}", after.isoformat())
        return True

    async def _find_status(self, number: str) -> Speak:
        try:
            if self._records is None:
                raise RuntimeError("no records database")
            ticket = await self._records.find_ticket(number)
        except Exception as e:  # noqa: BLE001
            logger.error("status lookup failed ({}: {})", type(e).__name__, e)
            return self._lp.status_found(number, None, failed=True)
        return self._lp.status_found(number, ticket)

    async def _say(self, answer: Speak, run: int, llm_calls: int = 0) -> None:
        """A rule answer: each sentence on its own (each canned sentence is pre-synthesized)."""
        if answer.route == "shortcut" and answer.intent == "transfer" and not answer.change.transfer:
            logger.warning("caller asked for a person but call.transfer_number is not set")
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence", overwrite=True))
        for sentence in answer.sentences:
            await self._speak(sentence)
        reply = answer.reply

        def commit() -> TurnAnsweredFrame:
            answer.change.apply(self.dialog, reply)
            if answer.escalation:
                logger.warning("EMERGENCY turn: told the caller to call {} (rule {}); transfer to {}",
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
        said = [m.get("content") for m in self._context_messages() if m.get("role") == "user"]
        return " / ".join(str(x) for x in said[-4:] if isinstance(x, str))[-500:] or text

    def _context_messages(self) -> list[dict]:
        return [m for m in (self._last_messages or []) if isinstance(m, dict)]

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

    def _format_for(self, fact_ids: list[str]) -> dict:
        """This turn's schema: ``answer_source`` may only name a fact that is in this prompt (or none)."""
        return self.schema_for(fact_ids if self._knowledge is not None else None)

    async def _look_up(self, text: str, run: int) -> Lookup | None:
        """The city's facts for this turn (off the event loop: Kiwi can take over a millisecond)."""
        if self._knowledge is None or not text:
            return None
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(_LOOKUP_POOL, self._knowledge.lookup, text, self.dialog.known_slots(),
                                           self._cfg.facts_k)
        hit = found.directory_hit.id if found.directory_hit is not None else None
        await self.push_frame(FactsFoundFrame(run=run, retrieval_ms=round(found.ms, 3),
                                              facts=[entry.id for entry, _ in found.hits], directory_hit=hit))
        return found

    async def _answer_with_model(self, context: LLMContext, run: int, facts: str = "") -> None:
        instruction = render_system_prompt(self._template, self._domain, self.dialog.known_slots(), facts=facts)
        if self._lp.instruction:
            instruction += "\n\n" + self._lp.instruction
        self._settings.system_instruction = instruction
        trimmed = LLMContext(messages=_recent_messages(context.get_messages(), self._cfg.history_turns))
        spoken: list[str] = []
        self._run.made_call = True
        await self.push_frame(LLMRequestFrame(run=run))

        async def first_token() -> None:
            await self._stop_filler(filler)
            await self.push_frame(TurnMarkFrame(run=run, mark="llm_first_token", overwrite=True))

        filler = self._start_filler(run)
        try:
            turn = await self.stream_turn(trimmed, on_first_token=first_token,
                                          on_sentence=lambda s: self._speak_sentence(s, run, spoken))
        except LLMTurnError as e:
            await self._stop_filler(filler)
            await self._model_failed(e, run, spoken)
            return
        finally:
            await self._stop_filler(filler)
        self.last_model_turn = turn
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
                                            overwrite=not spoken and not self._filler_played))
        for sentence in answer.sentences:
            await self._speak(sentence)

        def commit() -> TurnAnsweredFrame:
            answer.change.apply(self.dialog, answer.reply)
            return TurnAnsweredFrame(run=run, route="error", error=error)

        result = TurnResult("error", answer.reply, answer.flow, answer.intent, 1, error)
        await self._finish_turn(result, run, commit, ends_call=answer.ends_call, transfer=answer.change.transfer)

    def _start_filler(self, run: int) -> asyncio.Task | None:
        """No first token ``llm.filler_after_ms`` after the caller went quiet: a canned "잠시만요, …".

        Counted from the end of the caller's speech (what the caller waits through: endpointing
        and STT included), never sooner than ``FILLER_MIN_SECS`` after the request, so a model
        that answers promptly never gets a filler in front of its answer. Only spoken turns: a
        typed one (``chat``, ``eval``) or a keypad one has no silence to fill.
        """
        self._filler_played = False
        after = self._cfg.filler_after_ms / 1000.0
        speech_end = self._speech_end()
        if after <= 0 or not speech_end:
            return None
        after -= max(0.0, time.time() - speech_end)
        delay = max(FILLER_MIN_SECS, after)
        if delay >= self._cfg.first_token_timeout_ms / 1000.0:
            return None
        return self.create_task(self._filler_after(delay, run), name="llm-filler")

    async def _filler_after(self, delay: float, run: int) -> None:
        await asyncio.sleep(delay)
        logger.info("LLM: no first token {:.0f} ms after the request; speaking the filler", delay * 1000)
        self._filler_played = True
        # What the caller hears first.
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence", overwrite=True))
        await self._speak(self._lp.canned.filler)  # canned: from memory, never synthesized

    async def _stop_filler(self, task: asyncio.Task | None) -> None:
        if task is not None and not task.done():
            await self.cancel_task(task)

    async def _speak_sentence(self, sentence: str, run: int, spoken: list[str]) -> None:
        sentence = sentence.strip()
        if not sentence:
            return
        # The filler, if it played, stays the first thing the caller heard.
        await self.push_frame(TurnMarkFrame(run=run, mark="first_sentence",
                                            overwrite=not spoken and not self._filler_played))
        spoken.append(sentence)
        await self._speak(sentence)

    async def _speak(self, text: str) -> None:
        await self.push_frame(AggregatedTextFrame(text, TextType.SENTENCE))

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


def _recent_messages(messages: list, turns: int) -> list:
    """The last ``turns`` user/assistant exchanges (the system prompt is rebuilt each turn)."""
    convo = [m for m in messages if isinstance(m, dict) and m.get("role") in ("user", "assistant", "developer")]
    return convo[-2 * turns :] if turns > 0 else convo
