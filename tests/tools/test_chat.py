"""``run_bot.py chat``: every caller line gets one JSON line within a bounded time, and the end of input ends it.

A keypad line that makes no entry yet ('*', '2', digits without '#', '1' outside a read-back) gets no answer on
the phone either: chat says so (route "none", the keys held) instead of waiting for an answer that never comes.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys

import pytest

from bot.config import load_config
from bot.tools.chat import run_chat
from tests.conftest import ROOT


@pytest.fixture
def config(tmp_path):
    # No LLM server: keypad lines are decided by rule; a records database of the test's own.
    return load_config(overrides=[f"records.url='sqlite:///{tmp_path / 'calls.db'}'",
                                  "llm.base_url='http://127.0.0.1:9/v1'"])  # fmt: skip


async def test_a_keypad_line_that_makes_no_entry_is_answered_with_the_keys_held(config):
    out = io.StringIO()
    code = await asyncio.wait_for(run_chat(config, io.StringIO("*\n2\n2026\n1\n0001#\n"), out), 30)
    assert code == 0
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["route"] for x in lines] == ["none", "none", "none", "none", "rule"], lines
    assert [x["keys_held"] for x in lines[:4]] == ["", "2", "22026", "220261"]
    assert all(x["reply"] == "" and x["llm_calls"] == 0 for x in lines[:4])
    assert "자리" in lines[4]["reply"]  # 2202610001: not a reception number's length, said by rule


@pytest.mark.slow  # a process: the README's own words
def test_chat_ends_on_end_of_input_after_a_keypad_line_without_an_answer(tmp_path):
    got = subprocess.run([sys.executable, "run_bot.py", "chat", "--set", f"records.url='sqlite:///{tmp_path / 'c.db'}'"],
                         input="*\n", cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    assert json.loads(got.stdout)["route"] == "none"


async def test_an_entry_whose_answer_never_comes_is_an_error_line_within_the_bound(config, monkeypatch):
    from bot.tools import chat

    monkeypatch.setattr(chat, "KEY_ANSWER_SECS", 0.5)
    monkeypatch.setattr(chat.DialogSession, "_answers", lambda self, entry: True)  # '*' "expects" an answer
    out = io.StringIO()
    assert await asyncio.wait_for(run_chat(config, io.StringIO("*\n0\n"), out), 30) == 0
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0] == {"route": "error", "reply": "", "error": "no answer within 0.5 s", "llm_calls": 0}
    assert lines[1]["route"] in ("shortcut", "rule") and lines[1]["reply"]  # '0': the next line is answered
