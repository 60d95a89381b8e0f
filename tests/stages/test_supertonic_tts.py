"""Supertonic TTS stage, on a stand-in model loaded through the production code path.

The stand-in (``bot.modelfiles.standin``) has the real file layout and ONNX interface but random
weights, so these tests check the plumbing: providers, text preparation, the synthesis loop,
exact trimming, resampling, framing and barge-in. They take a few seconds on two CPU cores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import shutil
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from loguru import logger
from pipecat.frames.frames import (
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.tests.utils import SleepFrame, run_test

from bot.config import TTSConfig
from bot.modelfiles.standin import build_standin_model
from bot.stages.supertonic import (
    SESSION_NAMES,
    SupertonicEngine,
    SupertonicTTSService,
    SynthesisCancelled,
    SynthResult,
    TTSDownloadError,
    TTSModelMissingError,
    TTSProviderError,
    download_supertonic,
)
from bot.stages.supertonic.engine import _split_long
from bot.telemetry.turn_facts import SentenceReadyFrame

KO_SHORT = "안녕"  # 2 characters
KO_LONG = "주민등록등본은 가까운 주민센터나 정부 누리집에서 발급받으실 수 있습니다"  # 40 characters


@pytest.fixture(scope="session")
def standin_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("supertonic") / "supertonic-standin"
    build_standin_model(d)
    return d


def make_config(model_dir: Path, **kw) -> TTSConfig:
    return dataclasses.replace(TTSConfig(), model_dir=str(model_dir), **kw)


@pytest.fixture(scope="session")
def engine(standin_dir) -> SupertonicEngine:
    return SupertonicEngine(make_config(standin_dir))


@pytest.fixture
def log_records():
    """Loguru messages at WARNING and above, captured for the test."""
    records: list[str] = []
    sink = logger.add(lambda m: records.append(str(m)), level="WARNING", format="{level} {message}")
    yield records
    logger.remove(sink)


def turn(text: str) -> list:
    """The frames of one LLM reply."""
    return [LLMFullResponseStartFrame(), LLMTextFrame(text), LLMFullResponseEndFrame()]


def pcm_array(result: SynthResult) -> np.ndarray:
    return np.frombuffer(result.pcm, dtype="<i2")


# -- stand-in ---------------------------------------------------------------------------------


def test_standin_layout_and_size(standin_dir):
    for rel in (
        *(f"onnx/{n}.onnx" for n in SESSION_NAMES),
        "onnx/tts.json",
        "onnx/unicode_indexer.json",
        *(f"voice_styles/{v}.json" for v in ("F1", "F2", "F3", "F4", "F5", "M1", "M2", "M3", "M4", "M5")),
    ):
        assert (standin_dir / rel).is_file(), rel
    size = sum(p.stat().st_size for p in standin_dir.rglob("*") if p.is_file())
    assert size < 2_000_000
    cfg = json.loads((standin_dir / "onnx/tts.json").read_text())
    assert cfg["standin"] is True
    assert cfg["ae"] == {"sample_rate": 44100, "base_chunk_size": 512}
    assert cfg["ttl"] == {"chunk_compress_factor": 6, "latent_dim": 24}
    indexer = json.loads((standin_dir / "onnx/unicode_indexer.json").read_text())
    assert len(indexer) == 65536
    assert indexer[ord("가")] == -1  # syllables are NFKD-decomposed first
    assert indexer[0x1100] >= 0 and indexer[ord("<")] >= 0 and indexer[ord("☃")] == -1


def test_engine_reports_providers_and_interface(engine):
    assert set(engine.session_providers) == set(SESSION_NAMES)
    for providers in engine.session_providers.values():
        assert providers[0] == "CPUExecutionProvider"
    assert engine.is_standin
    assert not engine.fallback_active
    assert engine.sample_rate == 44100
    assert {"F1", "M5"} <= set(engine.voices)
    s = engine._sessions["vector_estimator"]
    shapes = {i.name: i.shape for i in s.get_inputs()}
    assert shapes["noisy_latent"] == ["batch_size", 144, "latent_length"]
    assert shapes["text_emb"] == ["batch_size", 256, "text_length"]


# -- synthesis --------------------------------------------------------------------------------


def test_durations_plausible_and_grow_with_text(engine):
    short = engine.synthesize(KO_SHORT, 16000)
    long = engine.synthesize(KO_LONG, 16000)
    assert 0.2 < short.duration_s < 1.5
    assert 3.0 < long.duration_s < 12.0
    assert long.duration_s > 4 * short.duration_s
    assert 0.04 < long.duration_s / long.text_tokens < 0.12


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100])
def test_exact_trim_and_resample(engine, rate):
    result = engine.synthesize(KO_LONG, rate)
    # Duration from the duration predictor itself, independent of the engine's bookkeeping.
    text = KO_LONG + "."
    tagged = "<ko>" + unicodedata.normalize("NFKD", text) + "</ko>"
    ids = np.array([[engine._indexer[ord(c)] for c in tagged]], dtype=np.int64)
    mask = np.ones((1, 1, ids.shape[1]), np.float32)
    feeds = {"text_ids": ids, "style_dp": engine.voices["F1"].dp, "text_mask": mask}
    dur = engine._sessions["duration_predictor"].run(None, feeds)[0][0] / engine.config.speed
    assert result.text_tokens == ids.shape[1]
    assert result.model_duration_s == pytest.approx(float(dur), abs=1e-6)
    native = int(44100 * float(dur))
    assert native % 3072 != 0  # trimmed, not whole latent frames
    n = len(pcm_array(result))
    assert abs(n - round(native * rate / 44100)) <= 1
    assert result.sample_rate == rate
    assert result.duration_s == pytest.approx(n / rate)


def test_audio_is_int16_and_not_silent(engine):
    a = pcm_array(engine.synthesize(KO_LONG, 8000)).astype(np.float64)
    rms = math.sqrt((a**2).mean())
    assert rms > 1000  # ~0.03 of full scale at least
    assert np.abs(a).max() <= 32767


def test_same_seed_same_audio_and_threads(engine):
    first = engine.synthesize(KO_LONG, 8000, seed=7)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: engine.synthesize(KO_LONG, 8000, seed=7), range(4)))
    assert all(r.pcm == first.pcm for r in results)
    assert engine.synthesize(KO_LONG, 8000, seed=8).pcm != first.pcm


def test_voices_change_speaking_rate(engine):
    durations = {v: engine.synthesize(KO_LONG, 8000, voice=v).duration_s for v in engine.voices}
    assert max(durations.values()) > 1.05 * min(durations.values())
    with pytest.raises(ValueError, match="Z9"):
        engine.synthesize(KO_LONG, 8000, voice="Z9")


def test_unsupported_characters_removed_and_logged(engine, log_records):
    result = engine.synthesize("안녕 😀하세요 ☃", 8000, seed=3)
    assert "😀" in result.removed_chars and "☃" in result.removed_chars
    assert result.normalized_text == "안녕 하세요"
    assert any("😀" in r and "☃" in r and r.startswith("WARNING") for r in log_records)
    # Same audio as the clean text: nothing else was changed.
    assert result.pcm == engine.synthesize("안녕 하세요", 8000, seed=3).pcm


def test_nothing_to_say_gives_no_audio(engine):
    result = engine.synthesize("...", 8000)
    assert result.pcm == b"" and result.text_tokens == 0


def test_long_text_is_chunked(engine):
    text = " ".join([KO_LONG] * 5)  # ~200 characters
    assert all(len(c) <= 120 for c in _split_long(text, 120))
    result = engine.synthesize(text, 8000)
    assert result.duration_s > 4 * engine.synthesize(KO_LONG, 8000).duration_s


def test_cancel_stops_synthesis(engine):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(SynthesisCancelled):
        engine.synthesize(KO_LONG, 8000, cancel=cancel)


def test_warmup_logs_each_length(engine):
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO", format="{message}")
    try:
        engine.warmup([5, 60])
    finally:
        logger.remove(sink)
    assert any(line.startswith("TTS warmup 5 chars") for line in lines)
    assert any(line.startswith("TTS warmup 60 chars") and "vector_estimator" in line for line in lines)


# -- providers and model files ----------------------------------------------------------------


def test_required_tensorrt_on_cpu_raises(standin_dir, log_records):
    cfg = make_config(standin_dir, providers=["tensorrt", "cuda", "cpu"], require_provider="tensorrt")
    with pytest.raises(TTSProviderError) as info:
        SupertonicEngine(cfg)
    msg = str(info.value)
    assert "TensorrtExecutionProvider" in msg and "CPUExecutionProvider" in msg
    assert "duration_predictor" in msg and "vocoder" in msg
    assert "allow_fallback" in msg
    # The unavailable providers were reported, not dropped silently.
    assert any("TensorrtExecutionProvider" in r and "CUDAExecutionProvider" in r for r in log_records)


def test_fallback_allowed_loads_and_flags(standin_dir, log_records):
    cfg = make_config(
        standin_dir, providers=["tensorrt", "cpu"], require_provider="tensorrt", allow_fallback=True
    )
    eng = SupertonicEngine(cfg)
    assert eng.fallback_active
    banner = [r for r in log_records if "TTS PROVIDER FALLBACK" in r]
    assert banner and banner[0].count("\n") >= 3
    assert len(pcm_array(eng.synthesize(KO_SHORT, 8000))) > 0


def test_unknown_provider_name_rejected(standin_dir):
    with pytest.raises(TTSProviderError, match="tts.providers"):
        SupertonicEngine(make_config(standin_dir, providers=["rocm"]))


def test_missing_model_dir(tmp_path):
    with pytest.raises(TTSModelMissingError) as info:
        SupertonicEngine(make_config(tmp_path / "nope"))
    assert "run_bot.py models" in str(info.value) and "--offline" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)


def test_missing_model_file_named(standin_dir, tmp_path):
    copy = tmp_path / "partial"
    shutil.copytree(standin_dir, copy)
    (copy / "onnx" / "vocoder.onnx").unlink()
    with pytest.raises(TTSModelMissingError, match=r"vocoder\.onnx.*run_bot\.py models"):
        SupertonicEngine(make_config(copy))


def test_missing_voice_named(standin_dir):
    with pytest.raises(TTSModelMissingError, match=r"X7\.json"):
        SupertonicEngine(make_config(standin_dir, voice="X7"))


def test_relative_model_dir_resolves_against_base_dir(standin_dir):
    eng = SupertonicEngine(make_config(Path(standin_dir.name)), base_dir=standin_dir.parent)
    assert eng.model_dir == standin_dir


def test_download_failure_is_clear(tmp_path, monkeypatch):
    import huggingface_hub

    def offline(**kwargs):
        raise OSError("no route to huggingface.co")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(TTSDownloadError, match=r"Supertone/supertonic-3.*--offline"):
        download_supertonic(tmp_path / "m")

    # A "successful" download that lacks files fails the check.
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: (tmp_path / "m").mkdir())
    with pytest.raises(TTSModelMissingError, match="duration_predictor.onnx"):
        download_supertonic(tmp_path / "m")


# -- pipecat service --------------------------------------------------------------------------


async def test_service_frames_and_sentences(engine):
    results: list[SynthResult] = []
    tts = SupertonicTTSService(
        engine=engine, voice="F1", frame_ms=20, sample_rate=8000, on_sentence=results.append
    )
    down, _ = await run_test(tts, frames_to_send=turn("안녕하세요. 반갑습니다."))
    assert [r.normalized_text for r in results] == ["안녕하세요.", "반갑습니다."]
    audio = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert all(f.sample_rate == 8000 and f.num_channels == 1 for f in audio)
    frame_bytes = 8000 * 20 // 1000 * 2
    # Every frame is exactly 20 ms except the last one of each sentence.
    short = [i for i, f in enumerate(audio) if len(f.audio) != frame_bytes]
    assert len(short) <= 2 and all(len(audio[i].audio) < frame_bytes for i in short)
    assert sum(len(f.audio) for f in audio) == sum(len(r.pcm) for r in results)
    assert any(isinstance(f, TTSStartedFrame) for f in down)
    assert any(isinstance(f, TTSStoppedFrame) for f in down)
    # Each sentence is announced for the turn's record (bot/telemetry/turns.py), with its time.
    ready = [f for f in down if isinstance(f, SentenceReadyFrame)]
    assert [(f.text, f.synth_ms) for f in ready] == [(r.normalized_text, r.synth_ms) for r in results]


async def test_service_async_callback_and_broken_callback(engine, log_records):
    seen: list[float] = []

    async def record(result: SynthResult):
        seen.append(result.synth_ms)

    tts = SupertonicTTSService(engine=engine, voice="M1", sample_rate=16000, on_sentence=record)
    await run_test(tts, frames_to_send=turn("네."))
    assert len(seen) == 1

    def broken(result):
        raise RuntimeError("hook bug")

    tts = SupertonicTTSService(engine=engine, voice="M1", sample_rate=16000, on_sentence=broken)
    down, _ = await run_test(tts, frames_to_send=turn("네."))
    assert any(isinstance(f, TTSAudioRawFrame) for f in down)  # audio still plays
    assert any("hook bug" in r for r in log_records)


async def test_interruption_drops_queued_sentences(engine):
    calls: list[str] = []
    cancelled: list[str] = []
    real = engine.synthesize

    class SlowEngine:
        """The real engine, with synthesis made slow (0.4 s) so a barge-in lands mid-sentence."""

        voices = engine.voices

        def synthesize(self, text, sample_rate, *, voice=None, seed=0, cancel=None):
            calls.append(text)
            deadline = time.monotonic() + 0.4
            while time.monotonic() < deadline:
                if cancel is not None and cancel.is_set():
                    cancelled.append(text)
                    break
                time.sleep(0.01)
            return real(text, sample_rate, voice=voice, seed=seed, cancel=cancel)

    tts = SupertonicTTSService(engine=SlowEngine(), voice="F1", sample_rate=8000)
    await run_test(
        tts,
        frames_to_send=[
            LLMFullResponseStartFrame(),
            LLMTextFrame("첫 번째 문장입니다. 두 번째 문장입니다. "),
            LLMTextFrame("세 번째 문장입니다."),
            SleepFrame(sleep=0.15),
            InterruptionFrame(),
            SleepFrame(sleep=0.6),
            LLMFullResponseEndFrame(),
        ],
    )
    await asyncio.sleep(0.1)  # let the worker thread notice the cancel
    assert calls and calls[0].startswith("첫")
    assert not any(c.startswith("세") for c in calls), calls
    assert cancelled == [calls[0]]  # the in-flight synthesis was told to stop


def test_service_rejects_unknown_voice(engine):
    with pytest.raises(ValueError, match="Q1"):
        SupertonicTTSService(engine=engine, voice="Q1")
