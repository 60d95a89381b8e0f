"""The Pipecat TTS stage: each sentence the aggregator hands over, synthesized off the event loop.

Audio goes out in fixed-size frames so that a barge-in stops the bot within one frame.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import ErrorFrame, Frame, TTSAudioRawFrame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language

from bot import languages
from bot.stages.supertonic.canned import CannedAudio
from bot.stages.supertonic.engine import SupertonicEngine, SynthResult
from bot.stages.supertonic.errors import SynthesisCancelled
from bot.telemetry.turn_facts import SentenceReadyFrame

OnSentence = Callable[[SynthResult], "None | Awaitable[None]"]


class SupertonicTTSService(TTSService):
    """Pipecat TTS service speaking through a shared ``SupertonicEngine``.

    Pipecat's sentence aggregator calls ``run_tts`` once per sentence; synthesis runs in a worker
    thread and the audio is pushed in ``frame_ms`` frames at the pipeline's output rate.
    """

    def __init__(
        self,
        *,
        engine: SupertonicEngine,
        voice: str,
        frame_ms: int = 20,
        on_sentence: OnSentence | None = None,
        canned: CannedAudio | None = None,
        language: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Create the service.

        Args:
            engine: The process-wide engine (loaded once, shared by every call).
            voice: Voice style name (``F1`` ... ``M5``).
            frame_ms: Length of each pushed audio frame; a barge-in cuts within one frame.
            on_sentence: Called with each sentence's ``SynthResult`` (sync or async), e.g. for
                latency records. Errors in it are logged, never raised.
            canned: Pre-synthesized sentences, played from memory instead of synthesized.
            language: The call's language (a code of ``line.languages``): each sentence is spoken with
                its TTS tag, until a ``TTSUpdateSettingsFrame`` says another. None: a line of one
                language, synthesized without a tag.
            **kwargs: Passed to ``TTSService`` (e.g. ``sample_rate``).
        """
        if voice not in engine.voices:
            raise ValueError(f"TTS voice {voice!r} not available (have: {sorted(engine.voices)})")
        if frame_ms <= 0:
            raise ValueError(f"frame_ms must be positive, got {frame_ms}")
        super().__init__(
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(model="supertonic-3", voice=voice, language=language or languages.FIRST),
            **kwargs,
        )
        self._engine = engine
        self._frame_ms = frame_ms
        self._on_sentence = on_sentence
        self._canned = canned
        self._tagged = language is not None

    def can_generate_metrics(self) -> bool:
        """TTFB, processing and usage metrics are supported."""
        return True

    def language_to_service_language(self, language: Language) -> str | None:
        """The settings hold the call's language as ``line.languages`` writes it ("en")."""
        return str(language.value).split("-")[0].lower()

    def language_tag(self) -> str:
        """The call's language tag now (canned audio is looked up by it)."""
        code = str(self._settings.language)
        return languages.get(code).tag or code

    def _tag(self) -> str | None:
        return self.language_tag() if self._tagged else None

    async def _notify(self, result: SynthResult) -> None:
        if self._on_sentence is None:
            return
        try:
            maybe = self._on_sentence(result)
            if inspect.isawaitable(maybe):
                await maybe
        except Exception as e:  # a broken hook must not silence the bot
            logger.exception("{}: on_sentence callback failed: {}", self, e)

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame, None]:
        """Synthesize one sentence and yield it as ``frame_ms`` audio frames.

        Args:
            text: The sentence.
            context_id: The audio context (turn) it belongs to.
        """
        voice = str(self._settings.voice)
        cancel = threading.Event()
        await self.start_tts_usage_metrics(text)
        own, text = languages.untag(text)  # a sentence in its own language (the 1345 notice's English)
        tag = own or self._tag()
        result = self._canned.get(text, self.sample_rate, voice, own or self.language_tag()) if self._canned else None
        if result is None:
            try:
                # Blocking ONNX work goes to a thread: the event loop keeps serving audio and frames.
                # Only a multilingual line passes a language: a Korean-only call is synthesized as before.
                if tag:
                    result = await asyncio.to_thread(
                        self._engine.synthesize, text, self.sample_rate, voice=voice, cancel=cancel, language=tag
                    )
                else:
                    result = await asyncio.to_thread(
                        self._engine.synthesize, text, self.sample_rate, voice=voice, cancel=cancel
                    )
            except asyncio.CancelledError:
                cancel.set()  # interrupted: let the worker thread stop at its next session run
                raise
            except SynthesisCancelled:
                return
            except Exception as e:
                logger.exception("{}: synthesis failed", self)
                await self.stop_ttfb_metrics()
                yield ErrorFrame(error=f"{self}: synthesis failed: {e}")
                return
        await self.stop_ttfb_metrics()

        rtf = f"{result.rtf:.3f}" if result.duration_s > 0 else "n/a"
        logger.debug(
            "{}: synthesized {:.2f} s of audio in {:.0f} ms (RTF {}, {} tokens, voice {})", self, result.duration_s, result.synth_ms, rtf, result.text_tokens, result.voice
        )
        await self._notify(result)
        # The turn's record: which sentence, and how long it took (bot/telemetry/turns.py).
        await self.push_frame(SentenceReadyFrame(synth_ms=result.synth_ms, text=result.normalized_text))

        pcm = result.pcm
        if not pcm:
            # Nothing speakable (e.g. only punctuation). One frame of silence keeps pipecat from
            # counting the turn as a provider that went quiet.
            pcm = b"\x00\x00" * max(1, self.sample_rate * self._frame_ms // 1000)
        step = max(1, self.sample_rate * self._frame_ms // 1000) * 2
        for i in range(0, len(pcm), step):
            yield TTSAudioRawFrame(
                audio=pcm[i : i + step], sample_rate=self.sample_rate, num_channels=1, context_id=context_id
            )
