"""Errors the layers share: a missing or damaged model, and the startup error that stops the process."""

from __future__ import annotations


class StartupError(RuntimeError):
    """The process cannot serve calls; the message says why and how to fix it."""


class ModelMissingError(RuntimeError):
    """A model the config asks for is not on disk; the message says how to get it."""


class ModelIntegrityError(RuntimeError):
    """Model files are present but not the expected bytes (size or sha256 mismatch)."""
