"""Where a call's recording lives, how long it is, and removing it (blocking: threads and commands only).

The records database keeps each file's path relative to ``recording.dir``: workers and a desk host
may mount the shared volume at different places; a stored path never leaves that directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import soundfile as sf

MEDIA_TYPES = {".opus": "audio/ogg", ".ogg": "audio/ogg", ".flac": "audio/flac"}


class RecordingMissing(LookupError):
    """No such recording file (deleted, never written, or a path outside the recordings' directory)."""


def relative(directory: Path, path: Path) -> str:
    return path.resolve().relative_to(directory.resolve()).as_posix()


def resolve(directory: Path, stored: str | None) -> Path:
    """The file of a stored path, only inside ``directory``; raises RecordingMissing."""
    if not stored:
        raise RecordingMissing("no recording")
    base = directory.resolve()
    path = (base / stored).resolve()
    if base not in path.parents or not path.is_file():
        raise RecordingMissing(stored)
    return path


def duration_secs(path: Path) -> float | None:
    """The file's length (an Ogg file cut off by a crash: up to its last page); None if unreadable."""
    try:
        info = sf.info(str(path))
    except (RuntimeError, sf.LibsndfileError, OSError):
        return None
    if info.frames <= 0 or info.frames > info.samplerate * 86400:  # a killed FLAC's header has no length
        return None
    return info.frames / info.samplerate


def media_type(path: Path) -> str:
    return MEDIA_TYPES.get(path.suffix, "application/octet-stream")


def delete(directory: Path, stored: str) -> bool:
    """Remove a recording's file; False when it was already gone."""
    try:
        path = resolve(directory, stored)
    except RecordingMissing:
        return False
    path.unlink()
    return True


def check_writable(directory: Path) -> None:
    """At startup: the recordings' directory exists (made if need be) and takes a file; raises OSError."""
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".write-test-{os.getpid()}"
    probe.write_bytes(b"")
    probe.unlink()
