"""Frames a stage pushes to say what it decided or measured about a turn, for the turn's record.

The dialog stage pushes them (downstream: the stages after it pass frames they do not know on);
``TurnObserver`` (``bot/telemetry/turns.py``) reads them and fills the record, so no stage writes
records itself.

They are system frames: the speculation gate lets them by at once (a speculative run's request and
first token are timed when they happen) and an interruption never drops them (a reply cut off by
the caller still records its route). Each carries

* ``run``: the dialog stage's answering run it belongs to. The observer binds a run to the record
  that is open when the run begins (``DialogTurnFrame``, ``KeypadTurnFrame``), so a fact that
  arrives after the caller's next turn has opened still lands in its own turn's record;
* ``t``: when it happened (observers run later, off a queue: their own clock would be late).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import SystemFrame


class AsksToRepeat:
    """Marks a frame that says the caller's words could not be read: the turn is answered with a
    request to repeat (route ``unclear``). ``bot.stages.whisper.UnclearSpeechFrame`` is one."""


@dataclass
class TurnFactFrame(SystemFrame):
    """Something about one dialog run's turn (see the module doc)."""

    run: int = 0  # 0: no run (the record open now)
    t: float = field(default_factory=time.time)


@dataclass
class DialogTurnFrame(TurnFactFrame):
    """A run began for the caller's turn: what the dialog saw (binds the run to the open record)."""

    transcript: str | None = None  # None: the turn ended without the caller's words
    line_open: bool | None = None
    language: str | None = None


@dataclass
class KeypadTurnFrame(TurnFactFrame):
    """Keys pressed on the phone pad make a turn of their own: a new record, bound to the run."""

    transcript: str = ""
    line_open: bool | None = None
    language: str | None = None


@dataclass
class FactsFoundFrame(TurnFactFrame):
    """The city's facts looked up for the turn, and the directory entry that answers it, if one does."""

    retrieval_ms: float = 0.0
    facts: list[str] = field(default_factory=list)
    directory_hit: str | None = None


@dataclass
class LLMRequestFrame(TurnFactFrame):
    """A model call was made for the turn (``t``: the request)."""


@dataclass
class LLMRequestWithdrawnFrame(TurnFactFrame):
    """The run's speculative model call was withdrawn: the caller went on speaking."""


@dataclass
class TurnMarkFrame(TurnFactFrame):
    """A moment of the turn (``TurnRecord.mark``): ``llm_first_token``, ``first_sentence``."""

    mark: str = ""  # (not ``name``: every Pipecat frame has one)
    overwrite: bool = False


@dataclass
class SpeechReadFrame(TurnFactFrame):
    """The STT read (or rejected) one VAD segment of the open turn: the latest one times its STT."""

    audio_secs: float = 0.0
    transcribe_ms: float = 0.0
    rtf: float = 0.0
    language_p: float | None = None  # stt.language = "auto": Whisper's probability (None: forced, rejected)


@dataclass
class SentenceReadyFrame(TurnFactFrame):
    """A sentence's audio is ready to play: synthesized in ``synth_ms``, or from memory (0)."""

    synth_ms: float = 0.0
    text: str = ""  # as synthesized (normalized): names a canned sentence in ``heard``


@dataclass
class TurnAnsweredFrame(TurnFactFrame):
    """The turn's answer, once it is final (a speculative one: once the turn is confirmed).

    ``route`` and ``reply`` are always set; the other fields only when not None (what the route says).
    """

    route: str = ""
    reply: str = ""
    intent: str | None = None
    flow: str | None = None
    escalation: str | None = None
    answer_source: str | None = None
    slots: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class TurnOpenedFrame(TurnFactFrame):
    """The bot spoke first, not answering the caller: the greeting, a callback's opening, a resumed
    call's sentence. Marks ``first_sentence`` at ``t`` when ``said``."""

    line_open: bool | None = None
    said: bool = True
    route: str | None = None  # "resumed"; None: the record keeps its own ("greeting")
    reply: str | None = None  # what the caller heard, where the desk reads it
    ai_notice: bool = False  # the greeting said that an AI answers


@dataclass
class EndpointChosenFrame(TurnFactFrame):
    """How long the turn-stop strategy waits after the caller's words: ``kind`` is final | continuing | default."""

    kind: str = ""
    wait_ms: float = 0.0


@dataclass
class BackchannelHeardFrame(TurnFactFrame):
    """The caller said "네" while the reply played: neither an interruption nor a turn."""


@dataclass
class StageFailedFrame(TurnFactFrame):
    """A stage other than the model failed in the turn (the first error of a turn is kept)."""

    error: str = ""


@dataclass
class CannedPlayedFrame(TurnFactFrame):
    """A canned sentence played straight from memory (the apology after a TTS failure): its name."""

    sentence: str = ""
