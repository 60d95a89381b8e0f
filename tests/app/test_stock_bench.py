"""``run_bot.py bench --baseline stock``: the comparison with stock Pipecat runs end to end.

The stock server (``python -m bot.app.stock``) once failed every call in its greeting handler (its plain
``OpenAILLMService`` has no dialog policy) and the bench still exited 0 with an empty ratio table.
Now the stock session carries a policy of its own, and the bench exits 3 when any call of any
server errored or a ratio could not be computed (the rule itself: ``tests/tools/test_bench.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT


@pytest.mark.slow  # two bot servers one after the other (real Whisper, the stand-in TTS)
def test_one_short_call_against_stock_pipecat_gives_every_ratio(tmp_path, whisper_dir, standin_tts_dir):
    # English, like the other end-to-end tests: on espeak's Korean, stock Whisper (beam 5 and the
    # temperature ladder) sometimes decodes for over a minute and the turn is never answered, which
    # the bench rightly fails ("ratio could not be computed"); this test is about the plumbing.
    turns = tmp_path / "turns.toml"
    turns.write_text(
        f'[[turns]]\nid = "report"\nwav = "{FIXTURES / "en_report.wav"}"\nroute = "llm"\nlabel = "report"\n\n'
        '[[calls]]\nturns = ["report"]\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_bot.py"), "bench", "--calls", "1", "--rounds", "1", "--baseline", "stock",
         "--turns", str(turns), "--out", str(out), "--no-progress", "--answer-timeout", "60",
         "--set", f"stt.model='{whisper_dir}'", "--set", f"tts.model_dir='{standin_tts_dir}'",
         "--set", "tts.warmup_lengths=[5]", "--set", "stt.language='en'", "--set", "stt.hotwords=''"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    report = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + report[-3000:]
    assert "Bench: every call of every server completed, every ours/stock ratio computed." in report
    assert "Call problems" not in report
    stock_log = (out / "server-stock.log").read_text()
    assert "uncaught exception" not in stock_log and "has no attribute 'policy'" not in stock_log
    for measure in ("voice_to_voice", r"\*\*caller TTFA\*\*"):
        row = re.search(rf"^\| {measure} \| (\d+) \| (\d+) \| (\d+\.\d\d) \| (\d+) \| (\d+) \| (\d+\.\d\d) \|$", report,
                        re.MULTILINE)
        assert row, f"no ratio row for {measure}:\n{report}"
        assert float(row.group(3)) > 0 and float(row.group(6)) > 0
