"""The dialog's decisions, in one place: plain functions of the caller's words or keys and the state.

No asyncio, no frames, no HTTP. The LLM stage asks the policy what a turn is and carries the
answer out; what needs the outside world (the records database, the fact index, the model) comes
back to the policy as a value, and the policy says what is spoken and how the state changes:

* ``decide(text, state)``: a rule answer (``Speak``), a side effect to run first (``CreateTicket``,
  ``LookUpStatus``, ``BookCallback``, ``TextTicket``), or ``AskModel`` (look up facts, then the one
  structured call).
  Emergencies come first, whatever the call is doing (bot/data/emergency.toml).
* The line's calendar (``bot/dialog/calendar.py``): outside its hours nobody can take a transfer,
  so "a person, please" says when the desk opens and offers a callback instead.
* ``keypad(keys, state)``: the same decisions for keys on the phone pad.
* ``ticket_created`` / ``status_found`` / ``directory`` / ``sms_requested``: the answer once the side
  effect is done. A new ticket on a call with a number to text (``sms.enabled``) is followed by
  the offer to text its reception number; only a yes to that offer (``TextTicket``) sends one.
* ``after_model(turn, state)``: what follows the model's reply (read-back, "no person available")
  and the state change.
* ``model_failed`` / ``stage_failed``: apology, transfer or polite end after a failure (its kind:
  ``LLMFailure`` or ``StageFailure``; the answer to a stage's: ``AfterFailure``).

``Change.apply(state, reply)`` is the only place a decision touches ``DialogState``; the stage
applies it when the turn is confirmed (a speculative turn that is withdrawn changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum, StrEnum
from typing import Literal

from bot import languages
from bot.dialog.abusive import AbuseRules
from bot.dialog.calendar import LineCalendar
from bot.dialog.emergency import EmergencyKind, EmergencyRules
from bot.dialog.intake import Intake
from bot.dialog.language_switch import LanguageGuess
from bot.dialog.shortcuts import Shortcut, ShortcutMatcher
from bot.dialog.state import CannedReplies, DialogState
from bot.languages import untag

_KEEP = "keep"
EMERGENCY_CHECK = "emergency:"  # awaiting "emergency:<kind>": the caller was asked if it is happening now
CRISIS = "crisis:"  # awaiting "crisis:<kind>": told the number; the line stays until they say they will call
CALLBACK = "callback"  # awaiting a yes/no to the callback offer
SMS_OFFER = "sms_offer"  # awaiting a yes/no to "접수번호를 문자로 보내드릴까요?"
YES_NO_KEYS = ("confirmation", SMS_OFFER)  # offers that say "1 for yes, 2 for no"


class LLMFailure(StrEnum):
    """Why the turn's model call failed (``LLMTurnError.failure``, bot/stages/structured_llm.py)."""

    TIMEOUT = "timeout"  # no first token, or no complete answer, in time
    UNREACHABLE = "unreachable"  # no connection to the LLM server
    REFUSED = "refused"  # an error from the server (an HTTP status) or from its client
    CUT_OFF = "cut_off"  # the answer hit llm.max_tokens
    INVALID = "invalid"  # not JSON, or outside the turn's schema
    EMPTY = "empty"  # no token, or an empty reply field


class StageFailure(StrEnum):
    """A stage other than the model that raised in a turn."""

    STT = "stt"
    TTS = "tts"


class AfterFailure(Enum):
    """What the call does after a stage failed (``DialogPolicy.stage_failed``)."""

    NOTHING = "nothing"  # said already, or the call is already ending
    UNCLEAR = "unclear"  # end the turn as for unclear speech ("please say that again")
    APOLOGY = "apology"  # the canned apology, at once
    END = "end"  # the polite end (opening hours), then hang-up


