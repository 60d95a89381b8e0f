"""``bench --save-baseline`` / ``bench --compare``: the noise rule, what fails, and one real regression."""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.testing.phone import FAST_VOICE
from bot.tools import baseline
from bot.tools.bench import RunStats
from tests.conftest import ROOT
from tests.tools.conftest import GOODBYE_WINDOW_S, _synthetic_run

SETTINGS = {"calls": 2, "rounds": 1, "overrides": [], "turn_set": "t.toml", "fake_llm": None}
META = {"date": "2026-12-04", "pipecat": "1.14.0", "git": "abc"}


def _base(scale: float = 1.0) -> dict:
    b = baseline.jsonable(baseline.summarize_run(RunStats.of(_synthetic_run(scale=scale)), meta=META,
                                                 settings=SETTINGS))
    b["stages"]["greeting"] = _few([100.0, 104.0, 110.0, 121.0])  # four calls' greetings (the run has two)
    return b


def _stage(b: dict, name: str, factor: float = 1.0, plus: float = 0.0) -> dict:
    out = copy.deepcopy(b)
    st = out["stages"][name]
    st["values"] = [v * factor + plus for v in st["values"]]
    st["p50"], st["p90"] = st["p50"] * factor + plus, st["p90"] * factor + plus
    return out


def _regressions(base, new, rule=baseline.NoiseRule()) -> list[str]:
    return [f.what for f in baseline.compare(base, new, rule) if f.regression]


def test_a_baseline_holds_stages_calls_share_providers_hatches_and_machine():
    b = _base()
    assert b["format"] == baseline.FORMAT
    assert b["stages"]["voice_to_voice"]["n"] == 4 and b["stages"]["voice_to_voice"]["p50"] == pytest.approx(950, abs=1)
    assert len(b["stages"]["voice_to_voice"]["values"]) == 4
    assert b["llm_calls_per_turn"] == {"mean": 0.75, "max": 1, "per_model_turn": 1.0}
    assert b["shortcut_share"] == pytest.approx(0.25)
    assert b["providers"]["vocoder"] == ["CPUExecutionProvider"]
    assert "STT on CPU (int8); production runs float16 on CUDA" in b["escape_hatches"]
    assert b["failed_turns"] == 1  # the synthetic run's unanswered turn
    assert b["machine"]["cpus"] and b["machine"]["cpu"]
    assert b["config"]["stt"]["beam_size"] == 1


def test_the_greeting_is_a_stage_of_the_baseline_one_value_per_call_judged_like_the_others():
    raw = baseline.summarize_run(RunStats.of(_synthetic_run()), meta=META, settings=SETTINGS)
    assert raw["stages"]["greeting"]["values"] == [100.0, 100.0]  # media stream start -> first audio out
    b = _base()
    assert _regressions(b, _stage(b, "greeting", 3.0)) == ["greeting"]  # x3, +200 ms and more
    assert _regressions(b, _stage(b, "greeting", 1.0, 50.0)) == []  # +50 ms: noise
    one = copy.deepcopy(b)
    one["stages"]["greeting"] = _few([900.0])  # one call whose greeting took 0.9 s
    assert _regressions(b, one) == ["greeting"]
    text = baseline.render(b, one, baseline.compare(b, one), baseline.NoiseRule(), base_path="b.json")
    assert "**SLOWER**" in text.split("| greeting | 4/1 |")[1].split("\n")[0]


def test_a_baseline_saved_before_the_greeting_was_recorded_does_not_judge_it_and_says_so():
    old = _base()
    del old["stages"]["greeting"]
    findings = [f for f in baseline.compare(old, _base()) if f.what == "greeting"]
    assert [(f.regression, f.unjudged) for f in findings] == [(False, True)] and "save it again" in findings[0].detail
    assert baseline.failed(findings) and not baseline.failed(findings, allow_unjudged=True)


def test_the_same_run_passes_and_round_trips_through_the_file(tmp_path):
    b = _base()
    path = baseline.save(tmp_path / "b.json", b)
    again = baseline.load(path)
    assert again == json.loads(json.dumps(b))
    assert _regressions(again, b) == []
    text = baseline.render(again, b, baseline.compare(again, b), baseline.NoiseRule(), base_path=str(path))
    assert "Verdict: ok, every stage within noise" in text and "SLOWER" not in text and "**not judged**" not in text


