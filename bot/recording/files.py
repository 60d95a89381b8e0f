"""Where a call's recording lives, how long it is, removing it, and private files (blocking: threads and commands only).

The records database keeps each file's path relative to ``recording.dir``: workers and a desk host
may mount the shared volume at different places; a stored path never leaves that directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import soundfile as sf

MEDIA_TYPES = {".opus": "audio/ogg", ".ogg": "audio/ogg", ".flac": "audio/flac"}
# Recordings are the callers' voices: 0600 files in 0700 folders, the service's user's only (issue 49).
PRIVATE_UMASK = 0o077


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


def private_umask() -> None:
    """The service's umask where it starts (``serve``, the desk alone): what it writes (recordings, the SQLite
    records, exports) is its own user's only, 0600 files in 0700 folders."""
    os.umask(PRIVATE_UMASK)


def private_dirs(directory: Path) -> None:
    """``directory`` and its missing parents made 0700 (whatever the umask); an existing one is left as it is."""
    missing = []
    for d in (directory, *directory.parents):
        if d.is_dir():
            break
        missing.append(d)
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass
        os.chmod(d, 0o700, follow_symlinks=False)  # mkdir's mode goes through the umask


def open_private(path: Path, *, new: bool = True) -> int:
    """A file descriptor for writing ``path``, 0600, never through a link; ``new``: the file must not exist
    (O_EXCL), else an existing one is truncated and made 0600. Raises OSError (FileExistsError, ELOOP)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if new else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def check_writable(directory: Path) -> None:
    """At startup: the recordings' directory exists (made 0700 if need be) and takes a file; raises OSError."""
    private_dirs(directory)
    probe = directory / f".write-test-{os.getpid()}"
    os.close(open_private(probe, new=False))
    probe.unlink()
