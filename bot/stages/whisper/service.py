"""The Pipecat STT stage: each VAD segment transcribed on the shared ``WhisperEngine``.

A ``TranscriptionFrame`` goes out only for an accepted, non-empty transcript; a segment the guards
rejected that is long enough to be speech goes out as ``UnclearSpeechFrame``. Transcripts are
personal data: they are logged at DEBUG only, never at INFO.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger
from pipecat.frames.frames import DataFrame, ErrorFrame, Frame, TranscriptionFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import STTSettings
from pipecat.services.stt_service import SegmentedSTTService, STTService
from pipecat.transcriptions.language import Language
from pipecat.utils.time import time_now_iso8601

from bot.stages.whisper.engine import TranscriptResult, WhisperEngine
from bot.telemetry.turn_facts import AsksToRepeat, SpeechReadFrame


class STTLanguage(Protocol):
    """The call's language as the STT sees it (``bot.call.language.CallLanguage``)."""

    def stt_language(self) -> str:
        """The language the next segment is decoded in."""
        ...

    def heard(self, result: TranscriptResult) -> None:
        """What Whisper heard in a segment (its detected language may move the call's)."""
        ...


@dataclass
class UnclearSpeechFrame(DataFrame, AsksToRepeat):
    """A segment long enough to be speech that the guards rejected (no_speech, low_confidence,
    repetitive, prompt_echo): the turn-stop strategy can ask the caller to say it again instead
    of waiting.
    """

    reason: str = ""
    audio_secs: float = 0.0


# Rejections that are probably speech we failed to read (not silence, not an over-long segment).
UNCLEAR_REASONS = ("no_speech", "low_confidence", "repetitive", "prompt_echo")


def _whisper_language(language: Language | str) -> str:
    """``Language.KO`` / "ko-KR" / "ko" -> "ko" (Whisper takes base codes only)."""
    return str(language.value if isinstance(language, Language) else language).split("-")[0].lower()


class WhisperSTTProcessor(SegmentedSTTService):
    """Segmented STT on a shared ``WhisperEngine``.

    Each VAD segment arrives as raw 16-bit PCM at ``self.sample_rate`` and is transcribed on
    the engine's worker threads, so this call's audio (and every other call's) keeps flowing.
    A ``TranscriptionFrame`` is pushed only for an accepted, non-empty transcript; rejected
    segments are logged at INFO with their reason (never their text) and counted in
    ``rejected_counts``. A failed transcription becomes a non-fatal ``ErrorFrame``.

    Args:
        engine: The process-wide engine (already loaded and warmed up).
        language: Language to force, e.g. "ko".
        call_language: The call's language: asked what to decode each segment in, told what was
            heard (auto detection); None: ``language`` for every segment.
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
        call_language: STTLanguage | None = None,
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
        # stt.language = "auto": the languages Whisper may pick; ``call_language`` gives the call's current one.
        self._detect = detect
        self._decode_p = decode_p
        self._call_language = call_language
        self.rejected_counts: Counter[str] = Counter()
        # VAD segments queued behind the one being transcribed (see push_frame).
        self._segments_waiting = 0

    async def push_frame(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        """Mark a transcript final only when no later speech is pending.

        Stock ``SegmentedSTTService`` marks every segment's transcript final. When the caller
        pauses mid-sentence, segment 1's transcript arrives after segment 2 has started; the
        speech-timeout strategy then takes it as "STT has nothing more to send" and ends the
        turn before segment 2 is transcribed, so the caller's last words leak into the next turn.
        """
        if isinstance(frame, TranscriptionFrame):
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
        """Whisper takes base language codes: ``Language.KO_KR`` -> "ko"."""
        return _whisper_language(language)

    def _frame_language(self, code: str) -> Language | None:
        try:
            return Language(code)
        except ValueError:
            return None

    async def _handle_user_stopped_speaking(self, frame):
        queued = self._segment_queue.qsize()
        await super()._handle_user_stopped_speaking(frame)
        self._segments_waiting += self._segment_queue.qsize() - queued

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        """Transcribe one VAD segment (raw PCM16 mono at ``self.sample_rate``)."""
        self._segments_waiting = max(0, self._segments_waiting - 1)
        if self._call_language is not None:
            language = self._call_language.stt_language()
        else:
            language = _whisper_language(self._settings.language or self._engine.cfg.language)
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
            return
        finally:
            await self.stop_processing_metrics()

        # The turn's record: this segment times the turn's STT (bot/telemetry/turns.py).
        detected = result.detected is not None and result.accepted
        await self.push_frame(SpeechReadFrame(audio_secs=result.audio_secs, transcribe_ms=result.transcribe_ms,
                                              rtf=result.rtf, language_p=result.language_p if detected else None))
        if self._call_language is not None:
            try:
                self._call_language.heard(result)
            except Exception as e:
                logger.error("{}: the call's language failed to follow: {}: {}", self, type(e).__name__, e)
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
            return
        logger.debug(
            "{}: transcript in {:.0f} ms (rtf {:.2f}): [{}]", self, result.transcribe_ms, result.rtf, result.text
        )
        yield TranscriptionFrame(
            result.text, self._user_id, time_now_iso8601(), self._frame_language(result.language)
        )
