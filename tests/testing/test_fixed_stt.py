"""The fixed-delay STT: the product's STT stage on an engine whose time the test sets."""

from __future__ import annotations

import asyncio
import time

import pytest
from pipecat.frames.frames import (
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.tests.utils import SleepFrame, run_test

from bot.config import load_config
from bot.ops.hatches import escape_hatches
from bot.stages.whisper import WhisperSTTProcessor
from bot.testing.fixed_stt import FixedDelayEngine, FixedDelaySTTService

RATE = 16000


def _pcm(secs: float) -> bytes:
    return b"\x10\x00" * int(secs * RATE)


async def test_engine_answers_the_known_text_after_exactly_its_delay():
    engine = FixedDelayEngine("hello there", 0.2)
    t = time.monotonic()
    result = await engine.transcribe_async(_pcm(1.0), RATE, language="en")
    took = time.monotonic() - t
    assert result.accepted and result.text == "hello there" and result.language == "en"
    assert 0.19 <= took < 0.6 and result.transcribe_ms == pytest.approx(200)
    assert result.audio_secs == pytest.approx(1.0) and engine.calls == 1


async def test_engine_rejects_a_blip_and_never_holds_the_loop():
    engine = FixedDelayEngine("hello", 0.3, min_speech_s=0.25)
    assert not (await engine.transcribe_async(_pcm(0.1), RATE)).accepted
    # Ten transcriptions at once take one delay, not ten: the delay is a sleep, not a core.
    t = time.monotonic()
    results = await asyncio.gather(*(engine.transcribe_async(_pcm(1.0), RATE) for _ in range(10)))
    assert all(r.accepted for r in results) and time.monotonic() - t < 1.5


def test_engine_refuses_bad_settings():
    with pytest.raises(ValueError, match="delay_s"):
        FixedDelayEngine("x", -1)
    with pytest.raises(ValueError, match="text"):
        FixedDelayEngine("  ", 0.1)


async def test_service_is_the_product_stt_stage_and_yields_one_final_transcript_per_segment():
    stt = FixedDelaySTTService(text="네 감사합니다", delay_s=0.05, sample_rate=RATE)
    assert isinstance(stt, WhisperSTTProcessor)
    chunk = RATE * 2 // 50
    pcm = _pcm(0.8)
    audio = [InputAudioRawFrame(audio=pcm[i : i + chunk], sample_rate=RATE, num_channels=1)
             for i in range(0, len(pcm), chunk)]
    down, _ = await run_test(stt, frames_to_send=[VADUserStartedSpeakingFrame(), *audio,
                                                  VADUserStoppedSpeakingFrame(), SleepFrame(0.3)])
    transcripts = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert [(t.text, t.finalized) for t in transcripts] == [("네 감사합니다", True)]
    assert stt.fixed_engine.calls == 1


def test_a_fixed_delay_engine_is_an_escape_hatch_in_the_banner():
    hatches = escape_hatches(load_config(), whisper_engine=FixedDelayEngine("x", 0.4))
    assert any("FIXED-DELAY TEST ENGINE" in h and "400ms" in h for h in hatches)
