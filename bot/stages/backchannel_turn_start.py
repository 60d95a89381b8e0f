"""Backchannels are not interruptions: over the bot, a short "네" or "음" lets the reply go on.

Korean callers acknowledge constantly while someone speaks. With a plain VAD turn start every
such sound cuts the bot off and is answered as a turn of its own. Here, while the bot is audible,
the caller's speech does not interrupt at once:

* speech that lasts ``barge_in_secs`` is a barge-in: the turn starts (and the bot stops) then;
* shorter speech waits for its words: a backchannel alone (``bot/data/backchannels.toml``) is
  dropped, neither an interruption nor a turn; anything else interrupts and is answered.

When the bot is silent every sound starts a turn at once, as before: a "네" answering
"맞으신가요?" is the caller's yes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    TranscriptionFrame,
    UserBackchannelFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start import BaseUserTurnStartStrategy

from bot.core.datafile import DataFile
from bot.dialog.shortcuts import normalize

Held = Literal["backchannel", "turn"]


@dataclass(frozen=True)
class Backchannels:
    """The backchannel words of ``bot/data/backchannels.toml``, normalized as the shortcuts are."""

    words: frozenset[str]
    fillers_only: bool = True
    question_is_turn: bool = True

    @classmethod
    def load(cls, path: str | Path) -> Backchannels:
        source = DataFile.read(path, ValueError, "backchannels file")
        source.no_unknown((), ("words", "fillers_only", "question_is_turn"))
        words = source.value(("words",), list, "a list of words (need words = [...])",
                             ok=lambda v: all(isinstance(w, str) for w in v))
        for i, word in enumerate(words):
            if not normalize(word):
                raise source.error(("words", i), f"{word!r} normalizes to nothing (fillers are fillers_only's)")
        return cls(frozenset(normalize(w) for w in words),
                   source.value(("fillers_only",), bool, "true or false", default=True),
                   source.value(("question_is_turn",), bool, "true or false", default=True))

    def is_backchannel(self, text: str) -> bool:
        """Whether the whole transcript only acknowledges ("네 네", "음", "아 그렇죠", "네, 맞아요")."""
        if not text.strip() or (self.question_is_turn and "?" in text):
            return False
        said = [normalize(word) for word in text.split()]
        if not any(said):
            return self.fillers_only
        # Word by word ("네, 그렇죠"), or whole when the STT split a word ("맞 아요").
        return all(w in self.words or not w for w in said) or "".join(said) in self.words


def held_speech(text: str, *, bot_audible: bool, backchannels: Backchannels) -> Held:
    """What a short sound the bot talked over turns out to be, once its words are known.

    A backchannel is dropped only while the bot is still audible: a "네" that arrives after the
    reply ended may answer its last question, so it is a turn.
    """
    return "backchannel" if bot_audible and backchannels.is_backchannel(text) else "turn"


class BackchannelTurnStartStrategy(BaseUserTurnStartStrategy):
    """VAD turn start that holds speech over the bot until it is long enough or its words are known.

    Args:
        backchannels: The backchannel words.
        barge_in_secs: Speech over the bot this long is a barge-in (counted from the speech's start;
            the VAD reports a start ``start_secs`` late and a stop ``stop_secs`` late, and the wait
            allows for both). 0 interrupts at once, as a plain VAD start.
        line_playing: The transport's own clock of bot audio not yet played, when it has one (the
            phone line: Pipecat's output transport sends at twice real time, so it reports the bot
            stopped while the caller still hears the last seconds of a reply).
        vad_stop_secs: The VAD's ``stop_secs`` (its start frame carries only ``start_secs``).

    A dropped backchannel goes on as Pipecat's ``UserBackchannelFrame`` (the user aggregator's
    ``on_user_backchannel`` event; the QA page shows it), never as a transcript.
    """

    def __init__(
        self,
        *,
        backchannels: Backchannels,
        barge_in_secs: float = 0.7,
        line_playing: Callable[[], bool] | None = None,
        vad_stop_secs: float = 0.2,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._backchannels = backchannels
        self._barge_in_secs = barge_in_secs
        self._line_playing = line_playing
        self._vad_stop_secs = vad_stop_secs
        self._bot_speaking = False
        self._vad_speaking = False
        self._held_since: float | None = None  # speech over the bot, no turn yet: when the VAD reported it
        self._barge_in_task: asyncio.Task | None = None

    @property
    def bot_audible(self) -> bool:
        """The bot is speaking, or its audio is still playing on the line."""
        return self._bot_speaking or bool(self._line_playing and self._line_playing())

    async def cleanup(self) -> None:
        await super().cleanup()
        await self._cancel_barge_in()

    async def handle_user_turn_started(self) -> None:
        self._held_since = None
        await self._cancel_barge_in()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            return await self._speech_started(frame)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._vad_speaking = False
            await self._cancel_barge_in()  # short: its words decide
        elif isinstance(frame, TranscriptionFrame) and self._held_since is not None:
            return await self._words_of_held_speech(frame)
        return ProcessFrameResult.CONTINUE

    async def _speech_started(self, frame: VADUserStartedSpeakingFrame) -> ProcessFrameResult:
        self._vad_speaking = True
        if self._barge_in_secs <= 0 or not self.bot_audible:
            self._held_since = None
            await self.trigger_user_turn_started()
            return ProcessFrameResult.STOP
        # Over the bot: hold. The VAD saw start_secs of speech already and reports its end stop_secs late.
        self._held_since = time.monotonic()
        wait = max(0.0, self._barge_in_secs - frame.start_secs) + self._vad_stop_secs
        await self._cancel_barge_in()
        self._barge_in_task = self.task_manager.create_task(self._barge_in_after(wait), f"{self}::barge_in")
        logger.debug("{}: caller speaks over the bot: a barge-in if it lasts {:.2f} s more", self, wait)
        return ProcessFrameResult.STOP

    async def _barge_in_after(self, wait: float) -> None:
        try:
            await asyncio.sleep(wait)
        except asyncio.CancelledError:
            return
        self._barge_in_task = None
        if self._held_since is None or not self._vad_speaking:
            return
        logger.info("{}: barge-in: the caller still speaks over the bot {:.2f} s after the VAD heard them", self,
                    self._held_secs())
        self._held_since = None
        await self.trigger_user_turn_started()

    async def _words_of_held_speech(self, frame: TranscriptionFrame) -> ProcessFrameResult:
        secs = self._held_secs()
        if held_speech(frame.text, bot_audible=self.bot_audible, backchannels=self._backchannels) == "turn":
            logger.info("{}: the caller's words over the bot are a turn (held {:.2f} s): interrupting", self, secs)
            self._held_since = None
            await self.trigger_user_turn_started()
            return ProcessFrameResult.STOP
        logger.info("{}: backchannel over the bot (held {:.2f} s): not an interruption, not a turn", self, secs)
        logger.debug("{}: backchannel: [{}]", self, frame.text)
        if not self._vad_speaking:
            self._held_since = None  # else the caller went on: that speech is still held
        await self.trigger_reset_aggregation()  # the aggregator already took the words in
        await self.push_frame(UserBackchannelFrame(text=frame.text, user_id=frame.user_id, timestamp=frame.timestamp))
        return ProcessFrameResult.STOP  # and no transcription start strategy opens a turn for it

    def _held_secs(self) -> float:
        return time.monotonic() - self._held_since if self._held_since is not None else 0.0

    async def _cancel_barge_in(self) -> None:
        if self._barge_in_task:
            await self.task_manager.cancel_task(self._barge_in_task)
            self._barge_in_task = None