@dataclass(frozen=True)
class Change:
    """How the state changes when the turn is committed."""

    awaiting: str | None = _KEEP  # "confirmation", None (clear) or _KEEP
    remember_reply: bool = True  # the reply becomes ``last_reply`` ("say again" does not)
    transfer: bool = False
    transfer_to: str | None = None  # a number other than the desk's (an emergency service)
    end: bool = False
    ticket: str | None = None  # a reception number given in this turn
    model_turn: dict | None = None  # a validated model answer to fold in (slots, flow)
    transfer_reason: str = "asked"  # why a transfer is made: "asked" or "errors" (the warm transfer's summary)
    language: str | None = None  # the caller chose a language (the keypad menu)
    # Whisper's guesses for a segment (``language_heard``): the switcher and the unserved rule decide.
    heard: LanguageGuess | None = None
    heard_any: LanguageGuess | None = None
    unserved_told: bool = False  # the caller heard where to call in a language the line does not serve
    abuse_warned: bool = False  # the caller heard that abuse may end the call (bot/data/abuse.toml)
    end_reason: str | None = None  # why the line ends the call ("abusive", "max_minutes"); the call's record

    def apply(self, state: DialogState, reply: str) -> None:
        if self.language:
            state.set_language(self.language)
        if self.heard is not None:
            state.observe_language(self.heard)
        if self.heard_any is not None:
            state.observe_heard(self.heard_any)
        if self.unserved_told:
            state.unserved_told, state.heard_unserved = True, None
        if self.abuse_warned:
            state.abuse_warned = True
        if self.model_turn is not None:
            state.apply_turn(self.model_turn)
        if self.ticket:
            state.ticket_made(self.ticket)  # clears what was awaited (the read-back) ...
        if self.awaiting != _KEEP:
            state.awaiting = self.awaiting  # ... and a new question may follow (the SMS offer)
        if self.remember_reply:
            state.last_reply = reply
        if self.transfer:
            state.transfer_requested = True
            state.transfer_to = self.transfer_to
            state.transfer_reason = self.transfer_reason
        if self.end:
            state.ended = True
            state.end_reason = self.end_reason or state.end_reason


@dataclass(frozen=True)
class Speak:
    """A rule answer: these sentences (each pre-synthesizable), then the change."""

    sentences: tuple[str, ...]
    route: Literal["shortcut", "rule", "error", "emergency"]
    intent: str | None
    flow: str = "continue"
    change: Change = field(default_factory=Change)
    rule: str | None = None  # the shortcut's name (logs)
    escalation: str | None = None  # the emergency number told ("119", "112", "109")

    @property
    def reply(self) -> str:
        """The sentences as said (a sentence tagged with its own language, untagged)."""
        return " ".join(untag(s)[1] for s in self.sentences)

    @property
    def ends_call(self) -> bool:
        """The call ends (or is handed to a person) once these sentences are heard."""
        return self.flow == "end" or self.change.transfer


@dataclass(frozen=True)
class CreateTicket:
    """A yes to the read-back: make the ticket from these slots, then ``ticket_created``."""

    slots: dict


@dataclass(frozen=True)
class LookUpStatus:
    """A reception number: find its ticket, then ``status_found``."""

    number: str


@dataclass(frozen=True)
class AskModel:
    """No rule answers: look up the city's facts for ``text``, then the one structured model call."""

    text: str


@dataclass(frozen=True)
class BookCallback:
    """A yes to the callback offer: record it for the desk, then ``callback_booked``."""

    after: datetime  # when the desk opens
    reception_no: str | None = None  # the latest ticket of this call: the callback's context


@dataclass(frozen=True)
class TextTicket:
    """A yes to the SMS offer: record the caller's consent and queue one text, then ``sms_requested``."""

    number: str  # the reception number offered


Decision = Speak | CreateTicket | LookUpStatus | BookCallback | TextTicket | AskModel


@dataclass(frozen=True)
class ModelFollowUp:
    """After a valid model answer: sentences the rules add, and the change."""

    sentences: tuple[str, ...]
    change: Change
    ends_call: bool