@pytest.mark.parametrize(("factor", "plus", "slower"), [
    (1.7, 0.0, True),    # x1.7 and +665 ms on voice_to_voice
    (1.55, 0.0, False),  # +522 ms but only x1.55: within noise (one config moved x1.52 run to run)
    (1.0, 95.0, False),  # under the +100 ms floor
    (1.0, 700.0, True),  # x1.74, +700 ms
])  # fmt: skip
def test_a_stage_is_slower_only_past_both_the_ratio_and_the_margin(factor, plus, slower):
    b = _base()
    assert ("voice_to_voice" in _regressions(b, _stage(b, "voice_to_voice", factor, plus))) is slower


def test_p90_is_judged_only_with_enough_turns_on_both_sides():
    b = _base()
    worse_tail = copy.deepcopy(b)
    worse_tail["stages"]["voice_to_voice"]["p90"] *= 2  # 4 turns: the p90 is one turn
    assert _regressions(b, worse_tail) == []
    for x in (b, worse_tail):
        x["stages"]["voice_to_voice"]["n"] = 20
    assert _regressions(b, worse_tail) == ["voice_to_voice"]


def test_a_rule_from_the_command_line_and_a_bad_one():
    rule = baseline.NoiseRule.from_args(argparse.Namespace(noise_ratio=2.5, noise_ms=300.0))
    assert (rule.ratio, rule.min_ms) == (2.5, 300.0)
    assert baseline.NoiseRule.from_args(argparse.Namespace()) == baseline.NoiseRule()
    with pytest.raises(ValueError, match="--noise-ratio must be >= 1"):
        baseline.NoiseRule.from_args(argparse.Namespace(noise_ratio=0.8, noise_ms=None))
    b = _base()
    assert _regressions(b, _stage(b, "voice_to_voice", 2.0)) == ["voice_to_voice"]
    assert _regressions(b, _stage(b, "voice_to_voice", 2.0), rule) == []


def test_a_short_stage_is_not_failed_on_a_ratio_alone():
    b = _base()
    # The synthetic transport stage is ~10 ms: x3 is +20 ms, a scheduler hiccup, not a regression.
    assert _regressions(b, _stage(b, "transport", 3.0)) == []


def _few(values: list[float]) -> dict:
    return {"n": len(values), "p50": baseline.percentile(values, 50), "p90": baseline.percentile(values, 90),
            "p99": baseline.percentile(values, 99), "values": values}


def test_a_stage_with_too_few_turns_is_not_judged_and_fails_unless_allowed_but_a_stage_that_vanished_fails():
    b = _base()
    few = copy.deepcopy(b)
    few["stages"]["llm"] = _few([b["stages"]["llm"]["p50"], b["stages"]["llm"]["p50"] * 1.1])
    findings = baseline.compare(b, few)
    assert _regressions(b, few) == [] and [f.what for f in findings if f.unjudged] == ["llm"]
    assert baseline.failed(findings) and not baseline.failed(findings, allow_unjudged=True)
    gone = copy.deepcopy(b)
    gone["stages"]["llm"] = {"n": 0, "p50": None, "p90": None, "p99": None, "values": []}
    assert _regressions(b, gone) == ["llm"]


def test_the_verdict_never_says_within_noise_about_a_stage_it_skipped():
    """The issue's report: llm_first_token 191 -> 928 ms from 2 turns, table "ok", "within noise", exit 0."""
    b = _base()
    few = copy.deepcopy(b)
    few["stages"]["llm_first_token"] = _few([60.0, 61.0])  # not slower, but 2 turns
    findings = baseline.compare(b, few)
    text = baseline.render(b, few, findings, baseline.NoiseRule(), base_path="b.json")
    assert "| llm_first_token | 3/2 |" in text and "| **not judged** |" in text.split("| llm_first_token |")[1]
    assert "within noise" not in text and "Verdict: **FAIL**, not judged (too few turns): llm_first_token" in text
    allowed = baseline.render(b, few, findings, baseline.NoiseRule(), base_path="b.json", allow_unjudged=True)
    verdict = allowed.split("Verdict:")[1]
    assert verdict.startswith(" ok for endpointing, stt, llm, tts, transport, voice_to_voice, greeting (within noise")
    assert "NOT judged (too few turns, --allow-unjudged): llm_first_token" in verdict
    both = copy.deepcopy(b)
    for st in both["stages"].values():
        st.update(n=2, values=st["values"][:2])
    text = baseline.render(both, both, baseline.compare(both, both), baseline.NoiseRule(), base_path="b.json",
                           allow_unjudged=True)
    assert "within noise" not in text and "Verdict: no stage judged" in text and "Verdict: ok" not in text


@pytest.mark.parametrize(("rule", "slower"), [(baseline.NoiseRule(), True),
                                              (baseline.NoiseRule(ratio=2.5, min_ms=300.0), True)])
