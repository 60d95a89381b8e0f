"""Per-call dialog state: the slots known so far, the last reply, and whether the call ends."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from bot import languages
from bot.core.datafile import DataFile, Keys
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher

SLOT_NAMES = ("category", "location", "time")


@dataclass(frozen=True)
class CannedReplies:
    """Fixed sentences the bot speaks without the model (data file: bot/data/replies.toml)."""

    apology: str
    nothing_to_repeat: str
    transfer_unavailable: str
    unclear: str
    # Faults and edges of a call (see replies.toml): every one ends in speech, never silence.
    apology_no_agent: str
    filler: str
    transfer_after_errors: str
    closing_hours: str
    idle_prompt: str
    idle_goodbye: str
    shutdown_goodbye: str
    resumed: str  # issue 46: the call came back after its stream ended on another worker
    busy: str
    # Emergencies and the desk's hours ({number}, {opens}, {holiday}, {hours} are filled in).
    emergency_transfer: str
    desk_closed: str
    callback_offer: str
    callback_booked: str
    callback_offer_no_agent: str
    callback_booked_no_agent: str
    callback_failed: str
    callback_declined: str
    department_closed: str
    holiday_note: str
    # Warm transfer: what the person taking the call hears first (Twilio says it; templates).
    whisper: str
    whisper_after_errors: str
    whisper_complaint: str
    whisper_ticket: str
    # The reception number by SMS (sms.enabled): the offer after a ticket and its answers.
    sms_offer: str
    sms_will_send: str
    sms_declined: str
    sms_failed: str
    # A callback placed by `run_bot.py callbacks --place` and answered by a person.
    callback_intro: str
    callback_transfer: str
    callback_no_agent: str
    callback_machine: str
    callback_machine_ticket: str
    # Issue 47: a person coming (a transfer the model chose), abusive callers, the longest call.
    person_coming: str
    abuse_warning: str
    abuse_closing: str
    time_limit_callback: str
    time_limit_text: str
    time_limit_warning: str
    time_limit_end: str

    @classmethod
    def load(cls, path: Path) -> CannedReplies:
        return cls.from_source(DataFile.read(path, ValueError, "canned replies file"))

    @classmethod
    def from_source(cls, source: DataFile, keys: Keys = ()) -> CannedReplies:
        """The replies of the table at ``keys`` (the whole file by default); errors name file:line."""
        source.table(keys, default={})
        return cls(**{f.name: str(source.value((*keys, f.name), (str, int, float), "a canned reply"))
                      for f in fields(cls)})

    def with_hours(self, hours: str) -> CannedReplies:
        """``{hours}`` filled from the line's calendar, once (those sentences stay pre-synthesizable)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).replace("{hours}", hours)
                                            for f in fields(self) if "{hours}" in getattr(self, f.name)})

    def ids(self) -> dict[str, str]:
        """Sentence -> its name here (turn records say which canned sentence the caller heard).
        Templates filled per turn ({opens}, {number}) are not fixed sentences."""
        return {getattr(self, f.name).strip(): f.name for f in fields(self) if "{" not in getattr(self, f.name)}


@dataclass
class DialogState:
    """What one call knows. Never shared between calls."""

    slots: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(SLOT_NAMES))
    last_reply: str = ""
    ended: bool = False
    transfer_requested: bool = False
    transfer_to: str | None = None  # not the desk: an emergency service's number
    transfer_reason: str | None = None  # "asked" (the caller or the model) or "errors" (turns kept failing)
    # Complaint intake: a report_problem turn opens it; a read-back waits for yes/no ("confirmation").
    intake_open: bool = False
    awaiting: str | None = None
    tickets: list[str] = field(default_factory=list)  # reception numbers given in this call
    # The caller's number is known (a phone call, not the QA page): a text can be offered.
    textable: bool = False
    # The caller's language (a code of line.languages); the switcher decides on speech (stt.language
    # = "auto"), the keypad menu at once. ``language_key``: the menu's key while it is offered.
    language: str = languages.FIRST
    switcher: LanguageSwitcher | None = None
    language_keys: dict[str, str] = field(default_factory=dict)  # the menu's key -> its language
    # Whisper heard a language the line does not serve (bot/languages/ has no voice for it, or the
    # line does not list it): the caller is told once, in Korean and English, where to call (1345).
    heard_unserved: str | None = None
    unserved_told: bool = False
    # Abuse (bot/data/abuse.toml): warned once; the second time the call ends. Why the line ended the
    # call itself ("abusive", "max_minutes"): the call's end_reason in the records (None: "completed").
    abuse_warned: bool = False
    end_reason: str | None = None

    def observe_language(self, guess: LanguageGuess) -> bool:
        """One turn's language guess; True when the call's language changed."""
        if self.switcher is None:
            return False
        before, self.language = self.language, self.switcher.observe(guess)
        return self.language != before

    def observe_heard(self, guess: LanguageGuess) -> bool:
        """Whisper's most probable language over all it knows; True when it is one the line does not
        serve and the caller has not been told yet (the policy then tells them, once)."""
        if self.switcher is None or self.unserved_told or not self.switcher.unserved(guess):
            return False
        self.heard_unserved = guess.language
        return True

    def set_language(self, language: str) -> None:
        if self.switcher is not None:
            self.switcher.force(language)
        self.language = language

    def known_slots(self) -> dict[str, str]:
        return {k: v for k, v in self.slots.items() if v}

    def apply_turn(self, turn: dict) -> None:
        """Fold a validated model turn into the state: ``new_topic`` clears, known slots persist."""
        if turn.get("flow") == "new_topic":
            self.slots = dict.fromkeys(SLOT_NAMES)
            self.intake_open = False
        if turn.get("intent") == "report_problem":
            self.intake_open = True
        for name in SLOT_NAMES:
            value = turn.get(name)
            if name == "category" and value == "none":
                continue
            if value:
                self.slots[name] = value
        if turn.get("flow") == "end":
            self.ended = True

    def after(self, turn: dict) -> DialogState:
        """The state this turn would leave (the real one changes only when the turn is committed)."""
        state = copy.deepcopy(self)
        state.apply_turn(turn)
        return state

    # --- a resumed call (issue 46) ---------------------------------------------------------------

    _SNAPSHOT = ("slots", "last_reply", "intake_open", "awaiting", "tickets", "textable", "language",
                 "language_keys", "heard_unserved", "unserved_told")

    def snapshot(self) -> dict:
        """What a worker resuming this call needs (saved with each turn record; ``restore``)."""
        return copy.deepcopy({name: getattr(self, name) for name in self._SNAPSHOT})

    def restore(self, snapshot: Mapping) -> None:
        """The state a ``snapshot`` recorded, on a fresh state of the same line (unknown names are left)."""
        for name in self._SNAPSHOT:
            if name in snapshot:
                setattr(self, name, copy.deepcopy(snapshot[name]))
        if self.switcher is not None and self.language in self.switcher.languages:
            self.switcher.force(self.language)

    def ticket_made(self, number: str) -> None:
        """A ticket closes the intake: the next complaint starts from empty slots."""
        self.tickets.append(number)
        self.slots = dict.fromkeys(SLOT_NAMES)
        self.intake_open = False
        self.awaiting = None
