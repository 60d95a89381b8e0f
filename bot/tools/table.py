"""The tables the commands print (markdown), with cells that cannot drive the terminal.

A record's text (a caller's words, a location, a reason, an error from a server) may hold escape
sequences: ``ESC[31m`` colours, an OSC title or hyperlink, a DCS string, C1 controls, bidi overrides.
Printed raw they rewrite the operator's terminal. ``cell`` removes every one of them, turns line
breaks and tabs into spaces (a row stays one line) and escapes ``|`` (a cell stays one cell).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# Whole sequences first (so no parameter bytes are left behind), then any lone control character.
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase
    r"|(?:\x1b[\]P^_X]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]"  # the other escapes (charset, keypad, reset)
)
_SPACES = re.compile(r"[\t\n\r\v\f\x85\u2028\u2029]+")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(value: Any) -> str:
    """``value`` as text without escape sequences or control characters; line breaks become spaces."""
    text = "" if value is None else str(value)
    text = _SEQUENCES.sub("", text)
    text = _SPACES.sub(" ", text)
    return _CONTROLS.sub("", text)


def cell(value: Any, empty: str = "-") -> str:
    """One table cell: ``clean``, ``|`` escaped, ``empty`` for None or nothing."""
    text = clean(value).replace("|", "\\|")
    return text if text.strip() else empty


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A markdown table, every cell through ``cell``; ends with a newline."""
    headers = list(headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def safe_json(obj: Any) -> str:
    """``json.dumps`` (non-ASCII kept) with every control and bidi character escaped as ``\\uXXXX``:
    the same JSON, nothing a terminal acts on (json escapes only C0 itself)."""
    import json

    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(obj, ensure_ascii=False))