def test_one_turn_of_a_much_slower_llm_fails_naming_the_stage(rule, slower):
    """One call, the first token at 900 ms against a 150 ms baseline: too few turns for a p50, but
    every turn is beyond the baseline's p90 x ratio, its p90 + margin and its slowest turn."""
    b = _base()
    b["stages"]["llm_first_token"] = _few([150.0, 155.0, 160.0, 170.0, 190.0])
    one = copy.deepcopy(b)
    one["stages"]["llm_first_token"] = _few([928.0])
    findings = [f for f in baseline.compare(b, one, rule) if f.what == "llm_first_token"]
    assert [f.regression for f in findings] == [slower] and "every one of 1 turn(s) (928 ms)" in findings[0].detail
    text = baseline.render(b, one, baseline.compare(b, one, rule), rule, base_path="b.json")
    assert "**SLOWER**" in text.split("| llm_first_token |")[1].split("\n")[0]
    assert "Verdict: **FAIL**, 1 regression(s): llm_first_token" in text


def test_few_turns_within_the_baselines_own_spread_are_not_called_slower():
    b = _base()
    b["stages"]["stt"] = _few([900.0, 1000.0, 1100.0, 1200.0, 3100.0])  # one 3.1 s outlier in the baseline
    for values in ([2900.0], [1000.0, 4000.0]):  # beyond p90 x1.6 but not the slowest; one turn ordinary
        one = copy.deepcopy(b)
        one["stages"]["stt"] = _few(values)
        found = [f for f in baseline.compare(b, one) if f.what == "stt"]
        assert [(f.regression, f.unjudged) for f in found] == [(False, True)], found


def test_more_llm_calls_per_turn_fail():
    b = _base()
    new = _base()
    new["llm_calls_per_turn"] = {"mean": 1.2, "max": 2, "per_model_turn": 1.6}
    assert _regressions(b, new) == ["llm_calls"]
    chained = _base()  # no turn over one call, but more model turns making two calls on average
    chained["llm_calls_per_turn"]["per_model_turn"] = 1.2
    assert _regressions(b, chained) == ["llm_calls"]


def test_another_cut_of_the_same_speech_into_turns_is_no_regression():
    b = _base()
    new = _base()  # one more shortcut turn: the mean over all turns fell, then rose; per model turn still 1
    new["llm_calls_per_turn"] = {"mean": 0.86, "max": 1, "per_model_turn": 1.0}
    assert _regressions(b, new) == []


def test_a_provider_change_fails_naming_the_session():
    b = _base()
    b["providers"]["vocoder"] = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    findings = [f for f in baseline.compare(b, _base()) if f.regression]
    assert [f.what for f in findings] == ["provider"] and "vocoder" in findings[0].detail


def test_an_escape_hatch_turned_on_fails():
    b = _base()
    new = _base()
    new["escape_hatches"] = sorted(new["escape_hatches"] + ["CUDA graphs off (vllm --enforce-eager)"])
    findings = [f for f in baseline.compare(b, new) if f.regression]
    assert [f.what for f in findings] == ["escape_hatches"] and "enforce-eager" in findings[0].detail


def test_failed_turns_fail_and_a_machine_or_config_change_is_only_noted():
    b = _base()
    new = _base()
    new["failed_turns"] += 2
    new["machine"]["cpu"] = "another CPU"
    new["config"]["stt"]["beam_size"] = 5
    found = baseline.compare(b, new)
    assert [f.what for f in found if f.regression] == ["failed_turns"]
    assert {"machine", "config"} <= {f.what for f in found if not f.regression}


def _overloaded_run(lag_ms: float = 2800.0) -> dict:
    """The synthetic run with the caller simulator behind its clock by ``lag_ms`` over one turn's speech."""
    run = _synthetic_run()
    run.calls[1].max_send_lag_ms = lag_ms
    run.calls[1].turns[1].send_lag_ms = lag_ms  # the turn the server never answered
    b = baseline.jsonable(baseline.summarize_run(RunStats.of(run), meta=META, settings=SETTINGS))
    b["stages"]["greeting"] = _base()["stages"]["greeting"]
    return b


def test_the_callers_send_lag_is_part_of_the_run_boiled_down():
    assert _base()["caller_send_lag_ms"] == {"max": 0.0, "speech_max": 0.0}
    assert _overloaded_run(900.0)["caller_send_lag_ms"] == {"max": 900.0, "speech_max": 900.0}


