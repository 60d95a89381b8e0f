"""The developer commands, run as a user runs them: transcribe, say, models, serve without models."""

import json
import subprocess
import sys
import wave

import pytest

from tests.conftest import FIXTURES, ROOT


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow  # a subprocess or a real model
def test_transcribe_prints_the_words_and_timings(whisper_dir):
    out = run("transcribe", str(FIXTURES / "en_hello.wav"), "--json", "--set", f"stt.model='{whisper_dir}'",
              "--set", "stt.language='en'", "--set", "stt.hotwords=''")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "hello" in result["text"].lower()
    assert result["audio_secs"] > 1 and result["transcribe_ms"] > 0 and result["rtf"] > 0


@pytest.mark.slow  # a subprocess or a real model
def test_say_prints_the_normalized_text_first_and_writes_a_wav(standin_tts_dir, tmp_path):
    wav_path = tmp_path / "out.wav"
    out = run("say", "오후 2시 30분에 15,000원입니다", "--out", str(wav_path), "--rate", "8000",
              "--set", f"tts.model_dir='{standin_tts_dir}'")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[0] == "오후 두 시 삼십 분에 만 오천 원입니다"
    with wave.open(str(wav_path)) as w:
        assert w.getframerate() == 8000 and w.getnchannels() == 1 and w.getnframes() > 8000


@pytest.mark.slow  # a subprocess or a real model
def test_say_as_the_readme_writes_it_needs_no_out_and_refuses_what_the_voice_cannot_speak(standin_tts_dir, tmp_path):
    def say(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), "say", *args, "--set",
                               f"tts.model_dir='{standin_tts_dir}'"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)  # fmt: skip

    out = say("접수되었습니다")
    assert out.returncode == 0, out.stderr[-2000:]
    with wave.open(str(tmp_path / "say.wav")) as w:  # the default --out, in the working directory
        assert w.getnframes() > 0
    (tmp_path / "say.wav").unlink()
    # The stand-in has no Cyrillic: said, exit 1, no silent empty WAV (Supertonic 3 speaks Russian).
    out = say("Добрый день", "--language", "ru")
    assert out.returncode == 1 and "STAND-IN" in out.stderr and not (tmp_path / "say.wav").exists()


@pytest.mark.slow  # a subprocess or a real model
def test_a_missing_model_stops_startup_with_how_to_get_it(tmp_path):
    out = run("serve", "--set", f"stt.model='{tmp_path / 'nowhere'}'", timeout=60)
    assert out.returncode == 1
    assert "run_bot.py models" in out.stderr and "--offline" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow  # a subprocess or a real model
def test_requiring_tensorrt_on_a_cpu_machine_refuses_to_start(whisper_dir, standin_tts_dir):
    out = run("serve", "--set", f"stt.model='{whisper_dir}'", "--set", f"tts.model_dir='{standin_tts_dir}'",
              "--set", "tts.require_provider='tensorrt'", "--set", "tts.providers=['tensorrt','cuda','cpu']", timeout=90)
    assert out.returncode == 1
    assert "CPUExecutionProvider" in out.stderr and "vector_estimator" in out.stderr


# --- the tables print records: no terminal control sequence gets through (issue 35) ---------------------------

HOSTILE = "중앙로\x1b[31m 12\x1b[0m번길\x1b]0;owned\x07 \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x9b2J|x\n\rnext\u202e"


def _no_controls(text: str) -> None:
    import re

    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), repr(text)


def _records(tmp_path):
    import datetime as dt

    from bot.config import load_config
    from bot.store.db import Store

    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = Store(url)
    store.migrate()
    t0 = dt.datetime.now(dt.UTC)
    sid = "CA" + "c" * 32
    store.start_call(sid, caller="+8210\x1b[2J12345678", worker="w\x1b]0;x\x07", qa=False, started_at=t0)
    store.save_turn(sid, {"index": 1, "route": "llm\x1b[5m", "transcript": HOSTILE})
    store.end_call(sid, reason="caller_hangup\x1b[8m", ended_at=t0)
    number = store.create_ticket(call_sid=sid, category="street_lights", location=HOSTILE, time="내일\x1b[1A",
                                 excerpt=HOSTILE)
    store.request_callback(call_sid=sid, after=t0, reason=HOSTILE, reception_no=number)
    store.add_staff("kim", role="department", department="dept\x1b[2Jroad", password_hash="x")
    store.close()
    return load_config(overrides=[f"records.url='{url}'"]), number


def test_tickets_calls_callbacks_and_staff_tables_strip_control_sequences(tmp_path):
    """Seen before: `run_bot.py tickets` printed a location holding ESC[31m and an OSC title raw."""
    import io
    from types import SimpleNamespace

    from bot.tools.desk import list_callbacks, list_calls, list_tickets, update_ticket
    from bot.tools.staff import run_staff

    config, number = _records(tmp_path)
    outputs = {}
    for name, fn in (("tickets", lambda out: list_tickets(config, None, out)),
                     ("calls", lambda out: list_calls(config, None, False, out)),
                     ("calls --json", lambda out: list_calls(config, None, True, out)),
                     ("ticket", lambda out: update_ticket(config, number, None, out)),
                     ("callbacks", lambda out: list_callbacks(config, "all", out)),
                     ("staff list", lambda out: run_staff(config, SimpleNamespace(action="list", name=None),
                                                          out=out, err=io.StringIO()))):
        out = io.StringIO()
        assert fn(out) == 0, name
        outputs[name] = out.getvalue()
        _no_controls(outputs[name])
    row = next(line for line in outputs["tickets"].splitlines() if line.startswith(f"| {number} |"))
    assert "중앙로 12번길 link \\|x next" in row and row.count(" | ") == 6  # one row, seven cells
    assert "deptroad" in outputs["staff list"]
    assert json.loads(outputs["ticket"].strip())["location"].startswith("중앙로\x1b[31m")  # the JSON keeps the text


async def test_a_calls_turns_printed_by_run_bot_call_strip_control_sequences(monkeypatch):
    import io

    import httpx

    from bot.tools import call

    sid = "CA" + "d" * 32
    turns = [{"call_id": sid, "index": 1, "route": "llm", "llm_calls": 1, "transcript": HOSTILE, "reply": HOSTILE,
              "stages_ms": {}}]
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"turns": turns}))
    real = httpx.AsyncClient
    monkeypatch.setattr(call.httpx, "AsyncClient", lambda **kw: real(transport=transport, **kw))
    out = io.StringIO()
    await call._print_turns("http://bot.test", sid, 0.0, out, "token")
    assert "caller: 중앙로 12번길" in out.getvalue()
    _no_controls(out.getvalue())
