"""The optional RNNoise filter on the caller's audio (``audio.noise_filter``)."""

from __future__ import annotations

from loguru import logger
from pipecat.audio.filters.base_audio_filter import BaseAudioFilter

from bot.config import Config


def check_noise_filter(config: Config) -> None:
    """At startup: log the input noise filter when on; a missing ``pyrnnoise`` stops the process."""
    if config.audio.noise_filter == "none":
        return
    from bot.core.errors import StartupError

    try:
        import pyrnnoise  # noqa: F401
    except ImportError as e:
        raise StartupError(f"audio.noise_filter = {config.audio.noise_filter!r} needs the pyrnnoise package "
                           f"(pip install pyrnnoise==0.4.5), or set audio.noise_filter = \"none\": {e}") from e
    logger.info("audio.noise_filter = {}: RNNoise noise suppression on the caller's audio before VAD and STT",
                config.audio.noise_filter)


def make_audio_in_filter(config: Config) -> BaseAudioFilter | None:
    """A fresh input filter for one call's transport params (it keeps per-call state), or None."""
    if config.audio.noise_filter == "none":
        return None
    from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter

    return RNNoiseFilter()