def test_a_lost_turn_on_an_overloaded_machine_is_not_judged_and_has_its_own_exit_code():
    b, new = _base(), _overloaded_run(2800.0)
    new["failed_turns"] += 1  # the CI run beside full load: one more lost turn
    new = _stage(new, "stt", 3.0, 500.0)  # and Whisper starved too
    findings = baseline.compare(b, new, baseline.NoiseRule(ratio=2.5, min_ms=300))
    assert baseline.outcome(findings) == "overloaded"
    assert baseline.exit_code(findings) == baseline.OVERLOADED_EXIT == 4
    assert baseline.failed(findings)  # never "ok"
    text = baseline.render(b, new, findings, baseline.NoiseRule(ratio=2.5, min_ms=300), base_path="b.json")
    verdict = text.split("Verdict:")[1]
    assert "not judged: the bench machine was overloaded (send lag 2800 ms)" in verdict
    assert "FAIL" not in verdict and "within noise" not in verdict
    assert "set aside: stt, failed_turns" in verdict


def test_the_same_lost_turn_on_a_quiet_machine_is_a_regression_as_before():
    b, new = _base(), _overloaded_run(40.0)  # a 40 ms hiccup: under the mark
    new["failed_turns"] += 1
    findings = baseline.compare(b, new)
    assert [f.what for f in findings if f.regression] == ["failed_turns"]
    assert baseline.outcome(findings) == "fail" and baseline.exit_code(findings) == 1
    assert baseline.exit_code(baseline.compare(b, _overloaded_run(40.0))) == 0
    assert "Verdict: ok" in baseline.render(b, _base(), baseline.compare(b, _base()), baseline.NoiseRule(),
                                            base_path="b.json")


def test_the_mark_is_the_rules_and_comes_from_the_command_line():
    new = _overloaded_run(700.0)
    assert baseline.overload(new) is not None  # default mark 500 ms
    assert baseline.overload(new, baseline.NoiseRule(send_lag_mark_ms=1000.0)) is None
    rule = baseline.NoiseRule.from_args(argparse.Namespace(send_lag_mark_ms=1000.0))
    assert rule.send_lag_mark_ms == 1000.0
    with pytest.raises(ValueError, match="--send-lag-mark-ms must be > 0"):
        baseline.NoiseRule.from_args(argparse.Namespace(send_lag_mark_ms=0.0))
    old = _base()
    del old["caller_send_lag_ms"]  # a run boiled down before the lag was recorded is judged as before
    assert baseline.overload(old) is None


def test_an_overloaded_run_still_fails_on_what_load_cannot_move():
    b, new = _base(), _overloaded_run(2800.0)
    new["providers"]["vocoder"] = ["CUDAExecutionProvider"]
    new["failed_turns"] += 1
    findings = baseline.compare(b, new)
    assert baseline.outcome(findings) == "fail" and baseline.exit_code(findings) == 1
    verdict = baseline.render(b, new, findings, baseline.NoiseRule(), base_path="b.json").split("Verdict:")[1]
    assert "**FAIL**, provider changed" in verdict and "overloaded (send lag 2800 ms)" in verdict


