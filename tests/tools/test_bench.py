"""``run_bot.py bench``: speech-end detection, the turn set, the report writer, and one tiny real run."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import wave

import numpy as np
import pytest

from bot.config import LatencyConfig
from bot.telemetry.latency import TurnRecord
from bot.testing.phone import FAST_VOICE
from bot.tools.bench import (
    DEFAULT_TURNS,
    BenchError,
    RunStats,
    bench_problems,
    bench_responder,
    load_turn_set,
    render_report,
    speech_bounds,
    write_outputs,
)
from tests.conftest import ROOT
from tests.tools.conftest import GOODBYE_WINDOW_S, HATCHES, _synthetic_run


def _wav_bytes(pcm: np.ndarray, rate: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.astype("<i2").tobytes())
    return buf.getvalue()


@pytest.mark.parametrize("rate", [8000, 16000])
def test_speech_bounds_excludes_leading_and_trailing_silence(rate):
    rng = np.random.default_rng(0)
    t = np.arange(int(0.6 * rate)) / rate
    speech = 8000 * np.sin(2 * np.pi * 220 * t) * np.exp(-3 * t)  # decays to ~-16 dB at the end
    dither = rng.integers(-1, 2, size=int(0.9 * rate))  # +-1 LSB, like sox's dither
    pcm = np.concatenate([dither[: int(0.3 * rate)], speech, dither[: int(0.9 * rate)]]).astype(np.int16)
    start, end = speech_bounds(pcm.tobytes(), rate)
    assert start == pytest.approx(0.3, abs=0.011)
    assert end == pytest.approx(0.9, abs=0.011)
    assert speech_bounds(dither.astype(np.int16).tobytes(), rate) == (0.0, 0.0)
    assert speech_bounds(b"", rate) == (0.0, 0.0)


def test_shipped_turn_set_is_small_valid_and_finds_each_clips_speech():
    ts = load_turn_set()
    assert ts.path == DEFAULT_TURNS.resolve()
    for turn in ts.turns.values():
        assert turn.wav.stat().st_size < 100 * 1024
        with wave.open(str(turn.wav)) as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) in {(1, 2, 8000), (1, 2, 16000)}
        # Clips carry trailing silence (espeak's own, plus 0.2 s of padding): it is not speech.
        assert 0.15 <= turn.speech_start_s < turn.speech_end_s <= turn.duration_s - 0.2
    scripted = [t for call in ts.calls for t in call]
    share = sum(ts.turns[t].route == "shortcut" for t in scripted) / len(scripted)
    assert 0.3 <= share <= 0.5
    assert ts.script(len(ts.calls)) == ts.script(0)  # calls cycle through the scripts


def test_fake_llm_answers_json_to_structured_requests_and_text_to_plain_ones():
    structured = bench_responder({"response_format": {"type": "json_schema", "json_schema": {"schema": {
        "type": "object", "properties": {"reply": {"type": "string"}, "intent": {"type": "string"}}}}}})
    assert isinstance(structured, dict) and structured["reply"]
    plain = bench_responder({"messages": [{"role": "user", "content": "여보세요"}]})
    assert plain == structured["reply"]


META = {"concurrent calls (N)": 2, "machine": "test"}


def test_report_has_the_table_llm_calls_shortcut_share_and_escape_hatches():
    run = _synthetic_run(extra_turn=True)
    text = render_report([run], META, LatencyConfig())
    for hatch in HATCHES:
        assert f"ESCAPE HATCH:** {hatch}" in text
    # The header's hatches come before any figure.
    assert text.index("ESCAPE HATCH") < text.index("| stage |")
    assert "| stage | n | p50 ms | p90 ms | p99 ms | max ms | budget ms | over budget |" in text
    assert "| voice_to_voice | 5 | 950 |" in text
    assert "- LLM calls per turn: 0 call(s): 1 turns, 1 call(s): 4 turns; max 1: OK (at most one)" in text
    assert "Shortcut share: 1/5 = 20 %" in text
    assert "Route mix: llm 4, shortcut 1" in text
    assert "No answer within the timeout: 1" in text
    assert "Caller turns without a server record: 1; server turns no caller turn explains: 1" in text
    assert "Expected vs actual route: 4/4 agree." in text
    assert "| caller TTFA (last speech frame sent -> first audible bot audio) | 4 | 1000 |" in text
    assert "ONNX session `vocoder`: CPUExecutionProvider" in text
    assert "compute type int8" in text and "dialect openai" in text
    assert "p99 3.5 ms" in text and "max 41.0 ms" in text
    assert "Turns with missing marks: none" in text
    assert "| server: media stream start -> greeting's first audio out | 2 | 100 | 100 |" in text
    assert "leading silence added) | 5 | 980 |" in text  # voice_to_voice 950 + 30 ms before the first sample
    assert "| caller: stream opened -> first audible greeting audio | 2 | 150 | 150 |" in text


def test_report_flags_more_than_one_llm_call_and_shows_ratios_against_stock():
    ours, stock = _synthetic_run(llm_calls=2), _synthetic_run("stock", scale=2.0)
    text = render_report([ours, stock], META, LatencyConfig())
    assert "max 2: **FAIL: 2 turn(s) made more than one call**" in text
    assert "## Ours vs stock Pipecat" in text
    assert "| voice_to_voice | 950 | 1900 | 0.50 |" in text
    assert "| **caller TTFA** | 1000 | 2000 | 0.50 |" in text


def test_a_call_that_errored_on_any_server_fails_the_bench_and_heads_the_report():
    ours, stock = _synthetic_run(), _synthetic_run("stock", scale=2.0)
    assert bench_problems([RunStats.of(ours), RunStats.of(stock)], LatencyConfig()) == []
    assert "Bench: every call of every server completed, every ours/stock ratio computed." in render_report(
        [ours, stock], META, LatencyConfig())
    stock.calls[0].ended_by, stock.calls[0].error = "error", "TimeoutError: timed out after 15.0s waiting for media"
    problems = bench_problems([RunStats.of(ours), RunStats.of(stock)], LatencyConfig())
    assert problems == [f"stock: call {stock.calls[0].call_id[:10]}… error: TimeoutError: timed out after 15.0s "
                        "waiting for media"]
    text = render_report([ours, stock], META, LatencyConfig())
    assert text.index("## BENCH FAILED") < text.index("## ours:") and "waiting for media" in text


def test_a_ratio_that_cannot_be_computed_fails_the_bench():
    """The issue's broken comparison: every stock call failed, so the ratio table was empty and exit 0."""
    ours, stock = _synthetic_run(), _synthetic_run("stock")
    stock.server_turns = [t for t in stock.server_turns if t["route"] == "greeting"]
    for call in stock.calls:
        for turn in call.turns:
            turn.caller_ttfa_ms = None
    problems = bench_problems([RunStats.of(ours), RunStats.of(stock)], LatencyConfig())
    assert "ours/stock ratio of voice_to_voice p50/p90 could not be computed (ours 950; stock -)" in problems
    assert "ours/stock ratio of caller TTFA p50/p90 could not be computed (ours 1000; stock -)" in problems


