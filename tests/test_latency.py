"""Percentile math, over-budget counts and derived stages of turn records."""

import math

import numpy as np
import pytest

from bot.config import LatencyConfig
from bot.telemetry.latency import TurnRecord, call_report, percentile, summarize


@pytest.mark.parametrize("p", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(p):
    rng = np.random.default_rng(1)
    xs = list(rng.exponential(300, size=37))
    assert percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)))


def test_percentile_edge_cases():
    assert math.isnan(percentile([], 50))
    assert percentile([7.0], 99) == 7.0
    assert percentile([1, 2, 3, 4], 50) == 2.5


def _turn(i, speech_end, stt_ms, llm_ms, tts_ms, route="llm"):
    t = 1000.0 + i * 10
    r = TurnRecord(call_id="c", index=i, route=route)
    r.speech_end, r.vad_stop = t, t + 0.2
    r.stt_done = r.vad_stop + stt_ms / 1000
    r.turn_end = t + 0.6
    r.llm_request = r.turn_end + 0.001
    r.first_sentence = r.llm_request + llm_ms / 1000
    r.tts_first_audio = r.first_sentence + tts_ms / 1000
    r.first_audio_out = r.tts_first_audio + 0.005
    return r


def test_stages_are_derived_from_marks():
    r = _turn(0, 0, stt_ms=120, llm_ms=300, tts_ms=80)
    s = r.stages_ms()
    assert s["stt"] == pytest.approx(120, abs=0.2)
    assert s["llm"] == pytest.approx(300, abs=0.2)
    assert s["tts"] == pytest.approx(80, abs=0.2)
    assert s["voice_to_voice"] == pytest.approx(600 + 1 + 300 + 80 + 5, abs=0.5)
    # A shortcut turn never reached the model: no LLM stage, no made-up zero.
    r.llm_request = None
    assert "llm" not in r.stages_ms()


def test_over_budget_counts_and_percentiles_per_stage():
    budgets = LatencyConfig(stt_ms=250, llm_ms=250, tts_ms=200, total_ms=1200)
    recs = [_turn(i, 0, stt_ms=100 + 20 * i, llm_ms=200 + 10 * i, tts_ms=100) for i in range(10)]
    rows = {r.stage: r for r in summarize(recs, budgets)}
    assert rows["stt"].n == 10
    assert rows["stt"].over_budget == sum(100 + 20 * i > 250 for i in range(10)) == 2
    assert rows["llm"].over_budget == sum(200 + 10 * i > 250 for i in range(10)) == 4
    assert rows["tts"].over_budget == 0
    assert rows["llm"].p50 == pytest.approx(245, abs=0.5)
    report = call_report(recs, budgets, ["ESCAPE HATCH: test"])
    assert "ESCAPE HATCH: test" in report and "| llm | 10 |" in report and "4/10" in report


def test_the_greeting_is_timed_from_the_media_stream_start_and_exported_to_metrics():
    from bot.telemetry.metrics import ProcessMetrics
    from bot.telemetry.turns import CallRecorder

    rec = CallRecorder("CAgreet")
    greeting = rec.current
    assert greeting.route == "greeting" and greeting.stream_start == rec.started
    greeting.first_sentence = rec.started + 0.01
    greeting.first_audio_out = rec.started + 0.085
    assert greeting.stages_ms()["greeting"] == pytest.approx(85, abs=0.2)
    assert "greeting" not in _turn(1, 0, stt_ms=100, llm_ms=200, tts_ms=50).stages_ms()  # caller turns: none
    metrics = ProcessMetrics(LatencyConfig())
    metrics.call_started()
    metrics.call_finished([greeting, _turn(1, 0, stt_ms=100, llm_ms=200, tts_ms=50)])
    text = metrics.render()[0].decode()
    assert 'voice_stage_latency_ms_count{stage="greeting"} 1.0' in text
    assert 'voice_stage_latency_ms_bucket{le="100.0",stage="greeting"} 1.0' in text
    assert 'voice_turns_total{route="llm"} 1.0' in text and 'route="greeting"' not in text
