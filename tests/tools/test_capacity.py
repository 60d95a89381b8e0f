"""``bench --find-capacity``: the stopping rule over per-level figures, and one short real search."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from bot.testing.phone import FAST_VOICE
from bot.tools.bench.capacity import (
    LevelFigures,
    find_capacity,
    judge_level,
    next_level,
    render_capacity,
    rounds_for_turns,
)
from tests.conftest import ROOT
from tests.tools.conftest import GOODBYE_WINDOW_S

BUDGET = 1200.0


def _level(calls: int, p90: float = 900.0, lag: float = 5.0, **kw) -> LevelFigures:
    return LevelFigures(calls=calls, turns=kw.pop("turns", 12), v2v_p50=p90 * 0.8, v2v_p90=p90, lag_p99=lag, **kw)


def _search(levels: dict[int, LevelFigures], max_calls: int = 16):
    tried = []

    def measure(calls: int, rounds: int) -> LevelFigures:
        tried.append(calls)
        return levels[calls]

    return find_capacity(measure, max_calls=max_calls, budget_ms=BUDGET, min_turns=10), tried


def test_the_search_doubles_then_narrows_to_the_last_level_that_held():
    result, tried = _search({1: _level(1), 2: _level(2), 4: _level(4, p90=1500.0), 3: _level(3, p90=1150.0)})
    assert tried == [1, 2, 4, 3]
    assert result.held == 3 and result.broke[0].calls == 4 and result.unjudged is None
    assert result.figure() == ("Capacity: 3 concurrent call(s) per worker (held at 3; broke at 4 on voice_to_voice "
                               "p90: voice_to_voice p90 1500 ms > 1200 ms)")


def test_event_loop_lag_breaks_a_level_on_its_own_and_is_named():
    result, tried = _search({1: _level(1, lag=8.0), 2: _level(2, lag=26.5)})
    assert tried == [1, 2] and result.held == 1
    assert "broke at 2 on event-loop lag p99: event-loop lag p99 26.5 ms > 20 ms" in result.figure()
    both = judge_level(_level(2, p90=1300.0, lag=30.0), budget_ms=BUDGET)
    assert both.broke_on == ("voice_to_voice p90", "event-loop lag p99")


def test_a_level_with_an_errored_call_or_too_few_turns_ends_the_search_unjudged():
    result, tried = _search({1: _level(1), 2: _level(2, errored=1), 4: _level(4)})
    assert tried == [1, 2] and result.unjudged is not None
    assert result.figure() == "Capacity NOT judged: at 2 call(s) 1 call(s) errored (held up to 1 before)"
    result, tried = _search({1: _level(1, turns=4)})
    assert tried == [1] and result.figure() == "Capacity NOT judged: at 1 call(s) 4 turn(s), fewer than 10"
    assert not judge_level(_level(1, lag=math.nan), budget_ms=BUDGET).judged  # no loop-lag figure: no verdict


def test_an_unanswered_turn_breaks_the_level_however_few_turns_it_has():
    v = judge_level(_level(2, turns=3, unanswered=1), budget_ms=BUDGET)
    assert v.judged and not v.held and v.broke_on == ("unanswered turns",)


def test_one_call_that_breaks_gives_zero_and_every_level_holding_gives_a_lower_bound():
    result, tried = _search({1: _level(1, p90=2798.0)})
    assert tried == [1] and result.held == 0
    assert result.figure() == ("Capacity: 0 calls: one call already breaks the limits (voice_to_voice p90 2798 ms "
                               "> 1200 ms)")
    result, tried = _search({n: _level(n) for n in (1, 2, 4, 5)}, max_calls=5)
    assert tried == [1, 2, 4, 5] and "at least 5 concurrent call(s) per worker" in result.figure()
    assert next_level({}, 1) == 1


def test_a_level_plays_enough_rounds_for_its_turns():
    rounds = rounds_for_turns(10, 2.75)  # the shipped turn set: 11 turns in 4 calls
    assert [rounds(n) for n in (1, 2, 3, 4, 8)] == [4, 2, 2, 1, 1]
    assert rounds_for_turns(10, 2.75, at_least=3)(8) == 3


def test_the_report_lists_every_level_and_ends_with_the_figure():
    result, _ = _search({1: _level(1), 2: _level(2, p90=1500.0, caller_lag_ms=80.0)})
    text = render_capacity(result, ["- config: config.toml"])
    row = "| 1 | 1 | 12 | 720 | 900 | 5.0 | 0 | 0 | 0 | - | held: voice_to_voice p90 900 ms, loop lag p99 5.0 ms |"
    assert row in text
    assert "| 2 | 1 | 12 |" in text and "the bench shares the machine" in text
    assert text.rstrip().endswith(result.figure())


@pytest.mark.slow  # a real server, real Whisper, two levels
def test_find_capacity_stops_and_prints_calls_per_worker(tmp_path, whisper_dir, standin_tts_dir):
    audio = ROOT / "bench" / "audio"
    turns = tmp_path / "turns.toml"
    turns.write_text(
        f'[[turns]]\nid = "trash"\nwav = "{audio / "trash.wav"}"\nroute = "llm"\nlabel = "trash"\n\n'
        f'[[turns]]\nid = "bye"\nwav = "{audio / "bye.wav"}"\nroute = "shortcut"\nlabel = "bye"\n\n'
        '[[calls]]\nturns = ["trash", "bye"]\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_bot.py"), "bench", "--find-capacity", "--capacity-max", "2",
         "--capacity-min-turns", "2", "--turns", str(turns), "--out", str(out), "--no-progress",
         "--answer-timeout", "60", "--set", f"stt.model='{whisper_dir}'", "--set", f"tts.model_dir='{standin_tts_dir}'",
         "--set", "tts.warmup_lengths=[5]", "--set", f"stt.window_s={GOODBYE_WINDOW_S}",
         "--set", FAST_VOICE],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figure = proc.stdout.rstrip().splitlines()[-1]
    assert figure.startswith("Capacity: "), proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert 1 <= len(rows) <= 2 and rows[0].startswith("| 1 | 1 | 2 |")  # one call, one round, its two turns
    # Level 1 breaking ends the search (0 calls); holding, level 2 is the last the search may try.
    assert ("0 calls" in figure) == (len(rows) == 1)
    assert (out / "capacity.md").read_text().rstrip().endswith(figure)
    assert "| voice_to_voice | 2 |" in (out / "level-1" / "report.md").read_text()
