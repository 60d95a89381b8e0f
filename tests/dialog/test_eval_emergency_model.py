"""scripts/eval_emergency.py --llm: a failed model call is counted as failed, never as "none"; --limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.dialog.emergency import EmergencyRules

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = [sys.executable, str(ROOT / "scripts" / "eval_emergency.py")]
MISSED = "그 사람이 밤에 다시 온대요"  # an emergency the rules do not see


def test_a_failed_call_is_left_out_of_the_two_nets_not_counted_as_none(tmp_path: Path) -> None:
    from bot.testing.fake_llm import FakeLLM
    from bot.testing.responders import default_responder

    assert EmergencyRules.load().classify(MISSED) is None

    def responder(body: dict) -> dict | str:
        said = body["messages"][-1]["content"]
        if said == MISSED:  # an answer without the flag: not a "none"
            return {k: v for k, v in default_responder(body).items() if k != "emergency"}
        if "가로등" in said:
            return "not json"
        return default_responder(body) | {"emergency": "none"}

    table = tmp_path / "table.toml"
    table.write_text(f'[[case]]\ntext = "{MISSED}"\nexpect = "crime"\n\n'
                     '[[case]]\ntext = "불이 났어요"\nexpect = "fire"\n\n'
                     '[[case]]\ntext = "가로등이 꺼졌어요"\nexpect = "none"\n', encoding="utf-8")
    with FakeLLM(responder=responder, first_token_delay=0.0, token_delay=0.0) as fake:
        run = subprocess.run([*SCRIPT, "--table", str(table), "--llm", fake.base_url,
                              "--set", "llm.total_timeout_ms=20000"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout
    both = run.stdout.split("rules + the model's flag (1 model answers")[1]
    assert "on the 1 of 3 cases whose call answered" in both
    assert "crime             0    0    0     100.0%  100.0%" in both  # left out, not a miss the model made
    assert "(1 of them not judged: the call failed)" in run.stdout
    assert "calls failed: 2 of 3" in run.stdout and "crime 1, near misses 1" in run.stdout
    assert "seconds per call (answered, 4 at once): p50" in run.stdout
    assert "the model: " in run.stdout and "NOT JUDGED: 2 model calls failed" in run.stdout
    assert "; 20 s a call at most; --set llm.total_timeout_ms=20000" in run.stdout  # the settings measured with


def test_limit_takes_the_first_emergencies_and_near_misses(tmp_path: Path) -> None:
    rows = [("불이 났어요", "fire"), ("가로등이 꺼졌어요", "none"), ("사람이 쓰러졌어요", "medical"),
            ("불법 주차 신고요", "none"), ("집에 불이 났어요", "fire"), ("불편 사항 접수요", "none")]
    table = tmp_path / "table.toml"
    table.write_text("\n".join(f'[[case]]\ntext = "{t}"\nexpect = "{e}"\n' for t, e in rows), encoding="utf-8")
    run = subprocess.run([*SCRIPT, "--table", str(table), "--limit", "2"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "--limit 2: the first 2 emergencies and the first 2 near misses only, 4 of 6 cases" in run.stdout
    assert "4 cases: 2 emergencies, 2 near misses" in run.stdout
    fire = next(line for line in run.stdout.splitlines() if line.startswith("fire"))
    assert fire.split()[1:4] == ["1", "0", "0"], fire  # the second fire row is beyond the limit
    bad = subprocess.run([*SCRIPT, "--table", str(table), "--limit", "0"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--limit takes a count of 1 or more" in bad.stderr
