"""Phone, resident registration and card numbers never reach a log line or an API in full.

One function, ``bot.privacy.mask``, masks them in every format a caller or a log may write them; the
table below is every format, each with what must disappear and what it becomes. Then every sink:
loguru, the stdlib loggers uvicorn and the libraries under Pipecat use (a real uvicorn's ASGI
traceback), and Pipecat's per-turn LLM context dump, which stays out unless asked for by name.
"""

import os
import subprocess
import sys

import pytest
from loguru import logger

from bot.privacy import install_log_masking, mask, mask_stored, mask_turn
from tests.conftest import ROOT

# (written as, must not appear, masked as)
FORMATS = [
    ("caller +821012345678 connected", "12345678", "caller +82********78 connected"),
    ("+82 10-2222-3333", "2222-3333", "+82 **-****-**33"),
    ("+82-10-2222-3333", "2222-3333", "+82-**-****-**33"),
    ("+82 (10) 2222 3333", "2222 3333", "+82 (**) **** **33"),
    ("번호는 010-1234-5678 입니다", "1234-5678", "번호는 010-****-**78 입니다"),
    ("번호는 01012345678 입니다", "12345678", "번호는 010-****-**78 입니다"),
    ("010 1234 5678", "1234 5678", "010-****-**78"),
    ("010.1234.5678", "1234.5678", "010-****-**78"),
    ("(010)1234-5678", "1234-5678", "010-****-**78"),
    ("(010) 1234-5678", "1234-5678", "010-****-**78"),
    ("(02)123-4567", "123-4567", "02-****-**67"),
    ("02-123-4567", "123-4567", "02-****-**67"),
    ("공일공 일이삼사 오육칠팔", "일이삼사", "010-****-**78"),
    ("공일공일이삼사오육칠팔", "일이삼사", "010-****-**78"),
    ("제 번호는 공일공 일이삼사 오육칠팔이에요", "오육칠", "제 번호는 010-****-**78이에요"),
    ("영일영, 일이삼사, 오육칠팔", "일이삼사", "010-****-**78"),
    ("주민번호 900101-1234567", "1234567", "주민번호 900101-1******"),
    ("주민번호 9001011234567", "1234567", "주민번호 900101-1******"),
    ("구공공일공일 일이삼사오육칠", "일이삼사", "900101-1******"),
    ("주민번호는 구공공일공일 일이삼사오육칠이요", "일이삼사오육칠", "주민번호는 900101-1******이요"),
    ("카드 1234-5678-9012-3456", "5678-9012-3456", "카드 1234-****-****-****"),
    ("카드 1234 5678 9012 3456", "5678 9012 3456", "카드 1234-****-****-****"),
    ("카드 1234567890123456", "567890123456", "카드 1234-****-****-****"),
    ("amex 3782-822463-10005", "822463-10005", "amex 3782-****-****-****"),
    ("call CA0123456789abcdef0123456789abcdef", "456789abcdef0123456789abcdef", "call CA0123…"),
]


@pytest.mark.parametrize(("text", "hidden", "masked"), FORMATS, ids=[f[0] for f in FORMATS])
def test_mask_hides_every_format_of_a_personal_number(text, hidden, masked):
    out = mask(text)
    assert hidden not in out, out
    if masked is not None:
        assert out == masked
    assert mask(out) == out  # masking twice changes nothing


@pytest.mark.parametrize("text", [
    "오후 2시 30분, 15,000원, 120 콜센터",
    "접수번호 20260042",  # reception numbers stay: callers ask by them
    "접수번호 이공이육 공공공사이요",
    "2026-09-25 10:00:00.123 +0.5 s +12.3 %",
    "10.0.0.1:8765 ws 1008 port 9765",
    "사이사이 일이 오구",
    "loop lag p99 37.5 ms, 8 calls, 1200 ms budget",
    "first token 150.0 ms, 3.3333333333333335 ms per character",  # a float's decimals are no card
    "ratio 0.010123456789, p 0.9912345678901234",
])
def test_mask_leaves_ordinary_numbers(text):
    assert mask(text) == text


def test_mask_takes_anything_a_log_call_may_pass():
    assert mask(12345) == "12345" and mask(None) == "None" and mask(b"01012345678") == "b'010-****-**78'"


