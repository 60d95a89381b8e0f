"""Per-call dialog state: the slots known so far, the last reply, and whether the call ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.datafile import read_toml

SLOT_NAMES = ("category", "location", "time")


@dataclass(frozen=True)
class CannedReplies:
    """Fixed sentences the bot speaks without the model (data file: bot/data/replies.toml)."""

    apology: str
    nothing_to_repeat: str
    transfer_unavailable: str
    unclear: str

    @classmethod
    def load(cls, path: Path) -> "CannedReplies":
        data = read_toml(path, ValueError, "canned replies file")
        try:
            return cls(**{k: str(data[k]) for k in ("apology", "nothing_to_repeat", "transfer_unavailable", "unclear")})
        except KeyError as e:
            raise ValueError(f"{path}: missing canned reply {e}") from e


@dataclass
class DialogState:
    """What one call knows. Never shared between calls."""

    slots: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(SLOT_NAMES))
    last_reply: str = ""
    ended: bool = False
    transfer_requested: bool = False

    def known_slots(self) -> dict[str, str]:
        return {k: v for k, v in self.slots.items() if v}

    def apply_turn(self, turn: dict) -> None:
        """Fold a validated model turn into the state: ``new_topic`` clears, known slots persist."""
        if turn.get("flow") == "new_topic":
            self.slots = dict.fromkeys(SLOT_NAMES)
        for name in SLOT_NAMES:
            value = turn.get(name)
            if name == "category" and value == "none":
                continue
            if value:
                self.slots[name] = value
        if turn.get("flow") == "end":
            self.ended = True
