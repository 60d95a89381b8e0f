"""Supertonic 3 on ONNX Runtime: the four sessions and the synthesis loop, no Pipecat.

``SupertonicEngine`` loads the four ONNX sessions of a Supertonic model directory once per process,
with the execution providers the config asks for (TensorRT, CUDA, CPU), checks that every session
really got the provider the config requires, and synthesizes one sentence at a time
(``synthesize`` is blocking and thread-safe). The Pipecat stage around it is
``bot.stages.supertonic.service``; the model files are ``bot.stages.supertonic.files``.

See ``/work/shared/notes/supertonic.md`` for the model's interface and the synthesis loop.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import soxr
from loguru import logger

from bot import languages
from bot.config import TTSConfig
from bot.stages.supertonic.errors import SynthesisCancelled, TTSModelError, TTSProviderError
from bot.stages.supertonic.files import (
    INDEXER_JSON,
    SESSION_NAMES,
    STYLES_DIR,
    TTS_JSON,
    check_model_dir,
    read_tts_json,
    resolve,
    session_file,
    style_files,
)

PROVIDER_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}


# Style tensor shapes (batch first); the voice style JSON files carry the same dims.
_STYLE_TTL = (50, 256)
_STYLE_DP = (8, 16)
_TEXT_EMB_DIM = 256

# The SDK's chunker cuts Korean at 120 characters: the model has a soft cap of ~13 s per call.
_MAX_CHUNK_CHARS = 120
# Silence put between the chunks of one over-long sentence.
_CHUNK_GAP_S = 0.15
# Text without final punctuation gets a period (what the SDK does): the model was trained that way.
_FINAL_PUNCT = re.compile(r"[.!?;:,'\"')\]}…。」』】〉》›»？！]$")
_WARMUP_TEXT = (
    "안녕하세요 시청 민원 안내 전화입니다 무엇을 도와드릴까요 주민등록등본은 가까운 주민센터나 "
    "정부 누리집에서 발급받으실 수 있습니다 대형 폐기물은 구청에 신고하신 뒤 배출해 주세요 "
)


@dataclass(frozen=True)
class SynthResult:
    """One synthesized sentence.

    Attributes:
        pcm: 16-bit signed little-endian mono PCM at ``sample_rate``.
        sample_rate: Rate of ``pcm`` in Hz.
        duration_s: Length of ``pcm`` in seconds.
        synth_ms: Wall time of the whole call (text preparation, sessions, resampling).
        normalized_text: The text that was spoken, after normalization and cleanup (not NFKD).
        text_tokens: Number of text ids fed to the model (all chunks, tags included).
        voice: Voice style used.
        removed_chars: Characters dropped because the model cannot speak them.
        session_ms: Wall time per ONNX session, summed over the call.
        model_duration_s: Duration the model predicted (after ``speed``), pauses between chunks
            included; the audio was trimmed to exactly this at the model's rate.
    """

    pcm: bytes
    sample_rate: int
    duration_s: float
    synth_ms: float
    normalized_text: str
    text_tokens: int
    voice: str = ""
    removed_chars: list[str] = field(default_factory=list)
    session_ms: dict[str, float] = field(default_factory=dict)
    model_duration_s: float = 0.0

    @property
    def rtf(self) -> float:
        """Real-time factor: synthesis time over audio time (lower is faster; inf for no audio)."""
        return self.synth_ms / 1000.0 / self.duration_s if self.duration_s > 0 else math.inf


@dataclass(frozen=True)
class _Style:
    ttl: np.ndarray  # [1, 50, 256] float32
    dp: np.ndarray  # [1, 8, 16] float32


def _load_style(path: Path) -> _Style:
    raw = json.loads(path.read_text(encoding="utf-8"))
    try:
        ttl = np.asarray(raw["style_ttl"]["data"], dtype=np.float32).reshape(1, *_STYLE_TTL)
        dp = np.asarray(raw["style_dp"]["data"], dtype=np.float32).reshape(1, *_STYLE_DP)
    except (KeyError, TypeError, ValueError) as e:
        raise TTSModelError(
            f"{path}: not a Supertonic voice style (expected style_ttl {list(_STYLE_TTL)} and "
            f"style_dp {list(_STYLE_DP)}): {e}"
        ) from e
    return _Style(ttl=ttl, dp=dp)


def _split_long(text: str, max_chars: int) -> list[str]:
    """Cut text longer than ``max_chars`` at sentence ends, then commas, then spaces."""
    if len(text) <= max_chars:
        return [text]
    for pattern in (r"(?<=[.!?。！？…])\s+", r"(?<=[,;:，、])\s*", r"\s+"):
        parts = [p for p in re.split(pattern, text) if p.strip()]
        if len(parts) > 1:
            break
    else:  # one long word: cut it anywhere
        return [text[i : i + max_chars] for i in range(0, len(text), max_chars)]
    chunks: list[str] = []
    current = ""
    for part in parts:
        candidate = f"{current} {part}".strip() if current else part
        if len(candidate) <= max_chars:
            current = candidate
            continue
        if current:
            chunks.append(current)
        current = part
    if current:
        chunks.append(current)
    # A part may still be too long on its own: cut it at the next finer boundary.
    out: list[str] = []
    for chunk in chunks:
        out.extend(_split_long(chunk, max_chars) if len(chunk) > max_chars else [chunk])
    return out


class SupertonicEngine:
    """The four Supertonic ONNX sessions, loaded once per process and shared by all calls.

    Nothing mutable is kept per call, so ``synthesize`` can run from several threads at once
    (ONNX Runtime sessions are safe to ``run`` concurrently).

    Attributes:
        model_dir: The resolved model directory.
        sample_rate: The model's native output rate (44100).
        voices: Voice style names found in ``voice_styles/``.
        is_standin: True for a stand-in model from ``bot.modelfiles.standin`` (noise, not speech).
        fallback_active: True when a session runs on a provider other than the required one and
            ``tts.allow_fallback`` let it through.
    """

    def __init__(self, config: TTSConfig, *, base_dir: Path | None = None):
        """Load the model directory and create the sessions.

        Args:
            config: The ``[tts]`` section.
            base_dir: Directory relative paths in the config resolve against (``Config.base_dir``);
                the current directory when None.

        Raises:
            TTSModelMissingError: A model file is missing.
            TTSModelError: The files are not a model this code can run.
            TTSProviderError: A session did not get ``tts.require_provider`` (and
                ``tts.allow_fallback`` is false), or the provider config is invalid.
            ValueError: Another invalid config value (named).
        """
        self.config = config
        self.model_dir = resolve(config.model_dir, base_dir)
        self._base_dir = base_dir
        if not 0.7 <= config.speed <= 2.0:
            raise ValueError(f"tts.speed = {config.speed} is outside the model's range 0.7-2.0")
        if config.total_steps < 1:
            raise ValueError(f"tts.total_steps = {config.total_steps} must be at least 1")
        check_model_dir(self.model_dir, config.voice)

        tts_cfg = read_tts_json(self.model_dir)
        try:
            self.sample_rate = int(tts_cfg["ae"]["sample_rate"])
            base_chunk = int(tts_cfg["ae"]["base_chunk_size"])
            compress = int(tts_cfg["ttl"]["chunk_compress_factor"])
            latent_dim = int(tts_cfg["ttl"]["latent_dim"])
        except (KeyError, TypeError, ValueError) as e:
            raise TTSModelError(f"{self.model_dir / TTS_JSON}: missing or invalid key {e}") from e
        # One latent frame covers base_chunk * compress samples (3072, ~70 ms at 44.1 kHz).
        self._frame_samples = base_chunk * compress
        self._latent_channels = latent_dim * compress
        self.is_standin = bool(tts_cfg.get("standin", False))
        if self.is_standin:
            bar = "!" * 78
            logger.warning(
                "\n{}\n!! TTS: {} is a STAND-IN Supertonic model (random weights).\n!! The bot will play noise, not speech. For the real voice run `python run_bot.py models`.\n{}", bar, self.model_dir, bar
            )

        indexer = json.loads((self.model_dir / INDEXER_JSON).read_text(encoding="utf-8"))
        self._indexer = np.asarray(indexer, dtype=np.int64)

        self.voices: dict[str, _Style] = {p.stem: _load_style(p) for p in style_files(self.model_dir)}

        self._max_chunk_chars = max(10, min(_MAX_CHUNK_CHARS, (config.trt_max_text_length - 16) // 3))
        self.fallback_active = False
        self._sessions = self._create_sessions()
        self._check_interface()
        self._check_required_provider()
        self._uses_trt = any(p[0] == PROVIDER_NAMES["tensorrt"] for p in self.session_providers.values())

    # -- sessions ----------------------------------------------------------------------------

    def _profile_shapes(self, session: str, text_len: int, latent_len: int) -> str:
        """TensorRT optimization-profile string for one session (batch 1)."""
        c = self._latent_channels
        profiles: dict[str, dict[str, tuple[int, ...]]] = {
            "duration_predictor": {
                "text_ids": (1, text_len),
                "style_dp": (1, *_STYLE_DP),
                "text_mask": (1, 1, text_len),
            },
            "text_encoder": {
                "text_ids": (1, text_len),
                "style_ttl": (1, *_STYLE_TTL),
                "text_mask": (1, 1, text_len),
            },
            "vector_estimator": {
                "noisy_latent": (1, c, latent_len),
                "text_emb": (1, _TEXT_EMB_DIM, text_len),
                "style_ttl": (1, *_STYLE_TTL),
                "latent_mask": (1, 1, latent_len),
                "text_mask": (1, 1, text_len),
                "current_step": (1,),
                "total_step": (1,),
            },
            "vocoder": {"latent": (1, c, latent_len)},
        }
        shapes = profiles[session]
        return ",".join(f"{name}:{'x'.join(str(d) for d in dims)}" for name, dims in shapes.items())

    def _provider_chain(self, session: str) -> list[str | tuple[str, dict[str, Any]]]:
        cfg = self.config
        available = ort.get_available_providers()
        unknown = [p for p in cfg.providers if p not in PROVIDER_NAMES]
        if unknown:
            raise TTSProviderError(
                f"tts.providers: unknown provider(s) {unknown}; use {list(PROVIDER_NAMES)}"
            )
        chain: list[str | tuple[str, dict[str, Any]]] = []
        for key in cfg.providers:
            name = PROVIDER_NAMES[key]
            if name not in available:
                continue  # reported once in _create_sessions
            if key == "tensorrt":
                # Separate cache per profile bounds and precision, so a changed bound never loads a
                # stale engine built for other shapes.
                precision = "fp16" if cfg.trt_fp16 else "fp32"
                tag = f"t{cfg.trt_max_text_length}-l{cfg.trt_max_latent_length}-{precision}"
                engine_dir = resolve(cfg.trt_engine_cache_dir, self._base_dir) / tag
                timing_dir = resolve(cfg.trt_timing_cache_dir, self._base_dir)
                engine_dir.mkdir(parents=True, exist_ok=True)
                timing_dir.mkdir(parents=True, exist_ok=True)
                opt_t = min(cfg.trt_max_text_length, 128)
                opt_l = min(cfg.trt_max_latent_length, 64)
                chain.append((name, {
                    "device_id": cfg.cuda_device_id,
                    "trt_fp16_enable": cfg.trt_fp16,
                    "trt_engine_cache_enable": True,
                    "trt_engine_cache_path": str(engine_dir),
                    "trt_timing_cache_enable": True,
                    "trt_timing_cache_path": str(timing_dir),
                    "trt_max_workspace_size": int(cfg.trt_max_workspace_gb * (1 << 30)),
                    # Explicit profiles: without them TRT rebuilds the engine mid-call whenever a
                    # sentence is longer than any seen before (minutes).
                    "trt_profile_min_shapes": self._profile_shapes(session, 1, 1),
                    "trt_profile_opt_shapes": self._profile_shapes(session, opt_t, opt_l),
                    "trt_profile_max_shapes": self._profile_shapes(
                        session, cfg.trt_max_text_length, cfg.trt_max_latent_length
                    ),
                }))  # fmt: skip
            elif key == "cuda":
                chain.append((name, {"device_id": cfg.cuda_device_id, "cudnn_conv_algo_search": "HEURISTIC"}))
            else:
                chain.append(name)
        return chain

    def _create_sessions(self) -> dict[str, ort.InferenceSession]:
        cfg = self.config
        available = ort.get_available_providers()
        wanted = [PROVIDER_NAMES[p] for p in cfg.providers if p in PROVIDER_NAMES]
        missing = [name for name in wanted if name not in available]
        if missing:
            logger.warning(
                "TTS: execution provider(s) {} from tts.providers are not available in this onnxruntime build (available: {}); they are skipped. A GPU needs the onnxruntime-gpu wheel (requirements-gpu.txt), never together with onnxruntime.", missing, available
            )
        sessions: dict[str, ort.InferenceSession] = {}
        for name in SESSION_NAMES:
            chain = self._provider_chain(name)
            if not chain:
                logger.warning(
                    "TTS: none of tts.providers {} is available; using CPUExecutionProvider", cfg.providers
                )
                chain = [PROVIDER_NAMES["cpu"]]
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if cfg.intra_op_threads > 0:
                opts.intra_op_num_threads = cfg.intra_op_threads
            path = session_file(self.model_dir, name)
            t0 = time.perf_counter()
            try:
                session = ort.InferenceSession(str(path), sess_options=opts, providers=chain)
            except Exception as e:  # onnxruntime raises its own exception types
                raise TTSModelError(f"TTS: cannot load {path}: {e}") from e
            sessions[name] = session
            logger.info(
                "TTS session {}: providers {} (loaded in {:.1f} s)", name, session.get_providers(), time.perf_counter() - t0
            )
        return sessions

    @property
    def session_providers(self) -> dict[str, list[str]]:
        """The providers each session really got, active one first."""
        return {name: list(s.get_providers()) for name, s in self._sessions.items()}

    def _check_interface(self) -> None:
        expected = {
            "duration_predictor": (["text_ids", "style_dp", "text_mask"], ["duration"]),
            "text_encoder": (["text_ids", "style_ttl", "text_mask"], ["text_emb"]),
            "vector_estimator": (
                [
                    "noisy_latent",
                    "text_emb",
                    "style_ttl",
                    "latent_mask",
                    "text_mask",
                    "current_step",
                    "total_step",
                ],
                ["denoised_latent"],
            ),
            "vocoder": (["latent"], ["wav_tts"]),
        }
        for name, (inputs, outputs) in expected.items():
            s = self._sessions[name]
            got_in = sorted(i.name for i in s.get_inputs())
            got_out = [o.name for o in s.get_outputs()]
            if got_in != sorted(inputs) or got_out[:1] != outputs:
                raise TTSModelError(
                    f"TTS: {session_file(self.model_dir, name)} is not a Supertonic 3 {name}: "
                    f"inputs {got_in}, outputs {got_out}; expected inputs {sorted(inputs)}, outputs {outputs}"
                )

    def _check_required_provider(self) -> None:
        cfg = self.config
        required = PROVIDER_NAMES.get(cfg.require_provider)
        if required is None:
            raise TTSProviderError(
                f"tts.require_provider = {cfg.require_provider!r}; use one of {list(PROVIDER_NAMES)}"
            )
        wrong = {n: p for n, p in self.session_providers.items() if not p or p[0] != required}
        if not wrong:
            return
        detail = "; ".join(f"session {n} got {p[0] if p else 'nothing'} (all: {p})" for n, p in wrong.items())
        hint = ""
        if cfg.require_provider not in cfg.providers:
            hint = f" tts.providers {cfg.providers} does not even list {cfg.require_provider!r}."
        elif required not in ort.get_available_providers():
            hint = (
                f" {required} is not in this onnxruntime build ({ort.get_available_providers()}): "
                "install onnxruntime-gpu (requirements-gpu.txt) with matching CUDA/cuDNN/TensorRT libraries."
            )
        else:
            hint = " It is available but failed to initialize: see the onnxruntime messages above."
        message = (
            f"TTS requires {required} (tts.require_provider = {cfg.require_provider!r}), but {detail}.{hint}"
        )
        if not cfg.allow_fallback:
            raise TTSProviderError(message + " Set tts.allow_fallback = true to run anyway (slow).")
        self.fallback_active = True
        bar = "#" * 78
        logger.warning(
            "\n{}\n## TTS PROVIDER FALLBACK: tts.allow_fallback = true\n## {}\n## Synthesis runs on a slower provider: expect much higher reply latency.\n{}", bar, message, bar
        )

    # -- text --------------------------------------------------------------------------------

    def _supported(self, ch: str) -> bool:
        """Whether the model can speak ``ch`` (every code point of its NFKD form is indexed)."""
        idx = self._indexer
        return all(ord(c) < len(idx) and idx[ord(c)] >= 0 for c in unicodedata.normalize("NFKD", ch))

    def prepare_text(self, text: str, language: str = languages.FIRST) -> tuple[str, list[str]]:
        """Normalize text for speech and drop what the model cannot say.

        Args:
            text: A sentence as the LLM wrote it.

        Returns:
            ``(clean_text, removed_chars)``; ``clean_text`` is NFC and may be empty.
        """
        text = languages.get(language).normalize(text)  # each language's own reading (bot/languages/)
        text = re.sub(r"\s+", " ", text).strip()
        kept: list[str] = []
        dropped: list[str] = []
        for ch in text:
            (kept if self._supported(ch) else dropped).append(ch)
        clean, removed = "".join(kept), list(dict.fromkeys(dropped))  # each removed character once, in order
        if removed:
            # Never silently: a dropped character may change what the caller hears.
            logger.warning("TTS: removed characters the voice cannot speak: {!r}", removed)
        clean = re.sub(r"\s+", " ", clean).strip()
        clean = re.sub(r" ([,.!?;:])", r"\1", clean)
        return clean, list(removed)

    def _text_ids(self, chunk: str, language: str = languages.FIRST) -> np.ndarray:
        """Token ids of ``<xx>NFKD(chunk)</xx>`` (final punctuation added when missing)."""
        if not _FINAL_PUNCT.search(chunk):
            chunk += "."
        tagged = f"<{language}>" + unicodedata.normalize("NFKD", chunk) + f"</{language}>"
        cps = np.fromiter((ord(c) for c in tagged), dtype=np.int64, count=len(tagged))
        in_range = cps < len(self._indexer)
        ids = np.full(cps.shape, -1, dtype=np.int64)
        ids[in_range] = self._indexer[cps[in_range]]
        unknown = ids < 0
        if unknown.any():
            # Second line of defence after prepare_text: -1 would index out of the embedding.
            bad = sorted({tagged[i] for i in np.flatnonzero(unknown)})
            names = [f"U+{ord(c):04X}" for c in bad]
            logger.warning("TTS: removed code points the model does not index: {}", names)
            ids = ids[~unknown]
        return ids

    # -- synthesis ---------------------------------------------------------------------------

    def _run(self, name: str, feeds: dict[str, np.ndarray], timings: dict[str, float],
             cancel: threading.Event | None) -> np.ndarray:
        if cancel is not None and cancel.is_set():
            raise SynthesisCancelled()
        t0 = time.perf_counter()
        out = self._sessions[name].run(None, feeds)[0]
        timings[name] = timings.get(name, 0.0) + (time.perf_counter() - t0) * 1000.0
        return out

    def _synthesize_chunk(
        self,
        ids: np.ndarray,
        style: _Style,
        rng: np.random.Generator,
        timings: dict[str, float],
        cancel: threading.Event | None,
    ) -> tuple[np.ndarray, float]:
        """Run the four sessions on one chunk.

        Returns:
            Float32 audio at the model rate, trimmed exactly to the duration, and the duration (s).
        """
        cfg = self.config
        text_ids = ids.reshape(1, -1)
        text_mask = np.ones((1, 1, text_ids.shape[1]), dtype=np.float32)

        feeds = {"text_ids": text_ids, "style_dp": style.dp, "text_mask": text_mask}
        duration = float(self._run("duration_predictor", feeds, timings, cancel)[0]) / cfg.speed
        latent_len = max(1, math.ceil(duration * self.sample_rate / self._frame_samples))
        if latent_len > cfg.trt_max_latent_length:
            # Fewer latent frames make the model speak faster; better than a TRT shape error.
            logger.warning(
                "TTS: predicted {:.1f} s exceeds tts.trt_max_latent_length = {} frames; speaking this chunk faster to fit", duration, cfg.trt_max_latent_length
            )
            latent_len = cfg.trt_max_latent_length
            duration = latent_len * self._frame_samples / self.sample_rate
        feeds = {"text_ids": text_ids, "style_ttl": style.ttl, "text_mask": text_mask}
        text_emb = self._run("text_encoder", feeds, timings, cancel)

        latent_mask = np.ones((1, 1, latent_len), dtype=np.float32)
        x = rng.standard_normal((1, self._latent_channels, latent_len), dtype=np.float32) * latent_mask
        total = np.array([cfg.total_steps], dtype=np.float32)
        for step in range(cfg.total_steps):
            x = self._run(
                "vector_estimator",
                {
                    "noisy_latent": x,
                    "text_emb": text_emb,
                    "style_ttl": style.ttl,
                    "latent_mask": latent_mask,
                    "text_mask": text_mask,
                    "current_step": np.array([step], dtype=np.float32),
                    "total_step": total,
                },
                timings,
                cancel,
            )
        wav = self._run("vocoder", {"latent": x}, timings, cancel)[0]
        # The vocoder pads to whole latent frames: cut exactly to the predicted duration.
        return np.asarray(wav[: int(self.sample_rate * duration)], dtype=np.float32), duration

    def synthesize(
        self,
        text: str,
        sample_rate: int,
        *,
        voice: str | None = None,
        seed: int | None = 0,
        cancel: threading.Event | None = None,
        language: str = languages.FIRST,
    ) -> SynthResult:
        """Synthesize one sentence (blocking; safe to call from several threads).

        Args:
            text: The sentence. Text longer than ~120 characters is cut into chunks at sentence,
                clause or word boundaries and the audio joined with short pauses.
            sample_rate: Output rate in Hz (resampled from the model's 44.1 kHz with soxr HQ).
            voice: Voice style name; ``tts.voice`` when None.
            seed: Seed of the initial noise; the same text, voice and seed give the same audio.
                None for fresh randomness.
            cancel: When set by another thread, synthesis stops before the next session run and
                raises ``SynthesisCancelled`` (a barge-in frees the CPU/GPU at once).
            language: Supertonic's language tag ("en", "vi", ...): the text normalizer and the ``<xx>`` wrap.

        Returns:
            The audio and its timings. Text with nothing speakable gives empty ``pcm``.

        Raises:
            SynthesisCancelled: ``cancel`` was set.
            ValueError: Unknown voice.
        """
        return self.synthesize_rates(text, [sample_rate], voice=voice, seed=seed, cancel=cancel,
                                     language=language)[sample_rate]

    def synthesize_rates(
        self,
        text: str,
        sample_rates: Sequence[int],
        *,
        voice: str | None = None,
        seed: int | None = 0,
        cancel: threading.Event | None = None,
        language: str = languages.FIRST,
    ) -> dict[int, SynthResult]:
        """``synthesize`` at several output rates from one run of the model (blocking): what each rate
        gets is what ``synthesize`` gives at that rate, for one model run instead of one per rate
        (the canned sentences, built at startup for the phone's 8 kHz and the QA page's 24 kHz).

        Returns:
            Rate -> the sentence at that rate; ``synth_ms`` is the model run and that rate's resampling.
        """
        t0 = time.perf_counter()
        voice = voice or self.config.voice
        style = self.voices.get(voice)
        if style is None:
            raise ValueError(
                f"TTS voice {voice!r} not in {self.model_dir / STYLES_DIR} (have: {sorted(self.voices)})"
            )
        rng = np.random.default_rng(seed)
        timings: dict[str, float] = {}

        clean, removed = self.prepare_text(text, language)
        pieces: list[np.ndarray] = []
        n_tokens = 0
        model_duration = 0.0
        if any(ch.isalnum() for ch in clean):  # punctuation alone is nothing to say
            gap = np.zeros(int(_CHUNK_GAP_S * self.sample_rate), dtype=np.float32)
            for chunk in _split_long(clean, self._max_chunk_chars):
                ids = self._text_ids(chunk, language)
                if ids.size == 0:
                    continue
                n_tokens += int(ids.size)
                if pieces:
                    pieces.append(gap)
                    model_duration += _CHUNK_GAP_S
                chunk_wav, chunk_duration = self._synthesize_chunk(ids, style, rng, timings, cancel)
                pieces.append(chunk_wav)
                model_duration += chunk_duration
        wav = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        model_ms = (time.perf_counter() - t0) * 1000.0

        out = {}
        for rate in dict.fromkeys(sample_rates):
            t1 = time.perf_counter()
            at_rate = soxr.resample(wav, self.sample_rate, rate, quality="HQ") if wav.size and rate != self.sample_rate else wav
            pcm = (np.clip(at_rate, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
            out[rate] = SynthResult(
                pcm=pcm,
                sample_rate=rate,
                duration_s=len(pcm) / 2 / rate,
                synth_ms=model_ms + (time.perf_counter() - t1) * 1000.0,
                normalized_text=clean,
                text_tokens=n_tokens,
                voice=voice,
                removed_chars=list(removed),
                session_ms=dict(timings),
                model_duration_s=model_duration,
            )
        return out

    def warmup(self, lengths: Sequence[int] | None = None, sample_rate: int = 8000) -> None:
        """Synthesize dummy Korean sentences so TensorRT engines are built before the first call.

        Args:
            lengths: Sentence lengths in characters; ``tts.warmup_lengths`` when None.
            sample_rate: Output rate to exercise the resampler with.
        """
        lengths = list(self.config.warmup_lengths if lengths is None else lengths)
        if not lengths:
            return
        if self._uses_trt:
            logger.info(
                "TTS warmup: building/loading TensorRT engines. The first start on a machine takes minutes (cached under {} afterwards).", self.config.trt_engine_cache_dir
            )
        total0 = time.perf_counter()
        for n in lengths:
            text = (_WARMUP_TEXT * (n // len(_WARMUP_TEXT) + 1))[: max(1, n)].strip() or "네"
            t0 = time.perf_counter()
            result = self.synthesize(text, sample_rate)
            per_session = ", ".join(f"{k} {v:.0f} ms" for k, v in result.session_ms.items())
            logger.info(
                "TTS warmup {} chars ({} tokens, {:.1f} s audio): {:.2f} s [{}]", n, result.text_tokens, result.duration_s, time.perf_counter() - t0, per_session
            )
        logger.info("TTS warmup done in {:.1f} s", time.perf_counter() - total0)

