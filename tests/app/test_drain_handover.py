"""Issue 46: a drain hands a phone call over at its next quiet moment (``PhoneCall.hand_over``), in process.

The hand-over closes the stream (Twilio then asks the <Connect>'s action, which resumes the call on
another worker: tests/app/test_stream_ended.py), after recording the segment's end as a hand-over, not
as the bot's own end. It waits for the bot's sentence to finish and for the answer to a caller's turn;
a turn that never gets an answer (a cough) does not hold it. A call with nowhere to go (the QA page's)
still gets the goodbye. Two workers under a rolling restart: tests/call/test_line_faults.py.
"""

from __future__ import annotations

import datetime as dt
import time
from types import SimpleNamespace

from bot.app.context import AppContext
from bot.app.routes.media import PhoneCall
from bot.store import segments
from bot.store.db import Store
from bot.telemetry.latency import TurnRecord

SID = "CA" + "6" * 32


class FakeCall(SimpleNamespace):
    """What ``PhoneCall.hand_over`` reads of its call: the serializer's clock, the recorder, the socket."""


def _call(store: Store, *, speaking_for: float = 0.0, turn: TurnRecord | None = None) -> FakeCall:
    until = time.monotonic() + speaking_for
    events: list[tuple[str, float]] = []

    async def close(**_kw):
        events.append(("closed", time.monotonic()))

    async def cancel():
        events.append(("cancelled", time.monotonic()))

    recorder = SimpleNamespace(bot_speaking=False, current=turn or TurnRecord(call_id=SID, index=1, route="llm"))
    session = SimpleNamespace(recorder=recorder, worker=SimpleNamespace(cancel=cancel), end_reason=None)
    return FakeCall(ctx=SimpleNamespace(records=SimpleNamespace(store=store)), session=session,
                    start=SimpleNamespace(call_sid=SID), segment=0, websocket=SimpleNamespace(close=close),
                    serializer=SimpleNamespace(bot_audio_pending=lambda: time.monotonic() < until), events=events)


def _store(tmp_path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'calls.db'}")
    store.migrate()
    segments.open_segment(store, SID, 0, worker="w0", started_at=dt.datetime.now(dt.UTC))
    return store


async def test_the_hand_over_waits_for_the_bots_sentence_then_closes_the_stream_as_a_hand_over(tmp_path):
    store = _store(tmp_path)
    call = _call(store, speaking_for=0.4)
    t0 = time.monotonic()
    await PhoneCall.hand_over(call)
    (closed, at), (cancelled, _) = call.events
    assert closed == "closed" and cancelled == "cancelled" and at - t0 >= 0.35  # not over the bot's sentence
    assert call.session.end_reason == segments.HANDOVER
    ended = segments.take_action(store, SID, 0)
    assert ended is not None and ended.end_reason == segments.HANDOVER and not ended.bot_ended  # a resume
    store.close()


async def test_a_caller_still_speaking_holds_the_hand_over_a_turn_left_unanswered_does_not(tmp_path):
    store = _store(tmp_path)
    speaking = TurnRecord(call_id=SID, index=2, route="pending")  # the caller's turn has not ended
    call = _call(store, turn=speaking)
    t0 = time.monotonic()
    await PhoneCall.hand_over(call, max_wait_secs=0.5)
    assert call.events[0][1] - t0 >= 0.45  # held to its limit
    cough = TurnRecord(call_id=SID, index=3, route="pending", turn_end=time.time() - 10)  # no answer came
    call = _call(store, turn=cough)
    t0 = time.monotonic()
    await PhoneCall.hand_over(call, max_wait_secs=5.0)
    assert call.events[0][1] - t0 < 0.3
    store.close()


async def test_a_call_with_nowhere_to_go_still_gets_the_goodbye():
    said: list[str] = []

    async def goodbye(session):
        said.append("goodbye")

    async def hand_over():
        said.append("handed over")

    phone = SimpleNamespace(session=object(), hand_over=hand_over)
    ctx = SimpleNamespace(phone_calls={SID: phone}, _say_goodbye=goodbye)
    await AppContext._hand_over(ctx, phone.session)  # a phone call: handed over
    await AppContext._hand_over(ctx, object())  # the QA page's call: no stream to hand over
    assert said == ["handed over", "goodbye"]
