"""Issue 24 with the real Whisper base: language from the same pass, over the phone's mu-law."""

import audioop
from pathlib import Path

import numpy as np
import pytest
import soxr

from bot.config import load_config
from bot.core.wav import read_wav
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher
from bot.stages.whisper import WhisperEngine
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine():
    cfg = load_config(ROOT / "config.toml", ["line.languages=['ko','en']", "stt.language='auto'"]).stt
    eng = WhisperEngine(cfg, str(ROOT / cfg.model), min_avg_logprob=cfg.min_avg_logprob)
    yield eng
    eng.close()


def _phone(path: Path) -> tuple[bytes, int]:
    pcm, rate = read_wav(path)
    a = soxr.resample(np.frombuffer(pcm, "<i2").astype(np.float32), rate, 8000).clip(-32768, 32767).astype("<i2")
    return audioop.ulaw2lin(audioop.lin2ulaw(a.tobytes(), 2), 2), 8000


def _turn(engine, switcher, path):
    r = engine.transcribe(*_phone(path), language=switcher.current, detect=switcher.languages)
    return r, switcher.observe(LanguageGuess(r.detected, r.language_p, len(r.text.split()), r.audio_secs))


def test_english_turn_switches_and_is_decoded_in_english(engine):
    s = LanguageSwitcher(["ko", "en"])
    r, lang = _turn(engine, s, ROOT / "tests/fixtures/en_report.wav")
    assert (r.detected, r.language, lang) == ("en", "en", "en")
    assert "report a problem" in r.text.lower()


def test_one_word_english_in_a_korean_call_does_not_switch(engine):
    s = LanguageSwitcher(["ko", "en"])
    r, lang = _turn(engine, s, ROOT / "tests/fixtures/en_okay.wav")
    assert r.detected == "en" and lang == "ko"


@pytest.mark.parametrize("clip", sorted((ROOT / "bench/audio").glob("*.wav")), ids=lambda p: p.stem)
def test_bench_korean_clips_stay_korean(engine, clip):
    s = LanguageSwitcher(["ko", "en"])
    _r, lang = _turn(engine, s, clip)
    assert lang == "ko"
    assert _turn(engine, s, clip)[1] == "ko"  # nor on the second turn in a row
