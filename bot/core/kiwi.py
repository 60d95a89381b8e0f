"""The one Kiwi morphological analyzer (``kiwipiepy``) of a process, shared by the knowledge base's
retriever and the emergency recogniser's grammar: it takes about a second and 100 MB to build."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_kiwi: Any = None


def load_kiwi() -> Any:
    """The shared analyzer, built on first use (blocking: call at startup); thread-safe."""
    global _kiwi
    with _lock:
        if _kiwi is None:
            try:
                from kiwipiepy import Kiwi
            except ImportError as e:
                raise ImportError(f"Missing module: {e}. pip install kiwipiepy (see requirements.txt)") from e
            _kiwi = Kiwi()
            _kiwi.tokenize("준비가 됐어요")  # its model loads on the first analysis (~1 s): here, not in a caller's turn
        return _kiwi
