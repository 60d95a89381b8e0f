"""Startup errors: a missing model or an unusable provider stops the process with one clear line."""

from __future__ import annotations

from contextlib import contextmanager


class StartupError(RuntimeError):
    """The process cannot serve calls; the message says why and how to fix it."""


@contextmanager
def startup_errors():
    """Turn the model loaders' typed errors into a ``StartupError`` with their message."""
    from bot.models import ModelIntegrityError, ModelMissingError
    from processors.supertonic_tts import TTSModelMissingError, TTSProviderError

    try:
        yield
    except (ModelMissingError, ModelIntegrityError, TTSModelMissingError, TTSProviderError) as e:
        raise StartupError(str(e)) from e
