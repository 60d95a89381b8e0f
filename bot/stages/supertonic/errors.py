"""What can go wrong with Supertonic: missing or foreign model files, providers, downloads, a barge-in."""

from __future__ import annotations

from bot.core.errors import ModelMissingError


class TTSModelMissingError(FileNotFoundError, ModelMissingError):
    """A Supertonic model file is missing; the message names it and says how to get the model."""


class TTSModelError(ValueError):
    """The model directory holds files that are not a Supertonic model this code can run."""


class TTSProviderError(ValueError):
    """A session did not get the execution provider the config requires."""


class TTSDownloadError(RuntimeError):
    """Downloading the model from the hub failed; the message says what to do instead."""


class SynthesisCancelled(Exception):
    """``synthesize`` stopped early because its ``cancel`` event was set."""
