"""The keypad stage: keys become entries, at once or on '#', and every key still passes on."""

from __future__ import annotations

from pipecat.audio.dtmf.types import KeypadEntry
from pipecat.frames.frames import InputDTMFFrame
from pipecat.tests.utils import run_test

from bot.dialog.state import DialogState
from bot.stages.keypad import KeypadEntryFrame, KeypadProcessor


def keys(text: str) -> list[InputDTMFFrame]:
    return [InputDTMFFrame(KeypadEntry(k)) for k in text]


async def entries(text: str, dialog: DialogState) -> tuple[list[str], int]:
    down, _ = await run_test(KeypadProcessor(dialog=dialog), frames_to_send=keys(text),
                             expected_down_frames=None)
    return [f.keys for f in down if isinstance(f, KeypadEntryFrame)], sum(isinstance(f, InputDTMFFrame) for f in down)


async def test_a_number_then_hash_is_one_entry_and_every_key_passes_on():
    got, passed = await entries("20260042#", DialogState())
    assert got == ["20260042"] and passed == 9


async def test_a_lone_zero_is_an_entry_at_once_and_star_starts_over():
    got, _ = await entries("0", DialogState())
    assert got == ["0"]
    got, _ = await entries("12*345#", DialogState())
    assert got == ["345"]


async def test_one_and_two_answer_a_waiting_read_back_at_once():
    got, _ = await entries("1", DialogState(awaiting="confirmation"))
    assert got == ["1"]
    got, _ = await entries("1", DialogState())
    assert got == []  # no read-back: the start of a number
