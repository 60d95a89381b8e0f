"""Korean end-of-turn: the wait after the caller stops is chosen from how their words end.

"…접수하고 싶습니다" is complete: answer after a short wait. "쓰레기랑…" or "그리고…" is not: wait
longer so the caller is not cut off. Everything else gets the normal speech timeout. While the
wait runs, the model call can start speculatively on the final transcript (Pipecat's speculation
gate holds its answer until the turn really ends, and discards it if the caller goes on).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    STTMetadataFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy

from bot.core.datafile import DataFile
from bot.stages.whisper import SegmentUnreadFrame, UnclearSpeechFrame
from bot.telemetry.turn_facts import EndpointChosenFrame

_TRAILING = re.compile(r"[\s.,!…~·]+$")


@dataclass(frozen=True)
class EndingRule:
    kind: str  # final | continuing
    name: str
    pattern: re.Pattern


class EndOfTurnRules:
    """Ordered ending rules from ``bot/data/endpointing.toml``."""

    def __init__(self, rules: list[EndingRule]):
        self.rules = rules

    @classmethod
    def load(cls, path: Path) -> EndOfTurnRules:
        source = DataFile.read(path, ValueError, "end-of-turn rules file")
        rules = []
        for i, _raw in enumerate(source.tables(("rules",), default=[], nonempty=False)):
            key = ("rules", i)
            source.no_unknown(key, ("kind", "name", "pattern"))
            kind = source.value((*key, "kind"), str, "final or continuing", ok=lambda v: v in ("final", "continuing"))
            name = source.value((*key, "name"), str, "a string", default=f"rule{i}")
            pattern = source.value((*key, "pattern"), str, "a regex")
            try:
                rules.append(EndingRule(kind, name, re.compile(pattern)))
            except re.error as e:
                raise source.error((*key, "pattern"), f"bad regex {pattern!r}: {e}") from e
        return cls(rules)

    def classify(self, text: str) -> tuple[str, str | None]:
        """("final" | "continuing" | "default", the rule's name)."""
        tail = _TRAILING.sub("", text.strip())
        for rule in self.rules:
            if rule.pattern.search(tail):
                return rule.kind, rule.name
        return "default", None


# Audio reaches the analyzer a chunk (20 ms on the phone line) at a time: the audio clock trails the
# wall clock by up to a chunk even when nothing is behind.
_AUDIO_CLOCK_SLACK_SECS = 0.04


@dataclass
class ResumeHold:
    """The end held until the VAD has heard the wait's silence (``KoreanEndOfTurnStopStrategy``'s
    silence_heard)."""

    silence_heard: Callable[[], float]
    max_secs: float
    holding: bool = False  # the held end is being tried now: it must not hold again

    def short_of(self, wait: float) -> bool:
        return self.silence_heard() < wait - _AUDIO_CLOCK_SLACK_SECS


class KoreanEndOfTurnStopStrategy(SpeechTimeoutUserTurnStopStrategy):
    """Speech-timeout turn stop whose wait depends on the transcript's ending, with speculation.

    Args:
        rules: The ending rules.
        waits: Seconds to wait after speech for "final", "continuing" and "default" endings.
        speculate: Start the model call on the final transcript while the wait still runs.
        on_decision: Called with (kind, wait_secs) whenever the wait is chosen (the record gets an
            ``EndpointChosenFrame``).
        unclear_reply: Said when the whole turn was speech the STT could not make out
            (``UnclearSpeechFrame``), after the default wait, instead of the stop timeout's silence
            (a callable: asked each time, for the call's current language).
        silence_heard: Seconds of audio the VAD has analysed since it last heard speech
            (``SharedSileroVADAnalyzer.silence_heard``). A wait runs on the wall clock; when it runs
            out with less silence heard than the wait, the end holds, for at most
            ``resume_hold_secs``: the caller is speaking again (not yet ``start_secs`` long, or its
            start frame on its way), or their audio is still queued before the analyzer (a loaded
            machine). A caller who paused for breath is not cut off either way.
        resume_hold_secs: The longest such hold (past it the turn ends as if the silence were heard).
        stt_net_secs: The least wait for a segment's transcript after the VAD stop. The product's STT
            answers every segment in order (a transcript, or ``SegmentUnreadFrame``), so this is a
            net for a hung STT, not Pipecat's p99 guess: a segment transcribed late on a loaded
            machine (1.3 s under stress-ng; more on the CI's) is waited for, not left to open a turn
            of its own after the turn ended on the words before it.
    """

    def __init__(
        self,
        *,
        rules: EndOfTurnRules,
        waits: dict[str, float],
        speculate: bool = True,
        on_decision: Callable[[str, float], None] | None = None,
        unclear_reply: str | Callable[[], str] | None = None,
        silence_heard: Callable[[], float] | None = None,
        resume_hold_secs: float = 1.2,
        stt_net_secs: float = 4.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(user_speech_timeout=waits["default"], **kwargs)
        self._rules = rules
        self._waits = waits
        self._speculate = speculate
        self._on_decision = on_decision
        self._segments: list[str] = []
        self._vad_stopped_at: float | None = None
        self._speculated_text: str | None = None
        self._unclear_reply = unclear_reply
        self._unclear = False
        self._turn_open = False
        self._resume = ResumeHold(silence_heard, resume_hold_secs) if silence_heard else None
        self._stt_net_secs = stt_net_secs

    async def handle_user_turn_started(self) -> None:
        self._turn_open = True
        await super().handle_user_turn_started()

    async def handle_user_turn_stopped(self) -> None:
        self._turn_open = False
        await super().handle_user_turn_stopped()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        if isinstance(frame, (TranscriptionFrame, UnclearSpeechFrame)) and not self._turn_open:
            # Words no turn was started for (a backchannel over the bot): not this strategy's, and
            # they must not choose a wait, speculate or ask "say again" inside the bot's reply.
            return ProcessFrameResult.CONTINUE
        if isinstance(frame, UnclearSpeechFrame):
            await self._handle_unclear_speech()
            return ProcessFrameResult.CONTINUE
        if isinstance(frame, SegmentUnreadFrame):
            await self._handle_unread_segment(frame)
            return ProcessFrameResult.CONTINUE
        result = await super().process_frame(frame)
        if isinstance(frame, STTMetadataFrame):
            self._stt_timeout = max(self._stt_timeout, self._stt_net_secs)
        return result

    async def _handle_unread_segment(self, frame: SegmentUnreadFrame) -> None:
        """The STT answered for the last segment without words: wait no longer for a transcript."""
        if not frame.finalized or not self._turn_open or self._vad_user_speaking or self._stt_wait_done:
            return
        self._stt_wait_done = True
        if self._stt_timeout_task:
            await self.task_manager.cancel_task(self._stt_timeout_task)
            self._stt_timeout_task = None
        await self._maybe_trigger_user_turn_stopped()

    async def _hold_until_silence_heard(self) -> bool:
        """True when the end waits: the VAD has not yet heard the wait's silence (speech again, not
        yet long enough for a start; or audio still queued before it).

        The hold runs as the speech timer's task, so the VAD's start (the caller goes on) cancels it
        with the rest of the pending end (``_discard_pending_end_of_turn``)."""
        resume, wait = self._resume, self._user_speech_timeout
        if resume is None or resume.holding or not resume.short_of(wait):
            return False
        self._user_speech_timeout_task = self.task_manager.create_task(
            self._hold(resume, wait), f"{self}::_hold_until_silence_heard")
        return True

    async def _hold(self, resume: ResumeHold, wait: float) -> None:
        deadline = time.monotonic() + resume.max_secs
        try:
            # The analyzer's clock moves once per audio chunk and signals nothing: polled.
            while resume.short_of(wait) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            return
        finally:
            self._user_speech_timeout_task = None
        logger.debug("{}: end held {:.2f} s until {:.2f} s of silence was heard; no speech started a turn", self,
                     resume.max_secs - max(0.0, deadline - time.monotonic()), resume.silence_heard())
        resume.holding = True
        try:
            await self._maybe_trigger_user_turn_stopped()
        finally:
            resume.holding = False

    async def _handle_unclear_speech(self) -> None:
        if not self._unclear_reply or self._vad_stopped_at is None or self._vad_user_speaking:
            return
        self._unclear = True
        self._stt_wait_done = True  # the STT has answered: it could not read it
        await self._rearm_speech_wait(self._waits["default"])
        await self._maybe_trigger_user_turn_stopped()

    async def _rearm_speech_wait(self, wait: float) -> bool:
        """Restart the policy timer so it ends ``wait`` after speech stopped; True if still waiting."""
        if self._user_speech_timeout_task:
            await self.task_manager.cancel_task(self._user_speech_timeout_task)
            self._user_speech_timeout_task = None
        # Both callers checked: the wait counts from when speech stopped.
        assert self._vad_stopped_at is not None, "a speech wait re-armed before speech stopped"
        remaining = wait - (time.monotonic() - self._vad_stopped_at)
        self._user_speech_wait_done = remaining <= 0
        if remaining > 0:
            self._user_speech_timeout_task = self.task_manager.create_task(
                self._user_speech_timeout_handler(remaining), f"{self}::_user_speech_timeout_handler"
            )
        return remaining > 0

    async def _reset(self, *, clear_vad_user_speaking: bool) -> None:
        self._segments = []
        self._vad_stopped_at = None
        self._speculated_text = None
        self._unclear = False
        self._user_speech_timeout = self._waits["default"]
        await super()._reset(clear_vad_user_speaking=clear_vad_user_speaking)

    async def _handle_vad_user_started_speaking(self, frame: VADUserStartedSpeakingFrame) -> None:
        # The caller goes on: an answer prepared for the shorter turn must not be spoken.
        await self._withdraw_speculation()
        self._vad_stopped_at = None
        await super()._handle_vad_user_started_speaking(frame)

    async def _handle_vad_user_stopped_speaking(self, frame: VADUserStoppedSpeakingFrame) -> None:
        self._vad_stopped_at = time.monotonic()
        await super()._handle_vad_user_stopped_speaking(frame)

    async def _handle_transcription(self, frame: TranscriptionFrame) -> None:
        self._segments.append(frame.text.strip())
        text = " ".join(s for s in self._segments if s)
        kind, rule = self._rules.classify(text)
        wait = self._waits[kind]
        self._user_speech_timeout = wait
        await self.push_frame(EndpointChosenFrame(kind=kind, wait_ms=wait * 1000))  # the turn's record
        if self._on_decision:
            self._on_decision(kind, wait)
        logger.debug("{}: ending {} ({}) -> wait {:.2f}s", self, kind, rule, wait)
        if self._vad_stopped_at is not None and not self._vad_user_speaking:
            # This ending's wait, counted from when speech stopped; answer speculatively meanwhile.
            if await self._rearm_speech_wait(wait) and self._speculate and frame.finalized:
                await self._start_speculation(text)
        await super()._handle_transcription(frame)
        if self._vad_user_speaking:
            # Words from before the caller went on: the STT marked them final when it had not yet heard
            # the new start. They do not cover this speech; its own transcript must still come.
            self._transcript_finalized = False

    async def _start_speculation(self, text: str) -> None:
        if self._speculated_text == text:
            return
        await self._withdraw_speculation()
        self._speculated_text = text
        await self.trigger_user_turn_inference_triggered(speculation=UserTurnSpeculation(text=text))

    async def _withdraw_speculation(self) -> None:
        if self._speculated_text is not None:
            self._speculated_text = None
            await self.trigger_user_turn_speculation_cancelled()

    async def _maybe_trigger_user_turn_stopped(self) -> None:
        if self._vad_user_speaking:
            return
        if not self._text and self._unclear:
            if self._user_speech_wait_done and self._stt_wait_done:
                # Nothing readable in the whole turn: close it and ask again (no model call).
                self._unclear = False
                await self.trigger_user_turn_stopped()
                reply = self._unclear_reply() if callable(self._unclear_reply) else self._unclear_reply
                assert reply is not None, "unclear speech is handled only with an unclear_reply"
                await self.push_frame(TTSSpeakFrame(reply))
            return
        if self._wait_for_transcript and not self._text:
            return
        if not (self._user_speech_wait_done and self._stt_wait_done):
            return
        if await self._hold_until_silence_heard():
            return
        text = " ".join(s for s in self._segments if s)
        if self._speculated_text is not None and self._speculated_text == text:
            # The answer already being prepared is for exactly this turn: release it.
            self._speculated_text = None
            await self.trigger_user_turn_finalized(confirms_speculation=True)
            return
        await self._withdraw_speculation()
        await self.trigger_user_turn_stopped()
