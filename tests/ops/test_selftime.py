"""Startup self-timing: the real engines on the fixed input, compared with this host's last good start."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from bot.config import load_config
from bot.ops.selftime import SelfTiming, compare, config_key, self_time
from bot.store.db import Store
from tests.conftest import offline_bot_overrides


def test_slower_means_beyond_the_ratio_and_the_floor_and_faster_is_never_a_problem():
    before = {"stt_ms": 200.0, "tts_ms": 40.0, "llm_first_token_ms": 150.0}
    assert compare({"stt_ms": 290.0, "tts_ms": 40.0}, before, ratio=1.5, min_ms=50) == {}  # 1.45x
    assert compare({"stt_ms": 320.0}, before, ratio=1.5, min_ms=50) == {"stt_ms": (320.0, 200.0)}
    assert compare({"tts_ms": 85.0}, before, ratio=1.5, min_ms=50) == {}  # 2.1x but only 45 ms: noise
    assert compare({"llm_first_token_ms": 600.0}, before, ratio=1.5, min_ms=50) == {"llm_first_token_ms": (600.0, 150.0)}
    assert compare({"stt_ms": 20.0}, before, ratio=1.5, min_ms=50) == {}
    assert compare({"stt_ms": 900.0}, None, ratio=1.5, min_ms=50) == {}  # the first start: nothing to compare


def test_the_config_key_changes_with_what_decides_the_figures():
    base = load_config()
    assert config_key(base) == config_key(load_config())
    assert config_key(load_config(overrides=["stt.beam_size=5"])) != config_key(base)
    assert config_key(load_config(overrides=["tts.providers=['cuda', 'cpu']"])) != config_key(base)
    assert config_key(load_config(overrides=["server.port=9999"])) == config_key(base)


@pytest.fixture(scope="module")
def engines(whisper_dir, standin_tts_dir, tmp_path_factory):
    from bot.modelfiles.manifest import resolve_whisper_model
    from bot.stages.supertonic import SupertonicEngine
    from bot.stages.whisper import WhisperEngine

    config = load_config(overrides=offline_bot_overrides(whisper_dir, standin_tts_dir, "http://127.0.0.1:9/v1",
                                                         tmp_path_factory.mktemp("r")))
    return SimpleNamespace(tts=SupertonicEngine(config.tts, base_dir=config.base_dir),
                           whisper=WhisperEngine(config.stt, resolve_whisper_model(config.stt, config.base_dir)))


@pytest.mark.slow
def test_first_start_records_a_slow_one_is_loud_and_does_not_become_the_baseline(engines, whisper_dir,
                                                                                  standin_tts_dir, tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    config = load_config(overrides=[*offline_bot_overrides(whisper_dir, standin_tts_dir, "http://127.0.0.1:9/v1",
                                                           tmp_path), f"records.url='{url}'"])
    first = self_time(config, None, engines, llm_first_token_ms=150.0)
    assert first.previous is None and first.ok
    assert set(first.figures) == {"tts_ms", "stt_ms", "llm_first_token_ms"} and first.figures["stt_ms"] > 0
    store = Store(url)
    host, key = socket.gethostname(), config_key(config)
    assert store.last_good_timing(host, key) == first.figures

    # A last good start far faster than anything real: this start is much slower, said, kept as bad.
    fast = {"tts_ms": 0.01, "stt_ms": 0.01, "llm_first_token_ms": 10.0}
    store.save_timing(host, key, fast, good=True)
    slow = self_time(config, None, engines, llm_first_token_ms=600.0)
    assert not slow.ok and {"stt_ms", "llm_first_token_ms"} <= set(slow.slower)
    assert "MUCH SLOWER THAN THE LAST GOOD START" in slow.summary()
    assert store.last_good_timing(host, key) == fast  # the slow start did not replace it
    last, good = store.latest_timing(host, key)
    assert last["good"] is False and good == fast
    assert slow.as_dict()["ratios"]["llm_first_token_ms"] == 60.0
    store.close()


def test_a_timing_exports_its_figures_and_the_slow_flag():
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    SelfTiming({"stt_ms": 300.0}, previous={"stt_ms": 100.0}, slower={"stt_ms": (300.0, 100.0)}).export(registry)
    text = generate_latest(registry).decode()
    assert 'voice_startup_stage_ms{stage="stt_ms"} 300.0' in text
    assert 'voice_startup_slowdown_ratio{stage="stt_ms"} 3.0' in text and "voice_startup_slow 1.0" in text
