"""The serving process freezes what loading made (bot/app/serve.py): the garbage collector, which runs on
the event loop that paces the calls' audio, never scans it again."""

from __future__ import annotations

import gc

from bot.app.serve import freeze_startup_heap


def test_what_loading_made_is_frozen_and_no_collection_scans_it():
    loaded = [{"table": i} for i in range(1000)]  # what loading leaves behind (tracked containers)
    try:
        frozen = freeze_startup_heap()
        # Another thread of this test process may free a frozen object meanwhile: the count only goes down.
        assert frozen >= gc.get_freeze_count() >= len(loaded)
        assert not any(o is loaded for o in gc.get_objects())  # out of every generation a collection scans
        made_by_a_call = [{"turn": 1}]
        assert any(o is made_by_a_call for o in gc.get_objects())
    finally:
        gc.unfreeze()  # this test process goes on with other tests
