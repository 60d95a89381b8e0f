"""`run_bot.py abuse` end to end with small numbers: it starts the real server, attacks it, prints every figure.

The attacks themselves are pinned down in process (tests/app/test_abuse_capacity.py,
tests/app/test_abuse_sockets.py); this checks that the bench measures each figure on a real server
process and that the exit status follows the figures.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.testing.process import ROOT

pytestmark = pytest.mark.slow  # a real bot process

# Figures that depend on the desk's login limiter (bot/desk/auth.py); the rest are this line and sockets.
LOGIN_ROWS = ("login burst",)


def test_the_abuse_bench_measures_every_figure_within_its_limit(whisper_dir, standin_tts_dir, tmp_path):
    sets = [f"stt.model='{whisper_dir}'", "stt.language='en'", "stt.hotwords=''", f"tts.model_dir='{standin_tts_dir}'",
            "tts.warmup_lengths=[5]", "server.max_calls=3", "server.qa_max_calls=2",
            "server.qa_connect_timeout_secs=1.5", "server.media_prestart_per_client=3",
            "server.start_timeout_secs=1.5", "desk.login_attempts=3"]
    args = [sys.executable, str(ROOT / "run_bot.py"), "abuse", "--logins", "8", "--sockets", "6", "--offers", "4",
            "--starts", "28", "--work", str(tmp_path / "work")]
    for item in sets:
        args += ["--set", item]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = done.stdout
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and not line.startswith("| attack")
            and not line.startswith("|---")]
    assert rows, out + done.stderr[-3000:]
    by_attack: dict[str, list[list[str]]] = {}
    for row in rows:
        by_attack.setdefault(row[0].lstrip("| "), []).append(row)
    assert set(by_attack) == {"pre-start sockets", "QA offer flood", "malformed starts", "login burst"}, out
    for attack, attack_rows in by_attack.items():
        for row in attack_rows:
            within = row[-1].rstrip(" |")
            assert within != "NOT MEASURED", row
            if attack not in LOGIN_ROWS:
                assert within == "yes", (row, out)
    figures = {row[1]: row[2] for row in rows}
    assert figures["tracebacks in the server's log"] == "0"
    assert figures["a citizen's webhook during the flood"] == "stream"
    assert figures["accepted / refused of 6 from one address"] == "3 / 3", figures  # media_prestart_per_client 3
    assert figures["offers answered (of 4 with invented pc_ids)"] == "2", figures  # qa_max_calls 2
    all_within = all(row[-1].rstrip(" |") == "yes" for row in rows)
    assert done.returncode == (0 if all_within else 1), out