def test_a_late_transcripts_answer_is_joined_to_the_speech_it_answers():
    """Stock Pipecat's 5 s stop timeout beat its STT: the turn that heard the speech closed empty and
    the late transcript's own turn (no caller marks) was answered. One row, timed from the speech."""
    run = _synthetic_run("stock")
    call = run.calls[0].call_id
    heard = next(t for t in run.server_turns if t["call_id"] == call and t["index"] == 1)
    t0 = heard["speech_end"]
    heard.update(route="no_reply", turn_end=t0 + 5.2, stt_done=t0 + 6.5, llm_request=None, llm_first_token=None,
                 first_sentence=None, tts_first_audio=None, first_audio_out=None, llm_calls=0)
    late = TurnRecord(call_id=call, index=9, route="llm", turn_end=t0 + 7.0, llm_request=t0 + 7.1,
                      llm_first_token=t0 + 7.3, first_sentence=t0 + 7.4, tts_first_audio=t0 + 7.9,
                      first_audio_out=t0 + 8.0, llm_calls=1).to_dict()
    run.server_turns.append(late)
    rows = [r for r in run.rows() if r["call_id"] == call]
    assert len(rows) == 3 and all(r["caller"] for r in rows)  # no server turn left unexplained
    first = rows[0]["server"]
    assert first["joined_late_answer"] == [1, 9] and first["route"] == "llm"
    assert first["stages_ms"]["voice_to_voice"] == pytest.approx(8000, abs=1)
    assert first["stages_ms"]["stt"] == pytest.approx(6300, abs=1)
    # A turn that was answered is never joined to the next record.
    assert "joined_late_answer" not in rows[1]["server"]