def _gate(tmp_path, rc: int, compare_md: str) -> subprocess.CompletedProcess:
    """scripts/perf_gate.sh with a stand-in for the bench that writes ``compare_md`` and exits ``rc``."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "perf_gate.sh").write_text((ROOT / "scripts" / "perf_gate.sh").read_text())
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nwhile [ "$1" != --out ]; do shift; done\nmkdir -p "$2"\n'
                      f"cat > \"$2/compare.md\" <<'EOF'\n{compare_md}\nEOF\nexit {rc}\n")
    python.chmod(0o755)
    return subprocess.run(["bash", str(tmp_path / "scripts" / "perf_gate.sh")], capture_output=True, text=True,
                          timeout=30, env={"PATH": "/usr/bin:/bin", "PERF_GATE_OUT": str(tmp_path / "out")})


@pytest.mark.parametrize(("rc", "verdict", "gate_rc", "said"), [
    (4, "Verdict: **not judged: the bench machine was overloaded (send lag 2812 ms)**; ...", 4,
     "perf gate: not judged: the bench machine was overloaded (send lag 2812 ms)"),
    (1, "Verdict: **FAIL**, 1 regression(s): failed_turns", 1, "perf gate: FAILED (exit 1)"),
    (0, "Verdict: ok, every stage within noise of the baseline.", 0, "perf gate: ok"),
])  # fmt: skip
def test_the_perf_gate_says_not_judged_with_its_own_exit_code(tmp_path, rc, verdict, gate_rc, said):
    done = _gate(tmp_path, rc, verdict)
    assert done.returncode == gate_rc, done.stdout + done.stderr
    assert said in done.stdout + done.stderr and verdict in done.stdout


def test_a_missing_or_foreign_baseline_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no such baseline.*--save-baseline"):
        baseline.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a baseline: format is 'something else'"):
        baseline.load(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a baseline"):
        baseline.load(bad)


def test_the_shipped_cpu_baseline_loads_and_covers_every_stage():
    b = baseline.load(ROOT / "bench" / "baseline-cpu.json")
    assert set(b["stages"]) >= {"stt", "llm_first_token", "llm", "tts", "voice_to_voice"}
    assert b["stages"]["voice_to_voice"]["n"] >= 10 and b["llm_calls_per_turn"]["max"] == 1
    assert b["providers"] and all(p == ["CPUExecutionProvider"] for p in b["providers"].values())


# ----------------------------------------------------------------------------------- a real regression


def _bench(tmp_path, name: str, turns, whisper_dir, standin_tts_dir, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run_bot.py"), "bench", "--calls", "1", "--rounds", "1", "--turns", str(turns),
         "--out", str(tmp_path / name), "--no-progress", "--answer-timeout", "60",
         "--set", f"stt.model='{whisper_dir}'", "--set", f"tts.model_dir='{standin_tts_dir}'",
         "--set", "tts.warmup_lengths=[5]", "--set", f"stt.window_s={GOODBYE_WINDOW_S}",
         "--set", FAST_VOICE, "--set", "llm.first_token_timeout_ms=10000",
         "--set", "llm.filler_after_ms=10000", *extra],  # a slow model is timed, not covered or cut
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _model_turns(out: Path) -> int:
    """The bench's turns that the server's records say went to the model."""
    rows = [json.loads(line) for line in (out / "turns.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return sum(1 for r in rows if (r.get("server") or {}).get("route") == "llm")


# That the same config passes against a saved baseline is the CI perf gate's own check
# (scripts/perf_gate.sh: the shipped config against bench/baseline-cpu.json, with the gate's rule).
@pytest.mark.slow  # two real bench runs (real Whisper, the stand-in TTS)
def test_a_slower_llm_fails_compare_naming_the_stage(tmp_path, whisper_dir, standin_tts_dir):
    audio = ROOT / "bench" / "audio"
    turns = tmp_path / "turns.toml"
    turns.write_text(
        f'[[turns]]\nid = "trash"\nwav = "{audio / "trash.wav"}"\nroute = "llm"\nlabel = "trash"\n\n'
        f'[[turns]]\nid = "bye"\nwav = "{audio / "bye.wav"}"\nroute = "shortcut"\nlabel = "bye"\n\n'
        '[[calls]]\nturns = ["trash", "trash", "trash", "bye"]\n',
        encoding="utf-8",
    )
    saved = tmp_path / "base.json"
    first = _bench(tmp_path, "base", turns, whisper_dir, standin_tts_dir, "--save-baseline", str(saved))
    assert first.returncode == 0, first.stderr[-3000:]
    # One call of three "trash" turns and a "bye" (one greeting and one hang-up per run, not three: 40 s less).
    # One first token per turn the model answered: the three "trash" turns, and a "bye" that real Whisper
    # misheard on a starved machine (CI once: "아만룡히 개 배용") goes to the model too and counts.
    base_llm = _model_turns(tmp_path / "base")
    assert base_llm >= 3 and baseline.load(saved)["stages"]["llm_first_token"]["n"] == base_llm

    # The gate's rule (scripts/perf_gate.sh): real Whisper on a loaded 2-core box moves x1.5 run to run.
    # The slowdown is far past it: on a loaded CI machine the 150 ms fake's first token took 324 ms (p50) in
    # the baseline, so 600 ms (634 measured) was within x2.5 of it.
    gate = ("--noise-ratio", "2.5", "--noise-ms", "300")
    slow = _bench(tmp_path, "slow", turns, whisper_dir, standin_tts_dir, "--compare", str(saved),
                  "--fake-llm-first-token-ms", "2000", *gate)
    assert slow.returncode == 1, slow.stdout[-3000:] + slow.stderr[-3000:]
    table = (tmp_path / "slow" / "compare.md").read_text()
    counts = f"| llm_first_token | {base_llm}/{_model_turns(tmp_path / 'slow')} |"
    assert counts in table and "**REGRESSION** llm_first_token: p50" in table
    assert "Verdict: **FAIL**" in table and "llm_first_token" in table.split("Verdict:")[1]
    assert "| stt |" in table and "**REGRESSION** stt" not in table
    # One turn of a slower model (the few-turns rule) and stages with too few turns ("not judged"): the
    # same compare on figures, tests above (a third bench run here took ~70 s of the suite for them).
