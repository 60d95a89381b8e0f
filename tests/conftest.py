"""Shared fixtures: offline models (Whisper base from PyPI, a stand-in Supertonic) and fakes."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from bot.testing.phone import offline_bot_overrides  # noqa: F401  (shared by the tests)
from bot.testing.process import BotProcess, FakeTwilioAPI, free_port  # noqa: F401  (shared by the tests)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def whisper_dir(tmp_path_factory) -> Path:
    from bot.modelfiles.manifest import assemble_offline_whisper, offline_whisper_ready

    cached = ROOT / "models" / "whisper-base"
    if offline_whisper_ready(cached):
        return cached
    return assemble_offline_whisper(tmp_path_factory.mktemp("models") / "whisper-base")


@pytest.fixture(scope="session")
def standin_tts_dir(tmp_path_factory) -> Path:
    from bot.modelfiles.standin import build_standin_model

    path = tmp_path_factory.mktemp("supertonic") / "supertonic-standin"
    build_standin_model(path)
    return path


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's package), started for this test session."""
    from bot.testing.postgres import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer().start()
    except PostgresUnavailable as e:
        if os.environ.get("CI_REQUIRE_POSTGRES"):
            raise
        pytest.skip(f"no PostgreSQL here: {e}")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fake_llm():
    """A fake vLLM server for one test module (a module may define its own with other delays)."""
    from bot.testing.fake_llm import FakeLLM

    with FakeLLM(first_token_delay=0.15, token_delay=0.01) as fake:
        yield fake


@pytest.fixture(scope="module")
def twilio_api():
    """A fake Twilio REST API for one test module (hang-ups and redirects land in ``hangups``)."""
    with FakeTwilioAPI() as api:
        yield api


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A fresh records database: SQLite in WAL mode, then a database on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'calls.db'}"
    return request.getfixturevalue("postgres").create_database(f"t_{uuid.uuid4().hex[:12]}")


# The longest modules, longest first, measured (`pytest -n 3 --durations`, 2026-12-05, a shared 2-core
# box: seconds per module): the line's faults behind nginx (661), a real bench run (521), the
# scale-out (306), the fault lab (265), the capacity search (243), the bench (205), ... Under
# `-n 4 --dist loadscope` a module runs on one worker (its processes start once); these go out first
# so that the quick modules fill in around them.
RUN_FIRST = (
    "tests/call/test_line_faults.py",
    "tests/tools/test_baseline.py",
    "tests/app/test_scaleout.py",
    "tests/call/test_faults.py",
    "tests/tools/test_capacity.py",
    "tests/tools/test_bench.py",
    "tests/call/test_phone_call.py",
    "tests/call/test_foreign_resident_calls.py",
    "tests/tools/test_abuse_bench.py",
    "tests/telemetry/test_tracing_call.py",
    "tests/call/test_phone_intake.py",
    "tests/test_install_sets.py",
    "tests/test_docs_commands.py",
    "tests/app/test_stock_bench.py",
    "tests/aftercall/test_after_call_phone.py",
    "tests/desk/test_desk_browser.py",
    "tests/call/test_backchannel.py",
)


def pytest_collection_modifyitems(config, items):
    """Longest modules first, then every module that holds a slow test, then the rest (stable)."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}

    def rank(item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        if path in RUN_FIRST:
            return 0, RUN_FIRST.index(path)
        return (1 if path in slow else 2), 0

    items.sort(key=rank)
