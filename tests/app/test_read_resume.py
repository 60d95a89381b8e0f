"""A resume whose records cannot be read (issue 46): the call goes on without its past, and its own
turn records must not take the numbers of the turns said before (written once the database is back)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from bot.app.routes.media import UNREAD_TURNS_FROM, read_resume
from bot.store.db import Store


def test_a_resume_without_its_past_numbers_its_turns_past_the_calls_own(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'calls.db'}")  # no schema: every read fails, as when unreachable
    try:
        ctx = SimpleNamespace(records=SimpleNamespace(store=store))
        resume = asyncio.run(read_resume(ctx, "CA" + "0" * 32, 2))  # type: ignore[arg-type]
    finally:
        store.close()
    assert resume.segment == 2 and resume.history == () and resume.dialog is None and not resume.quiet
    assert resume.first_turn == 2 * UNREAD_TURNS_FROM  # not 0: the call's turns 0, 1, ... stay theirs


def test_a_resume_read_cut_by_its_timeout_as_cancelled_error_goes_on_without_its_past(tmp_path, monkeypatch):
    """wait_for2 (Pipecat's, below Python 3.12) can report the read's timeout as CancelledError: the call went
    down with it; it goes on without its past, as for any failed read."""
    async def cut(aw, timeout):
        aw.close()
        raise asyncio.CancelledError

    store = Store(f"sqlite:///{tmp_path / 'calls.db'}")
    monkeypatch.setattr(asyncio, "wait_for", cut)
    try:
        ctx = SimpleNamespace(records=SimpleNamespace(store=store))
        resume = asyncio.run(read_resume(ctx, "CA" + "0" * 32, 1))  # type: ignore[arg-type]
    finally:
        store.close()
    assert resume.segment == 1 and resume.history == () and resume.first_turn == UNREAD_TURNS_FROM
