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


# --- issue 47: no false referral ------------------------------------------------------------------

CLIPS = sorted((ROOT / "tests/fixtures").glob("*.wav")) + sorted((ROOT / "bench/audio").glob("*.wav"))


def _guesses(engine, wide: bool) -> dict[str, LanguageGuess | None]:
    """Each Korean or English clip's guess of a language of all Whisper's (None: no transcript)."""
    out: dict[str, LanguageGuess | None] = {}
    for clip in CLIPS:
        r = engine.transcribe(*(read_wav(clip) if wide else _phone(clip)), language="ko", detect=("ko", "en"))
        out[clip.name] = (LanguageGuess(r.heard, r.heard_p, len(r.text.split()), r.audio_secs, served_p=r.language_p)
                          if r.accepted and r.heard else None)
    return out


def _referred(config, assets, guesses: list[LanguageGuess | None]) -> bool:
    from bot.call.language import new_dialog_state

    switcher = new_dialog_state(config, assets).switcher  # a call's, with the config's [stt] unserved_* rule
    assert switcher is not None
    return any(switcher.unserved(g) for g in guesses if g is not None)


@pytest.mark.parametrize("wide", [False, True], ids=["phone_8k_mulaw", "wide_16k"])
def test_no_korean_or_english_clip_is_sent_to_another_line(engine, wide, capsys):
    """Every clip alone, every clip twice in a row, every ordered pair and all clips as one call:
    0 referrals (the rule of issue 38, one turn at 0.8, sent some of them to 1345)."""
    from bot.call.assets import DialogAssets

    config = load_config(ROOT / "config.toml", ["line.languages=['ko','en']", "stt.language='auto'"])
    assets = DialogAssets.load(config)
    guesses = _guesses(engine, wide)
    names = list(guesses)
    calls = [[n] for n in names] + [[n, n] for n in names] + [[a, b] for a in names for b in names if a != b]
    calls.append(names)
    referred = [c for c in calls if _referred(config, assets, [guesses[n] for n in c])]
    before = [n for n, g in guesses.items()
              if g is not None and g.language not in ("ko", "en") and g.p >= 0.8 and g.words >= 2 and g.audio_secs >= 1]
    top = max((g.p for g in guesses.values() if g is not None and g.language not in ("ko", "en")
               and (g.served_p or 0) <= config.stt.unserved_served_p), default=0.0)
    with capsys.disabled():
        print(f"\n{'phone 8 kHz mu-law' if wide is False else 'wide 16 kHz'}: {len(CLIPS)} clips, {len(calls)} calls "
              f"(alone, twice, every ordered pair, all in one): false referrals {len(referred)}; "
              f"one-turn rule of issue 38: {len(before)} clips referred alone {before}; highest unserved p with the "
              f"line's languages unlikely: {top:.3f} (stt.unserved_p = {config.stt.unserved_p})")
    assert referred == []
