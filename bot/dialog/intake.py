"""Complaint intake and status by reception number: the dialog's rules around the database.

The model gathers the slots (one call per turn at most); these rules decide when to read them
back, what a yes or a no means while a read-back waits, and what to say about a ticket. Texts
live in bot/data/intake.toml.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot import languages
from bot.core.datafile import DataFile, Keys
from bot.dialog.domain import Domain

TEXT_KEYS = ("read_back", "time_part", "confirmed", "ask_correction", "ticket_failed", "status", "status_unknown",
             "status_failed", "keypad_too_short")


class IntakeError(ValueError):
    """bot/data/intake.toml cannot be used (the message names the key)."""


@dataclass(frozen=True)
class Intake:
    texts: dict[str, str]
    status_labels: dict[str, str]
    needs_time: frozenset[str]
    reception_digits: int
    category_labels: dict[str, str]
    # How a reception number is spoken (digit by digit, in the call's language).
    read_number: Callable[[str], str] = field(default_factory=lambda: languages.get(languages.FIRST).read_digits)

    @classmethod
    def load(cls, path: Path, domain: Domain) -> Intake:
        return cls.from_source(DataFile.read(path, IntakeError, "intake file"), domain)

    @classmethod
    def from_source(cls, source: DataFile, domain: Domain, keys: Keys = (),
                    read_number: Callable[[str], str] | None = None) -> Intake:
        """The intake texts of the table at ``keys`` (the whole file by default); errors name file:line."""
        data = source.table(keys) if keys else source.data
        for k in TEXT_KEYS:
            source.value((*keys, k), str, "a text")
        labels = {c.name: c.label for c in domain.categories}
        for c in source.table((*keys, "category_labels"), default={}):
            if c not in labels:
                raise source.error((*keys, "category_labels", c), f"category_labels names unknown category {c!r}")
        labels |= data.get("category_labels", {})
        needs_time = source.value((*keys, "needs_time"), list, "a list of categories", default=[])
        for i, c in enumerate(needs_time):
            if c not in labels:
                raise source.error((*keys, "needs_time", i), f"needs_time names unknown category {c!r}")
        return cls(
            texts={k: data[k] for k in TEXT_KEYS},
            status_labels=dict(data.get("status_labels", {})),
            needs_time=frozenset(data.get("needs_time", [])),
            reception_digits=int(data.get("reception_digits", 8)),
            category_labels=labels,
            read_number=read_number or languages.get(languages.FIRST).read_digits,
        )

    # --- intake -------------------------------------------------------------------------------

    def missing(self, slots: dict[str, str | None]) -> list[str]:
        """Slots still needed before a read-back."""
        need = ["category", "location"]
        if slots.get("category") in self.needs_time:
            need.append("time")
        return [n for n in need if not slots.get(n) or slots.get(n) == "none"]

    def read_back(self, slots: dict[str, str | None]) -> str:
        time_part = self.texts["time_part"].format(time=slots["time"]) if slots.get("time") else ""
        return self.texts["read_back"].format(category=self.label(slots["category"]), location=slots["location"],
                                              time_part=time_part)

    def confirmed(self, number: str) -> str:
        return self.texts["confirmed"].format(number=self.read_number(number))

    def label(self, category: str | None) -> str:
        return self.category_labels.get(category or "", category or "")

    # --- status -------------------------------------------------------------------------------

    def reception_number(self, utterance: str) -> str | None:
        """The reception number when the utterance is one (spoken digits with fillers), else None."""
        digits = languages.get(languages.FIRST).spoken_digits(utterance)  # numerals, or the first language's words
        return digits if digits and len(digits) == self.reception_digits else None

    def status(self, number: str, ticket: dict | None) -> str:
        if ticket is None:
            return self.texts["status_unknown"].format(number=self.read_number(number))
        return self.texts["status"].format(number=self.read_number(number), category=self.label(ticket["category"]),
                                           status=self.status_labels.get(ticket["status"], ticket["status"]))

    def text(self, key: str, **kw: object) -> str:
        return self.texts[key].format(**kw)
