"""``DialogAssets``: the dialog's data files, read once per process."""

from __future__ import annotations

from bot.call.assets import DialogAssets
from bot.config import load_config


def test_the_emergency_rules_are_compiled_once_and_each_line_gets_its_own_copy():
    config = load_config()
    first, second = DialogAssets.load(config).emergency, DialogAssets.load(config).emergency
    # The grammar's Kiwi analyses and the nets are built once per version of the files, not per load.
    assert first.lemmas is not None and first.lemmas is second.lemmas
    assert first.kinds is second.kinds
    # A caller that swaps out a net (tests of the question path do) changes no other line's rules.
    assert first is not second
    first.lemmas = None
    assert second.lemmas is not None and DialogAssets.load(config).emergency.lemmas is second.lemmas
