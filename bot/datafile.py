"""Reading the project's TOML data files with one kind of error message."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def read_toml(path: str | Path, error: type[Exception], what: str) -> dict[str, Any]:
    """Parse ``path``; a missing file or invalid TOML raises ``error`` naming the file.

    Args:
        path: The file.
        error: The caller's error type (``ConfigError``, ``DomainError`` ...).
        what: What the file is, for "... not found" ("config file", "turn set").
    """
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise error(f"{what} not found: {path}") from e
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: invalid TOML: {e}") from e
