"""Startup self-timing: the real engines on the fixed input, compared with this host's last good start."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from bot.config import load_config
from bot.ops.selftime import SelfTiming, compare, config_key, judge, noise_rule, self_time
from bot.store.db import Store
from tests.conftest import ROOT, offline_bot_overrides


def test_slower_means_beyond_the_ratio_and_the_floor_and_faster_is_never_a_problem():
    before = {"stt_ms": 200.0, "tts_ms": 40.0, "llm_first_token_ms": 150.0}
    assert compare({"stt_ms": 290.0, "tts_ms": 40.0}, before, ratio=1.5, min_ms=50) == {}  # 1.45x
    assert compare({"stt_ms": 320.0}, before, ratio=1.5, min_ms=50) == {"stt_ms": (320.0, 200.0)}
    assert compare({"tts_ms": 85.0}, before, ratio=1.5, min_ms=50) == {}  # 2.1x but only 45 ms: noise
    assert compare({"llm_first_token_ms": 600.0}, before, ratio=1.5, min_ms=50) == {"llm_first_token_ms": (600.0, 150.0)}
    assert compare({"stt_ms": 20.0}, before, ratio=1.5, min_ms=50) == {}
    assert compare({"stt_ms": 900.0}, None, ratio=1.5, min_ms=50) == {}  # the first start: nothing to compare


# Seven starts of one unchanged CPU config, each a fresh process timing the offline models as serve does
# (the script in docs/regressions.md; 2-core box shared with other work, load average 2.3-5.6), and
# the two of the issue's seven that said MUCH SLOWER (STT 168 ms against 95 ms).
SEVEN_CPU_STARTS = [{"tts_ms": 7.1, "stt_ms": 253.1}, {"tts_ms": 15.9, "stt_ms": 440.0}, {"tts_ms": 22.1, "stt_ms": 433.6},
                    {"tts_ms": 28.3, "stt_ms": 464.6}, {"tts_ms": 4.3, "stt_ms": 253.4}, {"tts_ms": 9.5, "stt_ms": 221.5},
                    {"tts_ms": 18.1, "stt_ms": 425.7}]  # fmt: skip
ISSUE_CPU_START = ({"stt_ms": 168.0}, {"stt_ms": 95.0})


def test_on_cpu_noise_no_start_of_an_unchanged_config_is_much_slower_and_a_real_loss_still_is():
    config = load_config()  # config.toml: STT on the CPU
    assert config.stt.device == "cpu"
    rule = noise_rule(config)
    judge = lambda now, before: compare(now, before, ratio=rule.ratio, min_ms=rule.min_ms)  # noqa: E731
    assert [judge(now, before) for now in SEVEN_CPU_STARTS for before in SEVEN_CPU_STARTS] == [{}] * 49
    assert judge(*ISSUE_CPU_START) == {}
    # What a lost speedup looks like still shows: Whisper's beam 1 -> 5 on this box (x3), a stalled LLM.
    assert set(judge({"stt_ms": 1300.0, "llm_first_token_ms": 900.0}, {"stt_ms": 253.1, "llm_first_token_ms": 150.0})) \
        == {"stt_ms", "llm_first_token_ms"}
    # The bench's rule for a loaded machine of the class, the perf gate's: one rule, never two copies.
    gate = (ROOT / "scripts" / "perf_gate.sh").read_text(encoding="utf-8")
    assert f"--noise-ratio {rule.ratio:g} --noise-ms {rule.min_ms:g}" in gate


# Seven more starts, `scripts/selftime_noise.py 7`, 2026-12-05, load average 5.8-6.1 on the 2 cores: STT
# 162-520 ms, beyond even the loaded rule (3 of 42 pairs). A busy CPU host is not judged, as the bench does
# not judge an overloaded machine.
SEVEN_BUSY_CPU_STARTS = [353.0, 174.4, 170.1, 162.0, 361.9, 320.1, 520.2]


def test_a_start_on_a_busy_cpu_host_is_not_judged_and_a_quiet_one_is():
    config = load_config()
    for now in SEVEN_BUSY_CPU_STARTS:
        for before in SEVEN_BUSY_CPU_STARTS:
            slower, not_judged = judge(config, {"stt_ms": now}, {"stt_ms": before}, load=6.1, cpus=2)
            assert slower == {} and "busy" in not_judged
    assert judge(config, {"stt_ms": 520.2}, {"stt_ms": 162.0}, load=1.0, cpus=2) == ({"stt_ms": (520.2, 162.0)}, "")
    # On a GPU the load does not excuse a slow start (a provider fallback loads the CPU itself).
    gpu = load_config("config.gpu.toml")
    assert judge(gpu, {"stt_ms": 300.0}, {"stt_ms": 60.0}, load=40.0, cpus=16)[0] == {"stt_ms": (300.0, 60.0)}


def test_a_not_judged_start_says_so_and_is_not_much_slower():
    timing = SelfTiming({"stt_ms": 520.0}, previous={"stt_ms": 162.0}, not_judged="host busy")
    assert timing.ok and "NOT JUDGED" in timing.summary() and timing.as_dict()["not_judged"] == "host busy"


def test_on_a_gpu_the_config_rule_judges():
    gpu = load_config("config.gpu.toml")
    assert noise_rule(gpu).ratio == gpu.latency.startup_slowdown and noise_rule(gpu).min_ms == gpu.latency.startup_slower_ms


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
                                                                                  standin_tts_dir, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr("bot.ops.selftime.os.getloadavg", lambda: (0.5, 0.5, 0.5))  # a quiet host: judged
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
    # The LLM's +590 ms is beyond any rule; STT's real figure passes CPU's +300 ms floor only on a slow machine.
    assert not slow.ok and "llm_first_token_ms" in slow.slower
    assert "MUCH SLOWER THAN THE LAST GOOD START" in slow.summary()
    assert store.last_good_timing(host, key) == fast  # the slow start did not replace it
    last, good = store.latest_timing(host, key)
    assert last["good"] is False and good == fast
    assert slow.as_dict()["ratios"]["llm_first_token_ms"] == 60.0
    # The same start on a busy CPU host: not judged, not saved, the good baseline kept.
    monkeypatch.setattr("bot.ops.selftime.os.getloadavg", lambda: (9.0, 9.0, 9.0))
    busy = self_time(config, None, engines, llm_first_token_ms=600.0)
    assert busy.ok and busy.not_judged and store.latest_timing(host, key)[0]["figures"] == slow.figures
    store.close()


def test_a_timing_exports_its_figures_and_the_slow_flag():
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    SelfTiming({"stt_ms": 300.0}, previous={"stt_ms": 100.0}, slower={"stt_ms": (300.0, 100.0)}).export(registry)
    text = generate_latest(registry).decode()
    assert 'voice_startup_stage_ms{stage="stt_ms"} 300.0' in text
    assert 'voice_startup_slowdown_ratio{stage="stt_ms"} 3.0' in text and "voice_startup_slow 1.0" in text
