"""The Pipecat STT stage: each VAD segment transcribed on the shared ``WhisperEngine``.

A ``TranscriptionFrame`` goes out only for an accepted, non-empty transcript; a segment the guards
rejected that is long enough to be speech goes out as ``UnclearSpeechFrame``. Transcripts are
personal data: they are logged at DEBUG only, never at INFO.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    DataFrame,
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    StartFrame,
    TranscriptionFrame,
    UserMuteStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import SegmentedSTTService, STTService
from pipecat.transcriptions.language import Language
from pipecat.utils.time import time_now_iso8601

from bot.dialog.language_switch import LanguageGuess
from bot.stages.language_heard import LanguageHeardFrame
from bot.stages.whisper.engine import TranscriptResult, WhisperEngine
from bot.telemetry.turn_facts import AsksToRepeat, SpeechReadFrame


@dataclass
class UnclearSpeechFrame(DataFrame, AsksToRepeat):
    """A segment long enough to be speech that the guards rejected (no_speech, low_confidence,
    repetitive, prompt_echo): the turn-stop strategy can ask the caller to say it again instead
    of waiting.
    """

    reason: str = ""
    audio_secs: float = 0.0


@dataclass
class SegmentUnreadFrame(DataFrame):
    """A segment that gave no transcript (rejected or failed): the STT has answered for it, in order
    with the transcripts. ``finalized`` as on a transcript: no later speech is pending, so the turn
    stop need not wait for more (it would otherwise wait out its net for a transcript never coming).
    """

    finalized: bool = False


# Rejections that are probably speech we failed to read (not silence, not an over-long segment).
UNCLEAR_REASONS = ("no_speech", "low_confidence", "repetitive", "prompt_echo")
# The most lead-in kept beyond Pipecat's second while the VAD lags (see _handle_user_started_speaking).
MAX_VAD_BACKLOG_S = 4.0


def _pcm_bytes(secs: float, rate: int) -> int:
    """Bytes of ``secs`` of 16-bit mono PCM at ``rate``, whole samples."""
    return 2 * round(secs * rate)


def _whisper_language(language: Language | str) -> str:
    """``Language.VI`` / "vi-VN" / "vi" -> "vi" (Whisper takes base codes only)."""
    return str(language.value if isinstance(language, Language) else language).split("-")[0].lower()


def _language_heard(result: TranscriptResult, detected: str, p: float) -> LanguageHeardFrame:
    """What Whisper heard a detected, accepted segment in (the dialog stage's policy decides)."""
    words = len(result.text.split())
    guess = LanguageGuess(detected, p, words, result.audio_secs)
    heard = None
    if result.heard and result.heard_p is not None:  # the engine sets ``heard`` with ``heard_p``
        heard = LanguageGuess(result.heard, result.heard_p, words, result.audio_secs, served_p=p)
    return LanguageHeardFrame(guess=guess, heard=heard)


class WhisperSTTProcessor(SegmentedSTTService):
    """Segmented STT on a shared ``WhisperEngine``.

    Each VAD segment arrives as raw 16-bit PCM at ``self.sample_rate`` and is transcribed on
    the engine's worker threads, so this call's audio (and every other call's) keeps flowing.
    A ``TranscriptionFrame`` is pushed only for an accepted, non-empty transcript; rejected
    segments are logged at INFO with their reason (never their text) and counted in
    ``rejected_counts``. A failed transcription becomes a non-fatal ``ErrorFrame``.

    Args:
        engine: The process-wide engine (already loaded and warmed up).
        language: The call's language, decoded in until a ``STTUpdateSettingsFrame`` says another
            (the dialog stage sends one when the call's language moves).
        decode_as: A call's language -> the language its segments are decoded in (a forced
            ``stt.language`` holds while the call is in the line's first language).
        on_result: Called on the event loop with every ``TranscriptResult``, accepted or not
            (latency records hook in here). Its exceptions are logged, not raised.
        ttfs_p99_latency: Seconds from speech end to final transcript, broadcast to the turn
            stop strategies (their wait for a late transcript). Default: VAD ``stop_secs``
            (0.2) plus twice the engine's measured warm-up time, at least 0.5 s; 1.5 s when
            the engine was not warmed up.
        **kwargs: Passed to ``SegmentedSTTService`` (``sample_rate``, ``trailing_silence_secs``...).
    """

    def __init__(
        self,
        *,
        engine: WhisperEngine,
        language: str,
        on_result: Callable[[TranscriptResult], None] | None = None,
        ttfs_p99_latency: float | None = None,
        unclear_min_segment_secs: float = 2.0,
        detect: tuple[str, ...] | None = None,
        decode_p: float = 0.5,
        decode_as: Mapping[str, str] | None = None,
        vad_heard: Callable[[], float] | None = None,
        **kwargs: Any,
    ) -> None:
        if ttfs_p99_latency is None:
            if engine.warmup_ms is None:
                ttfs_p99_latency = 1.5
            else:
                ttfs_p99_latency = max(0.5, round(0.2 + 2 * engine.warmup_ms / 1000, 2))
        try:
            lang: Language | str = Language(language)
        except ValueError:
            lang = language
        super().__init__(
            settings=STTSettings(model=engine.model_path, language=lang),
            ttfs_p99_latency=ttfs_p99_latency,
            **kwargs,
        )
        self._engine = engine
        self._on_result = on_result
        self._unclear_min_secs = unclear_min_segment_secs
        # stt.language = "auto": the languages Whisper may pick; what it heard goes out as a
        # LanguageHeardFrame, and the call's language comes back as a settings frame.
        self._detect = detect
        self._decode_p = decode_p
        self._decode_as = dict(decode_as or {})
        self.rejected_counts: Counter[str] = Counter()
        # VAD segments queued behind the one being transcribed (see push_frame).
        self._segments_waiting = 0
        # The VAD's audio clock (SharedSileroVADAnalyzer.audio_heard), this stage's, and how far apart
        # they stand with nothing queued between them (see _handle_user_started_speaking).
        self._vad_heard = vad_heard
        self._passed_secs = 0.0
        self._unheard_secs = 0.0
        self._lead_in_bytes = 0  # set with the sample rate (start)

    async def push_frame(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        """Mark a transcript final only when no later speech is pending.

        Stock ``SegmentedSTTService`` marks every segment's transcript final. When the caller
        pauses mid-sentence, segment 1's transcript arrives after segment 2 has started; the
        speech-timeout strategy then takes it as "STT has nothing more to send" and ends the
        turn before segment 2 is transcribed, so the caller's last words leak into the next turn.
        """
        if isinstance(frame, (TranscriptionFrame, SegmentUnreadFrame)):
            frame.finalized = not self._user_speaking and self._segments_waiting == 0
            await STTService.push_frame(self, frame, direction)
            return
        await super().push_frame(frame, direction)

    @property
    def wants_wav_segments(self) -> bool:
        """Segments come as raw PCM16 at ``self.sample_rate`` (no WAV header)."""
        return False

    def can_generate_metrics(self) -> bool:
        """Processing-time metrics are reported for each segment."""
        return True

    def language_to_service_language(self, language: Language) -> str | None:
        """Whisper takes base language codes: ``Language.VI_VN`` -> "vi"."""
        return _whisper_language(language)

    def _frame_language(self, code: str) -> Language | None:
        try:
            return Language(code)
        except ValueError:
            return None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, UserMuteStoppedFrame) and self._vad_heard is not None:
            # A muted caller's audio never reaches the VAD (the aggregator drops it): the clocks part for good.
            self._unheard_secs = self._passed_secs - self._vad_heard()

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        self._lead_in_bytes = self._audio_buffer_size_1s  # Pipecat's second before the VAD's start
        if self._vad_heard is not None:  # its idle bound (named for that second) holds the VAD's lag too
            self._audio_buffer_size_1s += _pcm_bytes(MAX_VAD_BACKLOG_S, self.sample_rate)

    async def process_audio_frame(self, frame: InputAudioRawFrame, direction: FrameDirection) -> None:
        self._passed_secs += len(frame.audio) / (2 * self.sample_rate)
        await super().process_audio_frame(frame, direction)

    def _queued_bytes(self) -> int:
        """The audio that has passed this stage but not yet the VAD (at most MAX_VAD_BACKLOG_S; none without
        the VAD's clock)."""
        if self._vad_heard is None:
            return 0
        queued = self._passed_secs - self._vad_heard() - self._unheard_secs
        return _pcm_bytes(min(MAX_VAD_BACKLOG_S, max(0.0, queued)), self.sample_rate)

    async def _handle_user_started_speaking(self, frame):
        """Keep the second before the VAD's start, as Pipecat does, counted from the audio the VAD had
        heard: the VAD sits downstream (in the user aggregator), and what has passed this stage but is
        still queued before it is not yet speech to this stage. Pipecat counts the second back from here,
        so a queue of a second (a loaded machine) cut the caller's first syllables off the segment."""
        if self._vad_heard is not None:
            keep = self._lead_in_bytes + self._queued_bytes()
            if len(self._audio_buffer) > keep:
                del self._audio_buffer[: len(self._audio_buffer) - keep]
        await super()._handle_user_started_speaking(frame)

    async def _handle_user_stopped_speaking(self, frame):
        """End the segment where the VAD heard the speech stop, not at the audio that has passed this stage:
        what is queued before the VAD came after the stop (on a loaded machine the start of the caller's next
        words), so it stays in the buffer for the next segment instead of being cut off and then cleared."""
        tail = b""
        if n := min(len(self._audio_buffer), self._queued_bytes()):
            tail = bytes(self._audio_buffer[-n:])
            del self._audio_buffer[-n:]
        waiting = self._segment_queue.qsize()
        await super()._handle_user_stopped_speaking(frame)
        self._segments_waiting += self._segment_queue.qsize() - waiting
        self._audio_buffer += tail

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        """Transcribe one VAD segment (raw PCM16 mono at ``self.sample_rate``)."""
        self._segments_waiting = max(0, self._segments_waiting - 1)
        language = _whisper_language(self._settings.language or self._engine.cfg.language)
        language = self._decode_as.get(language, language)
        await self.start_processing_metrics()
        try:
            # Forced language: the call is the same as before auto detection existed.
            if self._detect:
                result = await self._engine.transcribe_async(audio, self.sample_rate, language=language,
                                                             detect=self._detect, decode_p=self._decode_p)
            else:
                result = await self._engine.transcribe_async(audio, self.sample_rate, language=language)
        except Exception as e:
            # No traceback: loguru's would print local variables (the audio) into the log.
            logger.error("{}: transcription failed: {}: {}", self, type(e).__name__, e)
            yield ErrorFrame(error=f"Whisper transcription failed: {type(e).__name__}: {e}", exception=e)
            yield SegmentUnreadFrame()
            return
        finally:
            await self.stop_processing_metrics()

        # The turn's record: this segment times the turn's STT (bot/telemetry/turns.py).
        detected = result.detected is not None and result.accepted
        await self.push_frame(SpeechReadFrame(audio_secs=result.audio_secs, transcribe_ms=result.transcribe_ms,
                                              rtf=result.rtf, language_p=result.language_p if detected else None))
        if detected and result.detected is not None and result.language_p is not None:
            await self.push_frame(_language_heard(result, result.detected, result.language_p))
        if self._on_result is not None:
            try:
                self._on_result(result)
            except Exception as e:
                logger.error("{}: on_result callback failed: {}: {}", self, type(e).__name__, e)

        if not result.accepted:
            reason = result.rejected_reason or "empty"
            self.rejected_counts[reason] += 1
            logger.info(
                "{}: segment rejected ({}): {:.2f} s of audio, {:.0f} ms; rejected so far: {}", self, reason, result.audio_secs, result.transcribe_ms, dict(self.rejected_counts)
            )
            if reason in UNCLEAR_REASONS and result.audio_secs >= self._unclear_min_secs:
                yield UnclearSpeechFrame(reason=reason, audio_secs=result.audio_secs)
            yield SegmentUnreadFrame()
            return
        logger.debug(
            "{}: transcript in {:.0f} ms (rtf {:.2f}): [{}]", self, result.transcribe_ms, result.rtf, result.text
        )
        yield TranscriptionFrame(
            result.text, self._user_id, time_now_iso8601(), self._frame_language(result.language)
        )
