"""Supertonic 3 text-to-speech: the ONNX Runtime engine and its Pipecat stage.

    files.py    the model directory: layout, download from the hub, checks
    engine.py   ``SupertonicEngine``: the four ONNX sessions (TensorRT, CUDA, CPU) and synthesis
    canned.py   ``CannedAudio``: sentences synthesized once at startup, played from memory
    service.py  ``SupertonicTTSService``: the Pipecat TTS stage on a shared engine
    errors.py   the error classes

Model files come from ``python run_bot.py models`` (``download_supertonic``, needs the Hugging
Face hub) or, for plumbing only, ``python run_bot.py models --offline`` (a stand-in built by
``bot.modelfiles.standin``, which is random noise, not speech).
"""

from bot.stages.supertonic.canned import CannedAudio
from bot.stages.supertonic.engine import PROVIDER_NAMES, SupertonicEngine, SynthResult
from bot.stages.supertonic.errors import (
    SynthesisCancelled,
    TTSDownloadError,
    TTSModelError,
    TTSModelMissingError,
    TTSProviderError,
)
from bot.stages.supertonic.files import (
    REQUIRED_FILES,
    SESSION_NAMES,
    SUPERTONIC_REPO,
    check_model_dir,
    download_supertonic,
    is_standin,
)
from bot.stages.supertonic.service import OnSentence, SupertonicTTSService

__all__ = [
    "PROVIDER_NAMES",
    "REQUIRED_FILES",
    "SESSION_NAMES",
    "SUPERTONIC_REPO",
    "CannedAudio",
    "OnSentence",
    "SupertonicEngine",
    "SupertonicTTSService",
    "SynthResult",
    "SynthesisCancelled",
    "TTSDownloadError",
    "TTSModelError",
    "TTSModelMissingError",
    "TTSProviderError",
    "check_model_dir",
    "download_supertonic",
    "is_standin",
]
