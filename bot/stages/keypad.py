"""The phone pad: keys pressed (Twilio ``dtmf`` events) become complete entries for the dialog stage.

Pipecat's ``DTMFAggregator`` turns keys into a transcript on '#' or after an idle timeout, for the
model to read. Our keys are decided by rules, never by the model, and some act at once ('0' alone
is a person; '1'/'2' answer a read-back), so this stage collects them with the policy's
``KeyBuffer`` and emits a ``KeypadEntryFrame``: the dialog stage decides it as it decides speech.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipecat.frames.frames import Frame, InputDTMFFrame, SystemFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from bot.dialog.policy import KeyBuffer
from bot.dialog.state import DialogState


@dataclass
class KeypadEntryFrame(SystemFrame):
    """A complete keypad entry: "0", "1"/"2" during a read-back, or the digits keyed before '#'.

    A system frame, like the keys: an entry is answered at once, even while the model is answering.
    """

    keys: str = ""


class KeypadProcessor(FrameProcessor):
    """Collects keys into entries (``KeyBuffer``); every frame, keys included, passes on.

    Args:
        dialog: The call's dialog state (a read-back waiting makes '1' and '2' act at once).
    """

    def __init__(self, *, dialog: DialogState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._dialog = dialog
        self._keys = KeyBuffer()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, InputDTMFFrame) and direction == FrameDirection.DOWNSTREAM:
            entry = self._keys.press(str(frame.button.value), self._dialog)
            if entry is not None:
                await self.push_frame(KeypadEntryFrame(keys=entry))
