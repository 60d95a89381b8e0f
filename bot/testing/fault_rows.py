"""One row of the fault lab (``bot/tools/faults.py``): what a fault did to a call, as measured.

The lab fills rows; the oracles (``bot/testing/fault_oracles.py``) judge them. Both sides import
this, so it sits in the test lab layer, below the command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    """One fault as the caller met it."""

    fault: str
    injected: str
    heard: str = "-"
    first_audio_s: float | None = None  # caller's speech end -> first audible bot audio (caller side)
    apology_s: float | None = None  # server: turn end -> first bot audio of the failed turn
    longest_silence_s: float | None = None
    lag_p99_ms: float | None = None
    records_intact: bool | None = None
    outcome: str = ""
    #: The sentence names the caller heard, in order (from the turn records).
    names: list[str] = field(default_factory=list)
    #: What else the scenario observed, by name (status and close codes, counts, exit status).
    facts: dict[str, Any] = field(default_factory=dict)
    #: The calls that ran beside this one, as rows of their own.
    others: list[Row] = field(default_factory=list)
    seconds: float = 0.0  # how long the scenario ran
