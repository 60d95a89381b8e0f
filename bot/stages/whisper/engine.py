"""faster-whisper for Korean phone audio: one guarded engine per process, no Pipecat.

``WhisperEngine``: one faster-whisper model per process, shared by every call. Its ``transcribe`` is
blocking and guarded (forced language, a single temperature, no-speech, repetition, confidence,
prompt-echo and length guards); ``transcribe_async`` runs it on the engine's own worker threads so
the event loop (and every other call's audio) keeps flowing. ``transcribe_file``: any WAV file
(``bot/core/wav.py``: PCM, float, 8 kHz mu-law or A-law, mono or stereo) through the same engine,
for ``run_bot.py transcribe``.

Transcripts are personal data: they are logged at DEBUG only, never at INFO.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import soxr
from loguru import logger

from bot import languages
from bot.config import STTConfig
from bot.core.wav import read_wav
from bot.stages.whisper.echo import is_prompt_echo

WHISPER_SAMPLE_RATE = 16000

RejectReason = Literal["no_speech", "repetitive", "low_confidence", "prompt_echo", "too_long", "empty"]

# Decoding budget: Korean is about 1.1 Whisper tokens per syllable and fast speech about 8
# syllables a second, so 25 tokens a second (plus a small floor) never cuts real speech short,
# while a hallucination loop on a 1.5 s noise burst stops after ~50 tokens instead of ~220
# (measured: 0.65 s instead of 2.3 s on 2 CPU cores; the loop is still caught as repetitive).
_TOKENS_PER_SEC = 25
_MIN_NEW_TOKENS = 16

# The encoder window (``WhisperEngine.window_frames``) is the speech plus this much, at least
# ``stt.window_s``: cut to the speech alone, Whisper base looped on short clips.
WINDOW_MARGIN_S = 1.0


@dataclass(frozen=True)
class TranscriptResult:
    """The outcome of transcribing one segment.

    Attributes:
        text: The accepted transcript, stripped; "" when rejected.
        audio_secs: Length of the audio given, in seconds.
        transcribe_ms: Wall time of ``transcribe`` (resampling, features, decoding), in ms.
        rtf: Real-time factor, ``transcribe_ms / 1000 / audio_secs`` (0 for empty audio).
        rejected_reason: None when accepted; else why nothing was produced: ``no_speech``
            (Whisper's no-speech rule), ``repetitive`` (compression ratio above the threshold: a
            decoding loop), ``low_confidence`` (average log-probability below the engine's
            ``min_avg_logprob``), ``prompt_echo`` (the transcript is the hotwords / initial
            prompt copied back: ``is_prompt_echo``), ``too_long`` (longer than
            ``max_segment_secs``: not transcribed), ``empty`` (no audio, or the model produced
            no text).
        language: The language the model was forced to (a Whisper code such as "en").
        avg_logprob: Average token log-probability of the first decoded segment (diagnostics).
        no_speech_prob: No-speech probability of the first decoded segment (diagnostics).
        queue_ms: Time ``transcribe_async`` waited for a free worker before ``transcribe``
            started (other calls' segments ahead of it), in ms; 0 for a direct call.
    """

    text: str
    audio_secs: float
    transcribe_ms: float
    rtf: float
    rejected_reason: RejectReason | None
    language: str
    avg_logprob: float | None = None
    no_speech_prob: float | None = None
    queue_ms: float = 0.0
    # Auto language (``detect`` given): the most probable allowed language and its probability,
    # from the same encoder pass as the transcript (None when the language was forced).
    detected: str | None = None
    language_p: float | None = None
    # ... and the most probable language over all of Whisper's (a caller the line does not serve).
    heard: str | None = None
    heard_p: float | None = None

    @property
    def accepted(self) -> bool:
        """Whether the result carries a transcript."""
        return self.rejected_reason is None and bool(self.text)


def pcm16_to_float32(pcm16: bytes, sample_rate: int) -> np.ndarray:
    """Convert mono 16-bit PCM to float32 in [-1, 1] at 16 kHz (soxr, HQ), as Whisper wants."""
    n = len(pcm16) // 2  # a stray odd byte is dropped
    audio = np.frombuffer(pcm16[: n * 2], dtype="<i2").astype(np.float32) / 32768.0
    if sample_rate != WHISPER_SAMPLE_RATE and audio.size:
        audio = soxr.resample(audio, sample_rate, WHISPER_SAMPLE_RATE, quality="HQ")
    return np.ascontiguousarray(audio, dtype=np.float32)


class WhisperEngine:
    """A faster-whisper model shared by all calls in the process.

    Construction loads the model and is **blocking** (about 1 s for Whisper base on 2 CPU
    cores): do it once at startup, then call ``warmup()``, also blocking, before the first call.

    Concurrency: CTranslate2 models are thread-safe, and ``transcribe`` keeps no state between
    calls. ``transcribe_async`` runs it on a dedicated pool of ``num_workers`` threads, which is
    also the number of CTranslate2 replicas (``WhisperModel(num_workers=...)``), so transcriptions
    never occupy asyncio's default executor that TTS and file I/O also use. Default: 1 worker on
    CPU (parallel decodes would split the same cores, so both calls finish later than one after
    the other), 2 on CUDA (one call's decoding overlaps another's feature extraction and the GPU
    has room). More calls queue in FIFO order.

    Args:
        cfg: The ``[stt]`` config section.
        model_path: Model directory or name (``bot.modelfiles.manifest.resolve_whisper_model``).
        num_workers: CTranslate2 replicas and transcription threads; None picks by device.
        min_avg_logprob: Reject a segment whose average token log-probability is below this
            (``low_confidence``); None disables the guard. Hotwords lower Whisper's no-speech
            probability, so noise can slip past the no-speech rule as a short garbage word
            ("아", avg log-prob about -3); real speech, even badly recognised 8 kHz Korean,
            stayed above -2.0 with Whisper base.
        reject_prompt_echo: Reject a transcript that is the hotword list / initial prompt
            copied back (``prompt_echo``, see ``is_prompt_echo``). Off only to measure what the
            guard changes (``scripts/hotword_wer.py``).
    """

    def __init__(
        self,
        cfg: STTConfig,
        model_path: str,
        *,
        num_workers: int | None = None,
        min_avg_logprob: float | None = None,
        reject_prompt_echo: bool = True,
    ):
        from faster_whisper import WhisperModel

        self.cfg = cfg
        self.model_path = model_path
        self.min_avg_logprob = min_avg_logprob
        self.reject_prompt_echo = reject_prompt_echo
        device = cfg.device
        if device == "auto":
            import ctranslate2

            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        self.device = device
        self.num_workers = num_workers or (2 if device == "cuda" else 1)
        # 0 lets CTranslate2 pick (4 threads), which oversubscribes a 2-core box.
        self.cpu_threads = cfg.cpu_threads or min(4, len(os.sched_getaffinity(0)))
        t0 = time.perf_counter()
        self.model = WhisperModel(
            model_path,
            device=device,
            compute_type=cfg.compute_type,
            cpu_threads=self.cpu_threads,
            num_workers=self.num_workers,
            local_files_only=True,
        )
        self.load_ms = (time.perf_counter() - t0) * 1000
        self.warmup_ms: float | None = None
        # The encoder's window floor in seconds (``window_frames``); 30 = faster-whisper's own 30 s.
        self.window_s = cfg.window_s
        self._max_new_tokens_cap = self._decoding_budget()
        self._executor = ThreadPoolExecutor(max_workers=self.num_workers, thread_name_prefix="whisper")
        logger.info(
            "Whisper loaded from {} in {:.0f} ms (device={}, compute_type={}, cpu_threads={}, num_workers={}, language={})", model_path, self.load_ms, device, cfg.compute_type, self.cpu_threads, self.num_workers, cfg.language
        )

    def _decoding_budget(self) -> int | None:
        """Largest ``max_new_tokens`` that fits beside the prompt in Whisper's 448-token window."""
        tok = self.model.hf_tokenizer
        half = self.model.max_length // 2 - 1
        prompt = 5  # sot_prev, sot, language, task, no_timestamps
        for text in (self.cfg.hotwords, self.cfg.initial_prompt):
            if text.strip():
                prompt += min(len(tok.encode(" " + text.strip()).ids), half)
        room = self.model.max_length - prompt - 1
        return room if room >= _MIN_NEW_TOKENS else None

    def warmup(self) -> float:
        """Transcribe 1 s of silence so the first call doesn't pay for lazy initialisation.

        Blocking. Returns the time it took in ms (also kept as ``warmup_ms``).
        """
        result = self.transcribe(bytes(2 * WHISPER_SAMPLE_RATE), WHISPER_SAMPLE_RATE)
        self.warmup_ms = result.transcribe_ms
        logger.info("Whisper warm-up: {:.0f} ms", self.warmup_ms)
        return self.warmup_ms

    def transcribe(
        self, pcm16: bytes, sample_rate: int, *, language: str | None = None,
        detect: tuple[str, ...] | None = None, decode_p: float = 0.5,
    ) -> TranscriptResult:
        """Transcribe one segment of mono 16-bit PCM. Blocking: call it from a worker thread.

        The segment generator faster-whisper returns is lazy (decoding happens as it is
        iterated), so it is exhausted here, in the calling thread.

        Args:
            pcm16: Mono 16-bit little-endian PCM.
            sample_rate: Its rate; anything but 16 kHz is resampled.
            language: Whisper language code; ``cfg.language`` when None.
            detect: Allowed languages (``stt.language = "auto"``): Whisper's language probabilities
                are read from the encoder output the transcript is decoded from (one encoder pass),
                and the segment is decoded in the most probable allowed language when its
                probability is at least ``decode_p``, else in ``language``. Not detected when None.
        """
        t0 = time.perf_counter()
        cfg = self.cfg
        # "auto" decodes in the line's first language until a switch; the config makes that Korean.
        lang: str = language or (cfg.language if cfg.language != "auto" else languages.FIRST)
        detected: str | None = None
        language_p: float | None = None
        heard: tuple[str, float] | None = None
        audio_secs = (len(pcm16) // 2) / sample_rate if sample_rate > 0 else 0.0

        def done(reason: RejectReason | None, text: str = "", seg: Any = None) -> TranscriptResult:
            ms = (time.perf_counter() - t0) * 1000
            return TranscriptResult(
                text=text,
                audio_secs=audio_secs,
                transcribe_ms=ms,
                rtf=(ms / 1000 / audio_secs) if audio_secs > 0 else 0.0,
                rejected_reason=reason,
                language=lang,
                avg_logprob=seg.avg_logprob if seg is not None else None,
                no_speech_prob=seg.no_speech_prob if seg is not None else None,
                detected=detected,
                language_p=language_p,
                heard=heard[0] if heard else None,
                heard_p=heard[1] if heard else None,
            )

        if audio_secs <= 0:
            return done("empty")
        if audio_secs > cfg.max_segment_secs:
            return done("too_long")

        audio = pcm16_to_float32(pcm16, sample_rate)
        segments, _info = self._lazy_segments(audio, lang, audio_secs)
        if detect or self.window_frames(len(audio)) < self.model.feature_extractor.nb_max_frames:
            # Nothing is decoded yet (the generator is lazy): decode from our own encoder pass instead,
            # over the window sized to the speech (``stt.window_s``), with the language read from it.
            detected, language_p, segments, heard = self._encode_and_decode(audio, detect, lang, decode_p,
                                                                            _info.transcription_options)
            if detect:
                lang = detected if language_p >= decode_p else lang
            else:
                detected = language_p = None
        segments = list(segments)  # decode here, in this thread
        reason, text = self._verdict(segments)
        return done(reason, text, segments[0] if segments else None)

    def _lazy_segments(self, audio: np.ndarray, lang: str, audio_secs: float) -> tuple[Any, Any]:
        """faster-whisper's segment generator and info with this engine's options: nothing is decoded yet."""
        cfg = self.cfg
        max_new_tokens = _MIN_NEW_TOKENS + math.ceil(_TOKENS_PER_SEC * audio_secs)
        if self._max_new_tokens_cap is not None:
            max_new_tokens = min(max_new_tokens, self._max_new_tokens_cap)
        return self.model.transcribe(
            audio,
            language=lang,
            beam_size=cfg.beam_size,
            # One temperature: no fallback ladder, whose retries took 15-35 s on hallucinating clips.
            temperature=cfg.temperature,
            hotwords=cfg.hotwords.strip() or None,
            initial_prompt=cfg.initial_prompt.strip() or None,
            # The no-speech rule is applied in ``_verdict`` instead, so a skipped segment has a reason
            # (faster-whisper would drop it silently). With a single temperature this is the
            # same decision: its fallback logic has nothing to fall back to.
            no_speech_threshold=None,
            log_prob_threshold=cfg.log_prob_threshold,
            compression_ratio_threshold=cfg.compression_ratio_threshold,
            condition_on_previous_text=False,
            vad_filter=False,
            without_timestamps=True,
            max_new_tokens=max_new_tokens,
        )

    def _verdict(self, segments: list[Any]) -> tuple[RejectReason | None, str]:
        """(None, the transcript) of the segments kept, or (why none, "")."""
        cfg = self.cfg
        kept: list[str] = []
        dropped: list[RejectReason] = []
        for seg in segments:
            reason = self._segment_reject_reason(seg)
            if reason is None:
                kept.append(seg.text)
            else:
                dropped.append(reason)
        text = "".join(kept).strip()
        if text and self.reject_prompt_echo and is_prompt_echo(text, cfg.hotwords, cfg.initial_prompt):
            # The reason is logged at INFO by WhisperSTTProcessor, like the other rejections; the
            # text (personal data if the echo carries real words too) at DEBUG only.
            logger.debug("Whisper: transcript rejected as a prompt echo: [{}]", text)
            return "prompt_echo", ""
        if text:
            return None, text
        return (dropped[0] if dropped else "empty"), ""

    def window_frames(self, samples: int) -> int:
        """Mel frames the encoder sees for ``samples`` of 16 kHz audio (``stt.window_s``).

        The speech plus ``WINDOW_MARGIN_S``, never less than ``stt.window_s`` and never more than
        Whisper's 30 s (3000 frames, what faster-whisper always encodes); even, for the encoder's
        stride-2 convolution. CTranslate2 encodes a shorter input in proportionally less time and
        the decoder then attends over fewer positions.
        """
        fe = self.model.feature_extractor
        per_sec = fe.sampling_rate // fe.hop_length
        frames = max(round(self.window_s * per_sec), samples // fe.hop_length + round(WINDOW_MARGIN_S * per_sec))
        return min(fe.nb_max_frames, frames + frames % 2)

    def _encode_and_decode(self, audio: np.ndarray, allowed: tuple[str, ...] | None, fallback: str,
                           decode_p: float, options: Any) -> tuple[str, float, Any, tuple[str, float] | None]:
        """One encoder pass over the window sized to the speech; language probabilities from it
        (``allowed``: auto detection) and the segments decoded from it.

        faster-whisper's own ``language=None`` encodes twice (detection, then decoding) and decodes
        in whatever language won, Thai included; here the winner is restricted to ``allowed``. Its
        decoding always encodes 30 s (the segment padded to 3000 frames): here the padding stops at
        ``window_frames``. Returns (best allowed language, its probability, segments, the most
        probable language of all with its probability); without ``allowed``, (``fallback``, 1.0,
        segments, None).
        """
        from faster_whisper.audio import pad_or_trim
        from faster_whisper.tokenizer import Tokenizer

        model = self.model
        features = model.feature_extractor(audio)
        frames = self.window_frames(len(audio))
        encoder_output = model.encode(pad_or_trim(features[..., :frames], frames))
        best, p, heard = fallback, 1.0, None
        if allowed:
            probs = {tok[2:-2]: p for tok, p in model.model.detect_language(encoder_output)[0]}
            best = max(allowed, key=lambda lang: probs.get(lang, 0.0))
            p = float(probs.get(best, 0.0))
            top = max(probs, key=probs.__getitem__)
            heard = (top, float(probs[top]))
        lang = best if p >= decode_p else fallback
        tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=lang)
        return best, p, model.generate_segments(features, tokenizer, options, False, encoder_output), heard

    def _segment_reject_reason(self, seg: Any) -> RejectReason | None:
        cfg = self.cfg
        # Whisper's rule: likely silence, unless the decoder was confident anyway.
        if (
            cfg.no_speech_threshold is not None
            and seg.no_speech_prob > cfg.no_speech_threshold
            and seg.avg_logprob < cfg.log_prob_threshold
        ):
            return "no_speech"
        if seg.compression_ratio > cfg.compression_ratio_threshold:
            return "repetitive"
        if self.min_avg_logprob is not None and seg.avg_logprob < self.min_avg_logprob:
            return "low_confidence"
        return None

    async def transcribe_async(
        self, pcm16: bytes, sample_rate: int, *, language: str | None = None,
        detect: tuple[str, ...] | None = None, decode_p: float = 0.5,
    ) -> TranscriptResult:
        """``transcribe`` on the engine's worker threads; the event loop stays free."""
        loop = asyncio.get_running_loop()
        submitted = time.perf_counter()

        def run() -> TranscriptResult:
            queue_ms = (time.perf_counter() - submitted) * 1000
            result = self.transcribe(pcm16, sample_rate, language=language, detect=detect, decode_p=decode_p)
            return dataclasses.replace(result, queue_ms=queue_ms)

        return await loop.run_in_executor(self._executor, run)

    def close(self) -> None:
        """Stop the worker threads (waits for running transcriptions)."""
        self._executor.shutdown(wait=True)


async def transcribe_file(
    engine: WhisperEngine, path: str | Path, *, language: str | None = None
) -> dict[str, Any]:
    """Transcribe a WAV file with the engine (for ``run_bot.py transcribe FILE.wav``).

    The whole file is one segment, so the engine's guards apply: a file longer than
    ``stt.max_segment_secs`` comes back rejected as ``too_long``.

    Args:
        engine: A loaded engine.
        path: Any WAV file ``read_wav`` decodes.
        language: Whisper language code; the engine's ``stt.language`` when None.

    Returns:
        ``{"text", "audio_secs", "transcribe_ms", "rtf", "rejected_reason"}``.
    """
    pcm, rate = await asyncio.to_thread(read_wav, path)
    result = await engine.transcribe_async(pcm, rate, language=language)
    d = asdict(result)
    return {k: d[k] for k in ("text", "audio_secs", "transcribe_ms", "rtf", "rejected_reason")}
