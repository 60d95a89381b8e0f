"""Startup self-timing: each stage timed on a fixed input at warm-up, against this host's last good start.

A speedup that vanishes after a routine deploy (a provider falling back, a flag turned off, a slower
wheel) raises no error. So at every start the server times TTS on a fixed sentence, STT on that
audio and the LLM's first token (from the startup check), and compares each with the last good
figures for this host and config, kept in the records database (``self_timings``). A stage more
than the noise rule (``noise_rule``: on the CPU the bench's rule for a loaded machine, on a GPU
``latency.startup_slowdown`` times and ``latency.startup_slower_ms`` more) is logged loudly, shown in
``/readyz`` and ``run_bot.py check``, and exported as a metric. A slow start is
recorded but does not replace the last good figures; the first start records them.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from loguru import logger

from bot.config import Config, Secrets
from bot.telemetry.noise import LOADED_CPU, Noise

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from bot.stages.supertonic import SupertonicEngine
    from bot.stages.whisper import WhisperEngine

SENTENCE = "무엇을 도와드릴까요?"  # short: every worker start pays for it three times
RATE = 16000  # Whisper's rate: the TTS renders straight at it, no resampler in the STT timing
RUNS = 3  # the median of three: one GC pause or page-in does not make a slow start


class LoadedModels(Protocol):
    """What the self-timing and the startup check use of the loaded models (bot/call/models.py's)."""

    tts: SupertonicEngine
    whisper: WhisperEngine
    vad_session: object


@dataclass
class SelfTiming:
    """This start's figures, the last good ones, and the stages much slower than those."""

    figures: dict[str, float]
    previous: dict[str, float] | None = None
    slower: dict[str, tuple[float, float]] = field(default_factory=dict)  # stage -> (now, before)
    host: str = ""
    config_key: str = ""
    not_judged: str = ""  # why this start was not compared (a busy CPU host), or ""

    @property
    def ok(self) -> bool:
        return not self.slower

    def ratios(self) -> dict[str, float]:
        prev = self.previous or {}
        return {k: round(v / prev[k], 2) for k, v in self.figures.items() if prev.get(k)}

    def summary(self) -> str:
        figs = ", ".join(f"{k} {v:.0f} ms" for k, v in self.figures.items())
        if self.previous is None:
            return f"{figs} (first start on this host and config: recorded as the baseline)"
        if self.not_judged:
            return f"{figs}: NOT JUDGED ({self.not_judged}); the last good start stays the baseline"
        if self.slower:
            worse = "; ".join(f"{k} {now:.0f} ms vs {before:.0f} ms ({now / before:.1f}x)"
                              for k, (now, before) in self.slower.items())
            return f"MUCH SLOWER THAN THE LAST GOOD START: {worse}"
        return f"{figs} (last good start: " + ", ".join(f"{k} {v:.0f} ms" for k, v in self.previous.items()) + ")"

    def export(self, registry: CollectorRegistry) -> None:
        """This start's figures on /metrics: the alert is on ``voice_startup_slow``."""
        from prometheus_client import Gauge

        ms = Gauge("voice_startup_stage_ms", "Stage time on the fixed startup input (ms)", ["stage"], registry=registry)
        ratio = Gauge("voice_startup_slowdown_ratio", "Startup stage time / this host's last good start", ["stage"],
                      registry=registry)
        for stage, value in self.figures.items():
            ms.labels(stage).set(value)
        for stage, value in self.ratios().items():
            ratio.labels(stage).set(value)
        Gauge("voice_startup_slow", "1 when a stage started much slower than the last good start",
              registry=registry).set(0 if self.ok else 1)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "figures_ms": self.figures, "last_good_ms": self.previous,
                "slower": sorted(self.slower), "ratios": self.ratios(), "not_judged": self.not_judged}