def test_write_outputs_writes_report_plot_and_one_json_line_per_turn(tmp_path):
    runs = [_synthetic_run(), _synthetic_run("stock", scale=1.5)]
    paths = write_outputs(tmp_path / "out", runs, META, LatencyConfig(), load_turn_set())
    report = paths["report"].read_text()
    assert report.startswith("# Voice agent bench")
    assert "| bye | goodbye (ends the call) | 안녕히 계세요 | shortcut |" in report
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [json.loads(line) for line in paths["turns"].read_text().splitlines()]
    assert len(rows) == 2 * 5  # 5 caller turns per run (one without a server record)
    answered = [r for r in rows if r["server"] and r["caller"]]
    assert all(r["server"]["call_id"] == r["call_id"] == r["caller"]["call_id"] for r in answered)
    assert all(r["server"]["index"] == r["turn"] for r in answered)
    assert all("voice_to_voice" in r["server"]["stages_ms"] for r in answered)


@pytest.mark.slow  # a subprocess or a real model
def test_bench_places_concurrent_calls_and_writes_the_report(tmp_path, whisper_dir, standin_tts_dir):
    """A tiny real run: 2 calls at once, each "trash" (LLM) then "bye" (shortcut, the bot hangs up)."""
    turns = tmp_path / "turns.toml"
    audio = ROOT / "bench" / "audio"
    turns.write_text(
        f'[[turns]]\nid = "trash"\nwav = "{audio / "trash.wav"}"\nroute = "llm"\nlabel = "trash"\n\n'
        f'[[turns]]\nid = "bye"\nwav = "{audio / "bye.wav"}"\nroute = "shortcut"\nlabel = "bye"\n\n'
        '[[calls]]\nturns = ["trash", "bye"]\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_bot.py"), "bench", "--calls", "2", "--turns", str(turns), "--out", str(out),
         "--no-progress", "--answer-timeout", "60",
         "--set", f"stt.model='{whisper_dir}'", "--set", f"tts.model_dir='{standin_tts_dir}'",
         "--set", "tts.warmup_lengths=[5]", "--set", f"stt.window_s={GOODBYE_WINDOW_S}",
         "--set", FAST_VOICE],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "Calls: 2 (bot: 2)" in report, report
    assert "| voice_to_voice | 4 |" in report
    assert "ESCAPE HATCH:** STT on CPU" in report
    assert "max 1: OK" in report and "Shortcut share: 2/4 = 50 %" in report
    assert (out / "latency.png").read_bytes()[:4] == b"\x89PNG"
    rows = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and len({r["call_id"] for r in rows}) == 2
    for r in rows:
        assert r["server"] and r["caller"], r
        assert r["server"]["route"] == r["caller"]["expected_route"]
        assert r["caller"]["caller_ttfa_ms"] > 0 and not r["caller"]["cut_off_early"]  # how long: the report's
        # The caller's figure includes what the server's cannot see (socket, serializer): never much less.
        assert r["caller"]["caller_ttfa_ms"] > r["server"]["stages_ms"]["voice_to_voice"] - 100
    assert not math.isnan(json.loads(json.dumps(rows))[0]["caller"]["speech_end"])


def test_the_recording_cost_comes_from_the_recorders_own_log_lines():
    from bot.tools.bench.report import recording_cost

    log = ("2026-12-04 | INFO | bot.recording.recorder:close:349 - recording of call CA12…: 30.5 s in "
           "2026/12/04/CA12.opus (1200 kB, 0.40 s CPU)\n"
           "noise\nrecording of call CA34…: 29.5 s in 2026/12/04/CA34.opus (1100 kB, 0.30 s CPU)\n")
    cost = recording_cost(log)
    assert cost["calls"] == 2 and cost["secs"] == 60.0 and cost["kb"] == 2300 and round(cost["cpu_s"], 2) == 0.7
    assert recording_cost("nothing")["calls"] == 0


