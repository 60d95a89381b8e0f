"""The callers' side of a run (the fault lab, the bench, ``run_bot.py call``) imports nothing once it runs.

A first import inside a run executes on the callers' event loop: the records API's header once pulled in
the whole app (0.5-2.5 s on a loaded 2-core machine), and every simulated caller being listened to then
heard a gap that was the test's own (the fault lab's "llm fails twice, no desk" row: a 2.5 s silence in
the middle of a canned closing, found with a stack dump of the stalled loop).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

PROBE = """
import sys
from types import SimpleNamespace
import bot.tools.faults, bot.tools.call, bot.tools.soak
from bot.testing.process import BotProcess
from bot.tools.bench.caller import Target
before = set(sys.modules)
headers = [BotProcess.records_headers.fget(SimpleNamespace(records_token="t")),
           Target.records_headers.fget(SimpleNamespace(records_token="t")),
           Target.records_headers.fget(SimpleNamespace(records_token=None))]
print(headers)
print(sorted(set(sys.modules) - before))
"""


def test_the_records_header_imports_nothing_once_the_callers_run():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    headers, imported = out.stdout.strip().splitlines()[-2:]
    assert headers == "[{'Authorization': 'Bearer t'}, {'Authorization': 'Bearer t'}, {}]"
    names = ast.literal_eval(imported)
    assert not names, f"{len(names)} modules imported mid-run, among them {[n for n in names if n.startswith('bot.')][:6]}"
