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