def test_stored_words_keep_phone_numbers_but_not_resident_or_card_numbers():
    said = "공일공 일이삼사 오육칠팔로 전화 주세요 주민번호 구공공일공일 일이삼사오육칠이에요 카드 1234-5678-9012-3456"
    stored = mask_stored(said)
    assert stored.startswith("공일공 일이삼사 오육칠팔로") and "일이삼사오육칠" not in stored
    assert "900101-1******" in stored and "5678-9012" not in stored


def test_a_turn_record_for_an_api_is_masked_where_words_are():
    rec = {"call_id": "CA" + "a" * 32, "transcript": "010-1234-5678", "reply": "+82 10-2222-3333",
           "slots": {"location": "중앙로 010-9999-8888", "n": 3}, "error": "caller 01011112222", "index": 1}
    out = mask_turn(rec)
    assert "1234-5678" not in str(out) and "2222-3333" not in str(out) and "9999-8888" not in str(out)
    assert "11112222" not in str(out)
    assert out["call_id"] == rec["call_id"] and out["slots"]["n"] == 3 and rec["transcript"] == "010-1234-5678"


def test_loguru_records_are_masked():
    lines = []
    install_log_masking()
    sink = logger.add(lines.append, format="{message}")
    try:
        logger.info("From {} said {}", "+821099998888", "공일공 구구구구 팔팔팔팔")
    finally:
        logger.remove(sink)
    assert "99998888" not in "".join(lines) and "구구구구" not in "".join(lines)


def _run(script: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PIPECAT_LOG_LLM_CONTEXT"}
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**environ, **env})


UVICORN_TRACEBACK = r'''
import logging, threading, time
import httpx, uvicorn
from bot.config import load_config
from bot.privacy import start_logging
from bot.app.serve import uvicorn_config

start_logging(False)

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    caller = "+82 10-2222-3333"
    raise ValueError("bad start: callSid 010-1234-5678 customParameters 구공공일공일 일이삼사오육칠")

server = uvicorn.Server(uvicorn_config(app, load_config(), host="127.0.0.1", port=0))
thread = threading.Thread(target=server.run, daemon=True)
thread.start()
while not server.started:
    time.sleep(0.05)
port = server.servers[0].sockets[0].getsockname()[1]
print("status", httpx.get(f"http://127.0.0.1:{port}/").status_code, flush=True)
logging.getLogger("websockets.server").warning("handshake from 01099998888 failed")
logging.getLogger("aioice.ice").info("an INFO line of a library: below the level")
server.should_exit = True
thread.join(10)
'''


def test_uvicorns_asgi_traceback_and_library_loggers_go_through_the_masking():
    """Seen before: uvicorn's own handlers printed ASGI tracebacks (a malformed start: callSid, caller
    numbers) and the stdlib loggers printed straight to stderr, past the loguru masking."""
    done = _run(UVICORN_TRACEBACK)
    assert "status 500" in done.stdout, done.stderr
    err = done.stderr
    assert "Exception in ASGI application" in err and "Traceback" in err and "ValueError: bad start" in err
    assert "handshake from 010-****-**88 failed" in err
    for hidden in ("1234-5678", "2222-3333", "일이삼사오육칠", "99998888", "an INFO line"):
        assert hidden not in err, hidden


CONTEXT_DUMP = r'''
from bot.privacy import start_logging
start_logging(True)  # -v: DEBUG
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService

llm = OpenAILLMService(api_key="x", settings=OpenAILLMService.Settings(model="m"))
llm._log_llm_response(LLMContext(messages=[{"role": "user", "content": "SENTINEL-CONTEXT 010-1234-5678"}]))
'''


def test_pipecats_llm_context_dump_stays_out_of_the_logs_unless_asked_for_by_name():
    quiet = _run(CONTEXT_DUMP)
    assert "Generating LLM response" in quiet.stderr, quiet.stderr
    assert "SENTINEL-CONTEXT" not in quiet.stderr
    asked = _run(CONTEXT_DUMP, PIPECAT_LOG_LLM_CONTEXT="full")
    assert "SENTINEL-CONTEXT 010-****-**78" in asked.stderr and "1234-5678" not in asked.stderr