@pytest.mark.parametrize("off, on, calls, verdict", [
    ((6, 800.0, 4.0), (6, 820.0, 5.0), 2, "no growth"),
    ((6, 800.0, 4.0), (6, 1500.0, 5.0), 2, "GROWTH with recording on: voice-to-voice p50"),
    ((6, 800.0, 4.0), (6, 810.0, 12.0), 2, "GROWTH with recording on: loop-lag p99"),
    ((2, 800.0, 4.0), (6, 810.0, 4.0), 2, "not judged"),
    ((6, 800.0, 4.0), (6, 810.0, 4.0), 0, "not judged"),
])
def test_recording_on_vs_off_is_judged_only_with_enough_turns(off, on, calls, verdict):
    from bot.tools.bench.report import recording_verdict

    assert recording_verdict(off, on, calls).startswith(verdict)


# --------------------------------------------------------------------------------- the records request


def _records_client(answers: list) -> tuple[object, list]:
    """An httpx client whose ``/api/turns`` gives ``answers`` in turn: an exception to raise or (status, json)."""
    import httpx

    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle)), seen


async def test_a_failed_records_request_is_retried_until_the_collect_deadline():
    import httpx

    from bot.tools.bench.caller import Target
    from bot.tools.bench.runner import collect_records

    target = Target("http://bench.test", "https://bench.test/twilio/voice", "ws://bench.test/twilio/media", None,
                    records_token="secret")
    turns = {"turns": [{"call_id": "CA1", "index": 0, "route": "greeting"}], "loop_lag": {}}
    # Under load one request failed with an empty error: that alone once aborted the bench.
    client, seen = _records_client([httpx.ReadError(""), (500, {"error": "busy"}), (200, turns)])
    async with client:
        data = await collect_records(client, target, 1000.0, {"CA1"}, timeout=5.0, retry_every=0.01)
    assert data == turns and len(seen) == 3
    assert seen[-1].headers["authorization"] == "Bearer secret" and seen[-1].url.params["since"] == "1000.0"

    client, seen = _records_client([httpx.ReadError("")])
    async with client:
        with pytest.raises(BenchError, match=r"failed until the collect deadline \(0 s\): ReadError$"):
            await collect_records(client, target, 1000.0, {"CA1"}, timeout=0.05, retry_every=0.01)
    assert len(seen) > 1

    client, seen = _records_client([(401, {"error": "no"})])  # a refused token is not worth a retry
    async with client:
        with pytest.raises(BenchError, match="RECORDS_API_TOKEN"):
            await collect_records(client, target, 1000.0, {"CA1"}, timeout=5.0, retry_every=0.01)
    assert len(seen) == 1


def test_tracing_on_vs_off_is_judged_on_voice_to_voice_loop_lag_and_unanswered_turns():
    from bot.tools.bench.report import TRACING_RUNS, render_report, tracing_comparison

    traced = {"calls": 2, "traces": 2, "turns": 4, "records": 4}
    off = RunStats.of(_synthetic_run("ours"))
    lines, verdict = tracing_comparison(off, RunStats.of(_synthetic_run("ours-tracing")), traced)
    assert verdict.startswith("no growth") and "Collector: 2 trace(s) for 2 call(s) placed, 4 turn span(s)" in "\n".join(lines)
    assert "| ours-tracing | 4 | 950 |" in "\n".join(lines)
    _, verdict = tracing_comparison(off, RunStats.of(_synthetic_run("ours-tracing-slow", scale=2.0)), traced)
    assert verdict == "GROWTH with tracing on: voice-to-voice p50"
    lost = _synthetic_run("ours-tracing-slow")
    lost.calls[0].turns[0].no_answer = True  # one more turn the bot never answered
    _, verdict = tracing_comparison(off, RunStats.of(lost), traced)
    assert verdict.startswith("GROWTH with tracing on: 1 more unanswered turn(s)")
    _, verdict = tracing_comparison(off, RunStats.of(_synthetic_run("ours-tracing")), {})
    assert verdict.startswith("not judged")  # no call placed: nothing to say
    report = render_report([_synthetic_run("ours"), *(_synthetic_run(s) for s in TRACING_RUNS)], {}, LatencyConfig(),
                           tracing={s: traced for s in TRACING_RUNS})
    assert report.count("## Tracing on vs off") == 2 and "Verdict: no growth" in report
