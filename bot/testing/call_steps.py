"""Steps the phone tests share: a model turn to script, a caller's utterance, a wait, a call's record.

Test lab only (``tests/``); no product module imports it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.store.db import Store
from bot.testing.twilio_sim import TwilioCallSimulator


def model_turn(reply: str, **kw) -> dict[str, Any]:
    """A complaint turn as the model answers it (street lights, no location yet): ``kw`` changes fields."""
    base = {"reply": reply, "intent": "report_problem", "category": "street_lights", "location": None, "time": None,
            "flow": "continue"}
    base.update(kw)
    return base


async def say(call: TwilioCallSimulator, wav: Path) -> None:
    """Speak, then wait until the bot has answered and gone quiet."""
    await call.send_wav(wav)
    await call.wait_for_media(timeout=30, after=time.monotonic())
    await call.wait_for_silence_from_bot(gap=0.8, timeout=40)


async def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something true (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def call_row(store: Store, call_sid: str) -> dict | None:
    """The call's row in the records database (its turns included), or None."""
    return next((c for c in store.list_calls() if c["call_sid"] == call_sid), None)