def config_key(config: Config) -> str:
    """What decides the figures besides the host: models, devices, providers, the LLM."""
    ident = {"stt": [config.stt.model, config.stt.device, config.stt.compute_type, config.stt.beam_size],
             "tts": [config.tts.model_dir, list(config.tts.providers), config.tts.voice],
             "llm": [config.llm.base_url, config.llm.model]}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def measure(tts: SupertonicEngine, whisper: WhisperEngine, *, voice: str, llm_first_token_ms: float | None = None, runs: int = RUNS) -> dict[str, float]:
    """Median milliseconds of each stage on the fixed input (blocking: call at startup)."""
    synth = [tts.synthesize(SENTENCE, RATE, voice=voice) for _ in range(runs)]
    pcm = synth[-1].pcm
    stt = [whisper.transcribe(pcm, RATE).transcribe_ms for _ in range(runs)]
    figures = {"tts_ms": round(statistics.median(r.synth_ms for r in synth), 1),
               "stt_ms": round(statistics.median(stt), 1)}
    if llm_first_token_ms:
        figures["llm_first_token_ms"] = round(llm_first_token_ms, 1)
    return figures


def noise_rule(config: Config) -> Noise:
    """The rule a start is judged by. On the CPU the bench's rule for a loaded machine (the perf gate's): a
    CPU start shares its cores with whatever else runs, and 7 starts of one config on the 2-core box moved
    STT 222-465 ms (docs/regressions.md). On a GPU, where the stages are steady, ``latency.startup_slowdown``
    and ``latency.startup_slower_ms``."""
    if config.stt.device == "cpu":
        return LOADED_CPU
    return Noise(config.latency.startup_slowdown, config.latency.startup_slower_ms)


def judge(config: Config, figures: dict[str, float], previous: dict[str, float] | None, *, load: float,
          cpus: int) -> tuple[dict[str, tuple[float, float]], str]:
    """(the stages much slower, why the start was not judged). A CPU host whose load average is over its cores
    is not judged, as the bench does not judge an overloaded machine (bot/tools/baseline.py): its callers'
    turns and this timing both wait for a core (7 starts at load 6 on 2 cores: STT 162-520 ms)."""
    if config.stt.device == "cpu" and load > cpus:
        return {}, f"host busy: load average {load:.1f} on {cpus} cores"
    rule = noise_rule(config)
    return compare(figures, previous, ratio=rule.ratio, min_ms=rule.min_ms), ""


def compare(figures: dict[str, float], previous: dict[str, float] | None, *, ratio: float,
            min_ms: float) -> dict[str, tuple[float, float]]:
    """Stages slower than ``previous`` by more than ``ratio`` AND ``min_ms`` (faster is never a problem)."""
    out = {}
    for stage, now in figures.items():
        before = (previous or {}).get(stage)
        if before and Noise(ratio, min_ms).slower(now, before):
            out[stage] = (now, before)
    return out


def self_time(config: Config, secrets: Secrets | None, models: LoadedModels, *, llm_first_token_ms: float | None = None,
              save: bool = True) -> SelfTiming | None:
    """Time this start, compare with the host's last good one, record it (``save``). None when the
    records database is off or unreachable (said, not raised: it must not stop the server)."""
    from bot.store.db import open_store

    figures = measure(models.tts, models.whisper, voice=config.tts.voice, llm_first_token_ms=llm_first_token_ms)
    result = SelfTiming(figures, host=socket.gethostname(), config_key=config_key(config))
    if not config.records.enabled:
        logger.info("startup self-timing: {} (records.enabled = false: nothing to compare with)", result.summary())
        return result
    try:
        store = open_store(config, secrets)
    except Exception as e:  # noqa: BLE001 - the database is down: time anyway, say so
        logger.warning("startup self-timing: {} (records database unreachable: {})", result.summary(), e)
        return result
    try:
        result.previous = store.last_good_timing(result.host, result.config_key)
        result.slower, result.not_judged = judge(config, figures, result.previous, load=os.getloadavg()[0],
                                                 cpus=os.cpu_count() or 1)
        if save and not (result.not_judged and result.previous):  # a busy start never becomes the baseline
            store.save_timing(result.host, result.config_key, figures, good=result.ok)
    finally:
        store.close()
    if result.ok:
        logger.info("startup self-timing: {}", result.summary())
    else:
        bar = "!" * 78
        for line in (bar, f"STARTUP SELF-TIMING: {result.summary()}",
                     "Was a provider, a flag or a wheel changed? See run_bot.py check and the escape hatches.", bar):
            logger.warning(line)
    return result
