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


async def test_audible_time_to_first_audio_adds_the_tts_leading_silence():
    import numpy as np
    from pipecat.frames.frames import BotStartedSpeakingFrame, TTSAudioRawFrame
    from pipecat.observers.base_observer import FramePushed
    from pipecat.processors.frame_processor import FrameDirection

    from bot.telemetry.turns import CallRecorder, TurnObserver

    rec = CallRecorder("CAaudible")
    observer = TurnObserver(rec)
    turn = rec.next_turn()
    turn.speech_end = 1000.0
    turn.first_sentence = 1000.5

    def frame(pcm) -> TTSAudioRawFrame:
        return TTSAudioRawFrame(np.asarray(pcm, dtype="<i2").tobytes(), 8000, 1)

    silent, quiet = frame(np.zeros(160)), frame(np.full(160, 200))  # 20 ms each; 200 is below -40 dBFS
    loud = frame(np.concatenate([np.zeros(40), np.full(120, 3000)]))  # 5 ms more of silence, then speech
    for f in (silent, quiet, loud, frame(np.zeros(160)), BotStartedSpeakingFrame()):
        await observer.on_push_frame(FramePushed(source=object(), destination=object(), frame=f,
                                                 direction=FrameDirection.DOWNSTREAM, timestamp=0))
    assert turn.lead_silence_ms == pytest.approx(45.0) and turn.tts_first_audible is not None
    stages = turn.stages_ms()
    assert stages["voice_to_audible"] == pytest.approx(stages["voice_to_voice"] + 45.0, abs=0.1)
    never = TurnRecord(call_id="c", index=2, speech_end=1.0, first_sentence=1.5, first_audio_out=2.0,
                       lead_silence_ms=400.0)  # an all-silent answer: no audible figure at all
    assert "voice_to_audible" not in never.stages_ms() and "voice_to_voice" in never.stages_ms()


async def test_the_greeting_is_observed_when_its_first_audio_goes_out_and_once_per_call():
    from pipecat.frames.frames import BotStartedSpeakingFrame
    from pipecat.observers.base_observer import FramePushed
    from pipecat.processors.frame_processor import FrameDirection

    from bot.telemetry.metrics import ProcessMetrics
    from bot.telemetry.turns import CallRecorder, TurnObserver

    metrics = ProcessMetrics(LatencyConfig())
    rec = CallRecorder("CAlive")
    rec.on_greeting = metrics.greeting_sent
    rec.current.mark("first_sentence", rec.started)
    rec.current.stream_start = rec.started - 0.7  # a slow greeting: 700 ms, over its 500 ms budget
    observer = TurnObserver(rec)
    for _ in range(2):  # the greeting's sentences each start the bot speaking: observed once
        await observer.on_push_frame(FramePushed(source=object(), destination=object(), frame=BotStartedSpeakingFrame(),
                                                 direction=FrameDirection.DOWNSTREAM, timestamp=0))
    text = metrics.render()[0].decode()
    assert 'voice_stage_latency_ms_count{stage="greeting"} 1.0' in text  # before the call ends
    assert 'voice_turns_over_budget_total{stage="greeting"} 1.0' in text
    assert 'voice_stage_budget_ms{stage="greeting"} 500.0' in text
    metrics.call_started()
    metrics.call_finished(rec.records)
    assert 'voice_stage_latency_ms_count{stage="greeting"} 1.0' in metrics.render()[0].decode()  # not twice


def test_audible_time_to_first_audio_is_a_histogram_beside_voice_to_voice():
    from bot.telemetry.metrics import ProcessMetrics

    metrics = ProcessMetrics(LatencyConfig())
    assert 'voice_stage_latency_ms_count{stage="voice_to_audible"} 0.0' in metrics.render()[0].decode()
    turn = _turn(1, 0, stt_ms=100, llm_ms=200, tts_ms=50)
    turn.tts_first_audible, turn.lead_silence_ms = turn.tts_first_audio, 200.0
    metrics.call_started()
    metrics.call_finished([turn])
    text = metrics.render()[0].decode()
    v2v = turn.stages_ms()["voice_to_voice"]  # 856 ms: under 1000; with the 200 ms of silence, over
    assert v2v < 1000 < v2v + 200
    assert 'voice_stage_latency_ms_bucket{le="1000.0",stage="voice_to_voice"} 1.0' in text
    assert 'voice_stage_latency_ms_bucket{le="1000.0",stage="voice_to_audible"} 0.0' in text
    assert 'voice_stage_latency_ms_count{stage="voice_to_audible"} 1.0' in text