class DialogPolicy:
    """One call line's rules. Shared by every call (it holds no per-call state)."""

    def __init__(self, *, shortcuts: ShortcutMatcher, canned: CannedReplies, intake: Intake | None,
                 can_transfer: bool, emergency: EmergencyRules | None = None,
                 emergency_transfer: dict[str, str] | None = None, calendar: LineCalendar | None = None,
                 clock: Callable[[], datetime] | None = None, offer_callback: bool = True,
                 offer_sms: bool = False, abuse: AbuseRules | None = None, language: str = languages.FIRST,
                 instruction: str = "", ai_notice: str = "", recording_notice: str = "",
                 unserved: tuple[str, ...] = (), menu: dict[str, tuple[str, str, str]] | None = None,
                 siblings: dict[str, DialogPolicy] | None = None):
        self.shortcuts = shortcuts
        self.canned = canned
        self.intake = intake
        self.can_transfer = can_transfer
        self.emergency = emergency
        self.emergency_transfer = emergency_transfer or {}
        self.calendar = calendar  # None: a person is always there (when can_transfer)
        self.clock = clock or (calendar.now if calendar else datetime.now)
        self.offer_callback = offer_callback
        # sms.enabled and sms.after_ticket: a new ticket is followed by the offer to text its number
        # (only on calls with a number to text: ``DialogState.textable``).
        self.offer_sms = offer_sms
        self.abuse = abuse  # insults, harassment, threats to staff: warned once, then the call ends
        self._transfer = next((s for s in shortcuts.shortcuts if s.action == "transfer"), None)
        # Every language of the line (bot/dialog/language_packs.py), this one too: the same rules with
        # their words, one dict shared by them all (each adds itself).
        self.siblings: dict[str, DialogPolicy] = siblings if siblings is not None else {}
        self.siblings[language] = self
        self.language = language  # the words' language: the calendar speaks it too
        self.instruction = instruction  # asks the model to reply in this language ("" for the first)
        # The keypad menu: key -> (language, its "switched" sentence, its menu line after the greeting).
        self.menu: dict[str, tuple[str, str, str]] = menu or {}
        # Said once to a caller heard in a language the line does not serve (Korean, then English).
        self.unserved = unserved
        # This language's recording notice, said after a switch to it ("" when calls are not recorded).
        self.recording_notice = recording_notice
        # An AI answers (issue 47): said right after the greeting, and after a switch to this language.
        self.ai_notice = ai_notice

    def language_heard(self, guess: LanguageGuess | None, heard: LanguageGuess | None) -> Change:
        """What Whisper heard a segment in (``stt.language = "auto"``): the call follows its switcher
        (``LanguageSwitcher.observe``), and a language the line does not serve is held for ``decide``
        once there is evidence (``UnservedRule``). Nothing is said; the last reply stays."""
        return Change(remember_reply=False, heard=guess, heard_any=heard)

    def for_language(self, language: str) -> DialogPolicy:
        """This line's rules in the caller's language (itself when it has no other)."""
        return self.siblings.get(language, self)

    # --- the line's calendar ------------------------------------------------------------------

    def line_open(self) -> bool:
        """A person can take the call now (the desk's hours; holidays closed)."""
        return self.calendar is None or self.calendar.is_open(self.clock())

    def _need_calendar(self) -> LineCalendar:
        # Reached only where the desk can be closed or a callback booked, both of which need a calendar.
        assert self.calendar is not None, "the line's calendar used on a line without one"
        return self.calendar

    def _need_intake(self) -> Intake:
        # Tickets, statuses and the read-back exist only on a line with the records (intake set).
        assert self.intake is not None, "an intake answer on a line without the records"
        return self.intake

    def _opens(self) -> str:
        return self._need_calendar().opening_phrase(self.clock(), language=self.language)

    def _desk_closed(self) -> bool:
        return self.can_transfer and not self.line_open()

    def greeting_notes(self, recording_notice: str = "") -> tuple[str, ...]:
        """Said once after the greeting: that an AI answers, the recording notice, and a holiday's name
        when closed for it."""
        notes = [n for n in (self.ai_notice, recording_notice) if n]
        if self._desk_closed():  # a holiday matters to who wants a person
            calendar = self._need_calendar()
            holiday = calendar.holiday(calendar.local(self.clock()).date(), self.language)
            if holiday:
                notes.append(self.canned.holiday_note.format(holiday=holiday))
        return tuple(notes)

    def _closed_transfer(self, intent: str = "transfer") -> Speak:
        """A person asked for outside the hours: when the desk opens, and a callback offer."""
        opens = self._opens()
        sentences = [self.canned.desk_closed.format(opens=opens)]
        awaiting = None
        if self.offer_callback and self.intake is not None:
            sentences.append(self.canned.callback_offer)
            awaiting = CALLBACK
        return Speak(tuple(sentences), "rule", intent, change=Change(awaiting=awaiting))

    def _no_agent_transfer(self, intent: str = "transfer") -> Speak:
        """A person asked for on a line without a transfer number: a callback offer when the desk
        can call back (a calendar and the records), else "not possible now"."""
        if self.offer_callback and self.intake is not None and self.calendar is not None:
            return Speak((self.canned.callback_offer_no_agent,), "rule", intent, change=Change(awaiting=CALLBACK))
        return Speak((self.canned.transfer_unavailable,), "rule", intent)

    def callback_booked(self, ok: bool) -> Speak:
        """The callback row was written (``ok``) or the database failed."""
        if ok and not self.can_transfer:
            sentence = self.canned.callback_booked_no_agent
        elif ok:
            opens = self._opens() if self.calendar else ""
            sentence = self.canned.callback_booked.format(opens=opens)
        else:
            sentence = self.canned.callback_failed
        return Speak((sentence,), "rule", "transfer", change=Change(awaiting=None))

    # --- emergencies --------------------------------------------------------------------------

    def _emergency(self, text: str, state: DialogState) -> Speak | None:
        """Emergencies before anything else: the number to call (and a transfer where configured);
        unsure, one short question; the answer to that question."""
        rules = self.emergency
        assert rules is not None, "decide() checks the emergency rules first"
        if state.awaiting and state.awaiting.startswith(EMERGENCY_CHECK):
            kind = rules.kinds[state.awaiting[len(EMERGENCY_CHECK):]]
            act = self.shortcuts.match(text, context="confirmation")
            if (act is not None and act.action == "confirm_yes") or (act is None and rules.affirms(text)):
                return self._escalate(kind, "confirmed")
        verdict = rules.classify(text)
        if verdict is None:
            return None
        if state.awaiting and state.awaiting.startswith(EMERGENCY_CHECK):
            return self._escalate(verdict.kind, f"repeated:{verdict.rule}")  # the danger, said again
        if not verdict.sure:
            return Speak((verdict.kind.question,), "emergency", "emergency", rule=f"unsure:{verdict.rule}",
                         change=Change(awaiting=EMERGENCY_CHECK + verdict.kind.name))
        return self._escalate(verdict.kind, verdict.rule)

    def _crisis(self, state: DialogState) -> EmergencyKind | None:
        if self.emergency is None or not (state.awaiting and state.awaiting.startswith(CRISIS)):
            return None
        return self.emergency.kinds.get(state.awaiting[len(CRISIS):])

    def _stay(self, kind: EmergencyKind, intent: str | None) -> Speak:
        """A goodbye before the caller said they will call: the line asks once more and stays."""
        return Speak(kind.stay, "emergency", intent, rule=f"{kind.name}:stay")

    def model_emergency(self, kind_name: str) -> Speak | None:
        """The model flagged an emergency the rules missed: escalate exactly as a rule hit would."""
        kind = self.emergency.kinds.get(kind_name) if self.emergency is not None else None
        return self._escalate(kind, "model") if kind is not None else None

    def _escalate(self, kind: EmergencyKind, rule: str) -> Speak:
        to = self.emergency_transfer.get(kind.name)
        sentences = kind.sentences + ((self.canned.emergency_transfer.format(number=to),) if to else ())
        stays = bool(kind.will_call) and not to
        change = Change(awaiting=CRISIS + kind.name if stays else None, transfer=bool(to), transfer_to=to,
                        end=kind.ends_call and not to)
        return Speak(sentences, "emergency", "emergency", "end" if change.end else "continue", change,
                     rule=f"{kind.name}:{rule}", escalation=kind.number)

    # --- abusive callers ----------------------------------------------------------------------

    def _abusive(self, text: str, state: DialogState) -> Speak | None:
        """Abuse after the emergency rules: a calm warning the first time in a call, then a closing
        sentence and the end. Nothing else of the call changes (its slots, tickets, what it awaits).
        A caller in a crisis the line stays in (``CRISIS``) is never warned or hung up on."""
        if self.abuse is None or self._crisis(state) is not None:
            return None
        verdict = self.abuse.classify(text)
        if verdict is None:
            return None
        rule = f"abusive:{verdict.rule}"
        if not state.abuse_warned:
            return Speak((self.canned.abuse_warning,), "rule", "other", rule=rule,
                         change=Change(abuse_warned=True, remember_reply=False))
        return Speak((self.canned.abuse_closing,), "rule", "other", "end", rule=rule,
                     change=Change(end=True, end_reason="abusive", remember_reply=False))

    # --- the longest call (call.max_minutes) ---------------------------------------------------

    def time_limit_near(self, state: DialogState) -> Speak:
        """Two minutes before the limit: the reception number by text (SMS on, a ticket of this call),
        else a callback (the desk can call back), else the plain warning. Nothing pending is replaced
        (a read-back waiting for its yes keeps waiting: the plain warning)."""
        if state.awaiting is None and self.offer_sms and state.textable and state.tickets:
            return Speak((self.canned.time_limit_text,), "rule", "report_problem", rule="time_limit:text",
                         change=Change(awaiting=SMS_OFFER))
        if (state.awaiting is None and self.offer_callback and self.intake is not None
                and self.calendar is not None):
            return Speak((self.canned.time_limit_callback,), "rule", "transfer", rule="time_limit:callback",
                         change=Change(awaiting=CALLBACK))
        return Speak((self.canned.time_limit_warning,), "rule", "other", rule="time_limit:warning")

    def time_limit_reached(self) -> Speak:
        """At ``call.max_minutes``: the polite end (the call's end_reason is "max_minutes")."""
        return Speak((self.canned.time_limit_end,), "rule", "other", "end", rule="time_limit:end",
                     change=Change(end=True, end_reason="max_minutes", remember_reply=False))

    # --- spoken turns -------------------------------------------------------------------------

    def decide(self, text: str, state: DialogState) -> Decision:
        """The caller's whole turn: intake rules, then shortcuts, else the model."""
        if not text:
            return AskModel(text)
        if self.emergency is not None:
            urgent = self._emergency(text, state)
            if urgent is not None:
                return urgent
            if state.awaiting and state.awaiting.startswith(EMERGENCY_CHECK):
                return AskModel(text)  # "no, it is not happening now": the model hears the rest
            crisis = self._crisis(state)
            if crisis is not None and crisis.will_call_now(text):
                return Speak(crisis.closing, "emergency", "emergency", "end", Change(awaiting=None, end=True),
                             rule=f"{crisis.name}:will_call")
        abusive = self._abusive(text, state)
        if abusive is not None:
            return abusive
        if state.heard_unserved and not state.unserved_told and self.unserved:
            return Speak(self.unserved, "rule", "other", change=Change(unserved_told=True),
                         rule=f"unserved:{state.heard_unserved}")
        if state.awaiting == CALLBACK and self.calendar is not None:
            act = self.shortcuts.match(text, context="confirmation")
            if act is not None and act.action == "confirm_yes":
                return self._book_callback(state)
            if act is not None and act.action == "confirm_no":
                return Speak((self.canned.callback_declined,), "rule", "transfer", change=Change(awaiting=None))
        if state.awaiting == SMS_OFFER and state.tickets:
            # The same yes/no rules as the read-back's (shortcuts.toml, context "confirmation").
            act = self.shortcuts.match(text, context="confirmation")
            if act is not None and act.action in ("confirm_yes", "confirm_no"):
                return self._sms_answer(act.action == "confirm_yes", state)
            # Anything else: no text (consent is a clear yes), and the turn goes on as usual.
        if self.intake is not None:
            if state.awaiting == "confirmation":
                act = self.shortcuts.match(text, context="confirmation")
                if act is not None and act.action == "confirm_yes":
                    return CreateTicket(dict(state.slots))
                if act is not None and act.action == "confirm_no":
                    return self._ask_correction()
                # Anything else: the model hears it (the read-back is no longer pending).
            else:
                number = self.intake.reception_number(text)
                if number is not None:
                    return LookUpStatus(number)
        shortcut = self.shortcuts.match(text)
        if shortcut is not None:
            crisis = self._crisis(state)
            if crisis is not None and shortcut.flow == "end":
                return self._stay(crisis, shortcut.intent)
            return self.shortcut(shortcut, state)
        return AskModel(text)

    def shortcut(self, shortcut: Shortcut, state: DialogState) -> Speak:
        if shortcut.action == "repeat":
            last = state.last_reply
            sentences: tuple[str, ...] = (shortcut.reply, last) if last else (self.canned.nothing_to_repeat,)
        elif shortcut.action == "transfer" and not self.can_transfer:
            offer = self._no_agent_transfer(shortcut.intent)
            if offer.change.awaiting == CALLBACK:
                return replace(offer, route="shortcut", rule=shortcut.name)
            sentences = offer.sentences
        elif shortcut.action == "transfer" and self._desk_closed():
            return self._closed_transfer(shortcut.intent)
        else:
            sentences = (shortcut.reply,)
        change = Change(remember_reply=shortcut.action != "repeat",
                        transfer=shortcut.action == "transfer" and self.can_transfer,
                        end=shortcut.flow == "end")
        return Speak(sentences, "shortcut", shortcut.intent, shortcut.flow, change, rule=shortcut.name)

    # --- the phone pad ------------------------------------------------------------------------

    def keypad(self, keys: str, state: DialogState) -> Decision | None:
        """A complete key entry ("0", "1"/"2" during a read-back, the language key, or digits before '#')."""
        if keys in self.menu:
            language, switched, _line = self.menu[keys]
            # The greeting's notices were Korean's: that an AI answers, and the recording, in the new language.
            chosen = self.for_language(language)
            notices = tuple(n for n in (chosen.ai_notice, chosen.recording_notice) if n)
            return Speak((switched, *notices), "rule", "other", change=Change(language=language))
        if keys == "0" and self._transfer is not None:
            return self.shortcut(self._transfer, state)
        if state.awaiting == SMS_OFFER and keys in ("1", "2") and state.tickets:
            return self._sms_answer(keys == "1", state)
        if state.awaiting == CALLBACK and keys in ("1", "2") and self.calendar is not None:
            if keys == "1":
                return self._book_callback(state)
            return Speak((self.canned.callback_declined,), "rule", "transfer", change=Change(awaiting=None))
        if state.awaiting == "confirmation" and keys == "1":
            return CreateTicket(dict(state.slots))
        if state.awaiting == "confirmation" and keys == "2":
            return self._ask_correction()
        if self.intake is None:
            return None
        if len(keys) == self.intake.reception_digits:
            return LookUpStatus(keys)
        msg = self.intake.text("keypad_too_short", digits=self.intake.reception_digits)
        return Speak((msg,), "rule", "check_status")

    # --- answers once the outside world has answered -----------------------------------------

    def ticket_created(self, number: str | None, state: DialogState | None = None) -> Speak:
        """The ticket's reception number, or None when the database failed (the slots are kept).

        With SMS on and a number to text (``state.textable``), the offer to text it follows."""
        intake = self._need_intake()
        if number and self.offer_sms and state is not None and state.textable:
            return Speak((intake.confirmed(number), self.canned.sms_offer), "rule", "report_problem",
                         change=Change(ticket=number, awaiting=SMS_OFFER))
        if number:
            return Speak((intake.confirmed(number),), "rule", "report_problem", change=Change(ticket=number))
        return Speak((intake.text("ticket_failed"),), "rule", "report_problem", change=Change(awaiting=None))

    def _sms_answer(self, yes: bool, state: DialogState) -> Decision:
        if yes:
            return TextTicket(state.tickets[-1])
        return Speak((self.canned.sms_declined,), "rule", "report_problem", change=Change(awaiting=None))

    def sms_requested(self, ok: bool) -> Speak:
        """The consent and the text were written to the outbox (``ok``), or the database failed.
        The text goes out after the call's turn (bot/aftercall/notify.py): "will send", never "sent"."""
        sentence = self.canned.sms_will_send if ok else self.canned.sms_failed
        return Speak((sentence,), "rule", "report_problem", change=Change(awaiting=None))

    def _book_callback(self, state: DialogState) -> BookCallback:
        return BookCallback(self._need_calendar().next_opening(self.clock()), state.tickets[-1] if state.tickets else None)

    def status_found(self, number: str, ticket: dict | None, *, failed: bool = False) -> Speak:
        intake = self._need_intake()
        sentence = intake.text("status_failed") if failed else intake.status(number, ticket)
        return Speak((sentence,), "rule", "check_status")

    def directory(self, reply: str) -> Speak:
        """A department's number or hours, asked plainly: read from the directory (closed now: when it opens)."""
        sentences: tuple[str, ...] = (reply,)
        if self.calendar is not None and not self.line_open():
            sentences += (self.canned.department_closed.format(opens=self._opens()),)
        return Speak(sentences, "rule", "ask_info")

    def _ask_correction(self) -> Speak:
        return Speak((self._need_intake().text("ask_correction"),), "rule", "report_problem", change=Change(awaiting=None))

    # --- after the model ----------------------------------------------------------------------

    def after_model(self, turn: dict, state: DialogState) -> ModelFollowUp:
        """A validated model answer: "no person available" if it chose a transfer we cannot make,
        the read-back once a complaint's slots are complete, and the state change."""
        sentences: list[str] = []
        wants_transfer = turn["intent"] == "transfer"
        awaiting = None
        if wants_transfer and not self.can_transfer:
            no_agent = self._no_agent_transfer()
            sentences += no_agent.sentences
            awaiting = no_agent.change.awaiting
        elif wants_transfer and self._desk_closed():
            closed = self._closed_transfer()
            sentences += closed.sentences
            awaiting = closed.change.awaiting
            wants_transfer = False
        read_back = self._read_back_after(turn, state)
        if read_back:
            sentences.append(read_back)
            awaiting = "confirmation"
        transfer = wants_transfer and self.can_transfer
        if transfer:
            sentences.append(self.canned.person_coming)  # the model's words need not say a person answers next
        crisis = self._crisis(state)
        if crisis is not None and not transfer:
            # The model may answer the caller, but the line does not end before they say they will call.
            if turn["flow"] == "end":
                sentences += crisis.stay
                turn = {**turn, "flow": "continue"}
            awaiting = awaiting or state.awaiting
        change = Change(model_turn=turn, awaiting=awaiting, transfer=transfer)
        return ModelFollowUp(tuple(sentences), change, ends_call=turn["flow"] == "end" or transfer)

    def _read_back_after(self, turn: dict, state: DialogState) -> str | None:
        if self.intake is None or turn["intent"] != "report_problem" or turn["flow"] == "end":
            return None
        after = state.after(turn)
        if not after.intake_open or self.intake.missing(after.slots):
            return None
        return self.intake.read_back(after.slots)

    # --- handing the call to a person ---------------------------------------------------------

    def transfer_summary(self, state: DialogState) -> str:
        """What the person taking a warm transfer hears first: why the call comes, the complaint
        gathered so far and the reception numbers given in this call (digit by digit)."""
        details = []
        slots = state.known_slots()
        if slots.get("category") or slots.get("location"):
            category = self.intake.label(slots.get("category")) if self.intake else slots.get("category")
            details.append(self.canned.whisper_complaint.format(category=category or "-",
                                                                location=slots.get("location") or "-"))
        read = self.intake.read_number if self.intake is not None else languages.get(self.language).read_digits
        details += [self.canned.whisper_ticket.format(number=read(n)) for n in state.tickets]
        template = self.canned.whisper_after_errors if state.transfer_reason == "errors" else self.canned.whisper
        return template.format(details=" ".join(details)).strip()

    def callback_answered(self, number: str | None, ticket: dict | None) -> Speak:
        """A booked callback (`run_bot.py callbacks --place`) answered by a person: who calls and
        why, the ticket's status, then a person when one can take it (else the bot goes on)."""
        sentences = [self.canned.callback_intro]
        if number and self.intake is not None:
            sentences.append(self.intake.status(number, ticket))
        transfer = self.can_transfer and self.line_open()
        sentences.append(self.canned.callback_transfer if transfer else self.canned.callback_no_agent)
        return Speak(tuple(sentences), "rule", "transfer",
                     change=Change(ticket=number, awaiting=None, transfer=transfer))

    def callback_machine_message(self, number: str | None) -> str:
        """What an answering machine hears (Twilio's <Say>): who called, and the reception number."""
        read = self.intake.read_number if self.intake is not None else languages.get(self.language).read_digits
        ticket = self.canned.callback_machine_ticket.format(number=read(number)) if number else ""
        return " ".join(self.canned.callback_machine.format(ticket=ticket).split())

    # --- failures -----------------------------------------------------------------------------

    def model_failed(self, previous_turn_failed: bool, failure: LLMFailure | None = None) -> Speak:
        """The model call failed. The second failed turn in a row: a person, or (no desk) a polite end.

        Every kind of ``failure`` is answered alike; it is named in the answer's ``rule`` (logs)."""
        rule = f"llm_failed:{failure}" if failure else None
        if previous_turn_failed and self.can_transfer and self.line_open():
            return Speak((self.canned.transfer_after_errors,), "error", "transfer", rule=rule,
                         change=Change(remember_reply=False, transfer=True, transfer_reason="errors"))
        if previous_turn_failed:
            return Speak((self.canned.closing_hours,), "error", None, "end", Change(remember_reply=False, end=True),
                         rule=rule)
        apology = self.canned.apology if self.can_transfer and self.line_open() else self.canned.apology_no_agent
        return Speak((apology,), "error", None, change=Change(remember_reply=False), rule=rule)

    def stage_failed(self, stage: StageFailure, failed_turns: int, first_of_turn: bool) -> AfterFailure:
        """STT or TTS raised in a turn (``failed_turns``: turns of this call with a failure, this one
        included). END: the polite end (a second turn failed); UNCLEAR (STT) or APOLOGY (TTS, once a
        turn); NOTHING: nothing more to say."""
        if first_of_turn and failed_turns >= 2:
            return AfterFailure.END
        if failed_turns >= 2:
            return AfterFailure.NOTHING  # already ending
        if stage is StageFailure.STT:
            return AfterFailure.UNCLEAR
        return AfterFailure.APOLOGY if first_of_turn else AfterFailure.NOTHING


class KeyBuffer:
    """Keys pressed so far in one call, until they make an entry for ``DialogPolicy.keypad``.

    '0' alone: a person, at once. Digits then '#': a reception number. '*': start over. While a
    read-back or the SMS offer waits, '1' is yes and '2' is no, at once (as they say).
    """

    def __init__(self):
        self.keys = ""

    def press(self, key: str, state: DialogState) -> str | None:
        """The complete entry this key makes, or None while it is still being keyed."""
        if state.awaiting in YES_NO_KEYS and not self.keys and key in ("1", "2"):
            return key
        if key in state.language_keys and not self.keys and state.language != state.language_keys[key]:
            return key  # the language menu: at once
        if key == "*":
            self.keys = ""
        elif key == "#":
            keys, self.keys = self.keys, ""
            return keys or None
        elif key.isdigit():
            if key == "0" and not self.keys:
                return "0"  # a lone 0 transfers at once; a 0 later in a number is a digit
            self.keys += key
        return None
