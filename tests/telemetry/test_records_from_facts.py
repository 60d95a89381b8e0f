"""Issue 45 part 3: turn records are written only from turn facts (``bot/telemetry/turn_facts.py``).

The call's edges (the greeting and the other openings, a backchannel, a failed stage, a canned
sentence played from memory, the turn-stop wait) say what happened as frames; ``TurnObserver`` writes
them, as it writes the dialog stage's. No module of the call writes a record itself."""

from __future__ import annotations

import re

from pipecat.observers.base_observer import FramePushed
from pipecat.processors.frame_processor import FrameDirection

from bot.telemetry.turn_facts import (
    BackchannelHeardFrame,
    CannedPlayedFrame,
    EndpointChosenFrame,
    StageFailedFrame,
    TurnOpenedFrame,
)
from bot.telemetry.turns import CallRecorder, TurnObserver
from tests.conftest import ROOT

# A record's field set, appended to or marked, outside bot/telemetry: `recorder.current.x = ...`.
WRITE = re.compile(r"(recorder|rec)\.current\.[a-z_]+( =|\.append\(| \+=)|current\.mark\(")
# Wrote records before issue 45: the glue, the stock baseline's sentence mark, the QA page's live view.
FORMER = {"bot/call/build.py", "bot/call/guard.py", "bot/call/openings.py", "bot/app/stock.py", "bot/call/qa_live.py"}


async def _see(observer: TurnObserver, *frames) -> None:
    for frame in frames:
        await observer.on_push_frame(FramePushed(source=object(), destination=object(), frame=frame,
                                                 direction=FrameDirection.DOWNSTREAM, timestamp=0))


async def test_the_calls_edges_reach_the_record_as_facts():
    rec = CallRecorder("CAedges")
    obs = TurnObserver(rec)
    await _see(obs, TurnOpenedFrame(line_open=False, ai_notice=True, t=10.0))
    greeting = rec.current
    assert (greeting.first_sentence, greeting.line_open, greeting.ai_notice) == (10.0, False, True)
    await _see(obs, EndpointChosenFrame(kind="final", wait_ms=350.0), BackchannelHeardFrame(), BackchannelHeardFrame(),
               StageFailedFrame(error="tts: boom"), StageFailedFrame(error="tts: again"),
               CannedPlayedFrame(sentence="apology"))
    assert (greeting.endpoint_kind, greeting.endpoint_wait_ms) == ("final", 350.0)
    assert greeting.backchannels == 2 and greeting.error == "tts: boom" and greeting.heard == ["apology"]


async def test_a_resumed_call_says_its_sentence_or_only_its_route():
    rec = CallRecorder("CAresumed", first_index=4)
    obs = TurnObserver(rec)
    await _see(obs, TurnOpenedFrame(line_open=True, route="resumed", said=False))
    assert (rec.current.route, rec.current.first_sentence, rec.current.reply) == ("resumed", None, None)
    await _see(obs, TurnOpenedFrame(line_open=True, route="resumed", reply="다시 연결되었습니다.", t=3.0))
    assert (rec.current.first_sentence, rec.current.reply) == (3.0, "다시 연결되었습니다.")


def test_no_module_of_a_call_writes_a_turn_record_itself():
    writers = set()
    for path in (ROOT / "bot").rglob("*.py"):
        name = path.relative_to(ROOT).as_posix()
        if not name.startswith(("bot/telemetry/", "bot/testing/", "bot/tools/")) and WRITE.search(path.read_text()):
            writers.add(name)
    assert not writers, sorted(writers)
    assert all((ROOT / name).is_file() for name in FORMER)  # the test still looks where they were
