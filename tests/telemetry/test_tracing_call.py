"""A phone call through the product with tracing on lands in a collector as one trace, a span per turn.

The lab server (the product's serve path, a fixed-delay STT that hears "불이 났어요" every utterance),
``telemetry.otlp_endpoint`` at an OTLP/HTTP collector in this process (bot/testing/otlp_receiver.py), a
simulated Twilio caller who speaks twice and hangs up. The trace's turn spans and their stage spans
match the server's own turn records (``/api/turns``) within a millisecond, and every record carries the
trace's id.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from bot.telemetry.tracing import trace_id_for
from bot.testing.otlp_receiver import OTLPReceiver, render_tree
from bot.testing.phone import FAST_VOICE, PhoneLine, open_call, phone_bot
from tests.conftest import FIXTURES, offline_bot_overrides

pytestmark = pytest.mark.slow  # a real bot process over real sockets

LINE = PhoneLine(auth_token="test-auth-token-tracing", account_sid="AC" + "5" * 32)
SAID = "여보세요 여기 불이 났어요"
CALLER = "+821055501234"


@pytest.fixture(scope="module")
def collector():
    with OTLPReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm, collector):
    tmp = tmp_path_factory.mktemp("bot")
    with phone_bot(LINE, [*offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
                          f"telemetry.otlp_endpoint='{collector.endpoint}'", FAST_VOICE],
                   log_path=tmp / "bot.log",
                   entry=("-m", "bot.testing.lab_server", "--stt-text", SAID, "--stt-delay-ms", "200")) as proc:
        yield proc


async def test_a_call_is_one_trace_whose_turn_spans_match_the_records(bot, collector):
    call = await open_call(bot, LINE, caller=CALLER)
    call_sid = call.call_sid
    async with call:
        await call.wait_for_media(timeout=15)
        for _ in range(2):
            await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
            await call.send_wav(FIXTURES / "en_hello.wav")
            await call.wait_for_media(timeout=15, after=time.monotonic())
        await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
        await call.stop()
    want = format(trace_id_for(call_sid), "032x")
    for _ in range(60):  # the server finishes the call just after the stream closes; the export follows
        spans = collector.traces().get(want, [])
        if any(s.name == "call" for s in spans):
            break
        await asyncio.sleep(0.25)
    records = [t for t in bot.turns() if t["call_id"] == call_sid]
    assert {t["trace_id"] for t in records} == {want}  # every record keeps its trace's id
    assert [tid for tid, ss in collector.traces().items() if any(s.attributes.get("call.id") == call_sid for s in ss)] \
        == [want]  # one trace for the call
    if os.environ.get("TRACE_DUMP"):  # the trace as docs/production.md shows it
        Path(os.environ["TRACE_DUMP"]).write_text(render_tree(spans, keys=(
            "call.end_reason", "call.turns", "turn.index", "turn.route", "turn.escalation", "turn.endpoint_kind",
            "dialog.decision")))
    (root,) = [s for s in spans if s.name == "call"]
    assert root.attributes["call.id"] == call_sid and CALLER not in str(root.attributes)
    assert root.attributes["call.caller"].endswith("34") and root.attributes["call.end_reason"] == "caller_hangup"
    assert any(k.startswith("voice.onnx.") and v for k, v in root.resource.items()), root.resource
    assert "voice.escape_hatches" in root.resource  # the stand-in TTS, STT on CPU, ...
    answered = [t for t in records if t["route"] == "emergency"]
    turn_spans = {s.attributes["turn.index"]: s for s in spans if s.name == "turn"}
    # Each answered turn has its span. Two utterances are two turns, or three where a loaded machine
    # ended a turn in the clip's pause: that answer never played (no voice_to_voice), the next said it.
    assert 2 <= len(answered) <= 3 and {t["index"] for t in answered} <= set(turn_spans), (records, turn_spans)
    assert sum("voice_to_voice" in t["stages_ms"] for t in answered) >= 2, answered
    for rec in answered:
        span = turn_spans[rec["index"]]
        assert span.parent_id == root.span_id and span.attributes["turn.escalation"] == "119"
        children = {s.name: s for s in spans if s.parent_id == span.span_id}
        stages = {k: v for k, v in rec["stages_ms"].items() if k not in ("voice_to_voice", "voice_to_audible")}
        assert set(stages) <= set(children), (stages, children)
        for name, ms in stages.items():
            assert children[name].duration_ms == pytest.approx(ms, abs=1), (rec["index"], name)
        if "voice_to_voice" in rec["stages_ms"]:
            assert span.duration_ms == pytest.approx(rec["stages_ms"]["voice_to_voice"], abs=1)
        assert children["dialog"].attributes["dialog.decision"] == "emergency"
