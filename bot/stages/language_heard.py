"""The language Whisper heard a caller's segment in, told in band (``stt.language = "auto"``).

The STT stage pushes it and touches nothing else; the dialog stage asks its policy what the call
does with it (``DialogPolicy.language_heard``: a ``Change``, applied like every other) and, when the
call's language moves, tells the STT and the TTS with Pipecat's settings frames.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.frames.frames import Frame, STTUpdateSettingsFrame, SystemFrame, TTSUpdateSettingsFrame
from pipecat.services.settings import STTSettings, TTSSettings

from bot.dialog.language_switch import LanguageGuess


@dataclass
class LanguageHeardFrame(SystemFrame):
    """One accepted segment's language guesses.

    A system frame: it reaches the dialog stage before the turn the segment belongs to is answered.

    Attributes:
        guess: The most probable of the line's own languages, with its probability.
        heard: The most probable of all Whisper's languages (its ``served_p``: the line's best), when
            Whisper gave it; the evidence for a language the line does not serve.
    """

    guess: LanguageGuess | None = None
    heard: LanguageGuess | None = None


def told_language(language: str) -> list[Frame]:
    """The call's language for the STT and the TTS, in band (Pipecat's settings frames): the STT
    decodes the next segments in it, the TTS speaks the next sentences with its tag. Kept through an
    interruption: a barge-in must not leave either in the old language."""
    frames: list[Frame] = [STTUpdateSettingsFrame(delta=STTSettings(language=language)),
                           TTSUpdateSettingsFrame(delta=TTSSettings(language=language))]
    for frame in frames:
        frame.interruptible = False
    return frames
