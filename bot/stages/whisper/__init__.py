"""Speech-to-text with faster-whisper for Korean phone audio.

    engine.py   ``WhisperEngine``: one guarded model per process, its worker threads; ``transcribe_file``
    echo.py     ``is_prompt_echo``: the hotwords / initial prompt copied back instead of what was said
    service.py  ``WhisperSTTProcessor``: the Pipecat segmented STT stage; ``UnclearSpeechFrame``

Transcripts are personal data: they are logged at DEBUG only, never at INFO.
"""

from bot.stages.whisper.echo import is_prompt_echo
from bot.stages.whisper.engine import (
    WHISPER_SAMPLE_RATE,
    RejectReason,
    TranscriptResult,
    WhisperEngine,
    pcm16_to_float32,
    transcribe_file,
)
from bot.stages.whisper.service import UNCLEAR_REASONS, SegmentUnreadFrame, UnclearSpeechFrame, WhisperSTTProcessor

__all__ = [
    "UNCLEAR_REASONS",
    "WHISPER_SAMPLE_RATE",
    "RejectReason",
    "TranscriptResult",
    "SegmentUnreadFrame",
    "UnclearSpeechFrame",
    "WhisperEngine",
    "WhisperSTTProcessor",
    "is_prompt_echo",
    "pcm16_to_float32",
    "transcribe_file",
]
