"""One sha256 of a file for every caller (model files, the GGUF, the tables a learned net was made from)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: str | Path, chunk: int = 4 << 20) -> str:
    """The file's sha256 as hex, read in chunks (a model file is gigabytes)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
