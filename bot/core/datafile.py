"""Reading the project's TOML data files: one loader, errors that name the file, the line and the key.

``DataFile.read(path, error, what)`` parses a file and keeps its text, so a loader's semantic checks
can point at the line they reject::

    source = DataFile.read(path, ShortcutError, "shortcuts file")
    rule = source.table(("rules", 3))
    source.no_unknown(("rules", 3), {"name", "reply", ...})
    raise source.error(("rules", 3, "patterns", 0), "bad regex ...")
    # ShortcutError: bot/data/shortcuts.toml:42: rules[3].patterns[0]: bad regex ...

tomllib keeps no positions, so ``line_of`` scans the source text itself (table headers, arrays of
tables, dotted keys, inline tables and arrays, multi-line strings, comments); a key that is not
written in the file (a missing key) falls back to its nearest enclosing table's line, then to none.
"""

from __future__ import annotations

import bisect
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Key = str | int
Keys = Sequence[Key]

_MISSING: Any = object()
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR = re.compile(r"[^,\]}\n#]*")
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column \d+\)")


def read_toml(path: str | Path, error: type[Exception], what: str) -> dict[str, Any]:
    """Parse ``path``; a missing file or invalid TOML raises ``error`` naming the file.

    Args:
        path: The file.
        error: The caller's error type (``ConfigError``, ``DomainError`` ...).
        what: What the file is, for "... not found" ("config file", "turn set").
    """
    return DataFile.read(path, error, what).data


def key_path(keys: Keys) -> str:
    """``("rules", 3, "pattern")`` as ``rules[3].pattern`` (a key that is not bare is quoted)."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            name = key if _BARE_KEY.fullmatch(key) else '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out += f".{name}" if out else name
    return out


@dataclass
class DataFile:
    """A parsed TOML file with its text: ``data``, and errors that say where in ``path`` they are."""

    path: Path
    text: str
    data: dict[str, Any]
    error_type: type[Exception] = ValueError
    _lines: dict[tuple[Key, ...], int] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def read(cls, path: str | Path, error: type[Exception], what: str) -> DataFile:
        """Parse ``path``; a missing file or invalid TOML raises ``error`` naming the file (and the line).

        Args:
            path: The file.
            error: The caller's error type (``ConfigError``, ``DomainError`` ...); ``error(message)``.
            what: What the file is, for "... not found" ("config file", "turn set").
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as e:
            raise error(f"{what} not found: {path}") from e
        except UnicodeDecodeError as e:
            line = 1 + e.object[: e.start].count(b"\n")
            raise error(f"{path}:{line}: not UTF-8 text") from e
        return cls.parse(text, path, error)

    @classmethod
    def parse(cls, text: str, path: str | Path, error: type[Exception] = ValueError) -> DataFile:
        """``read`` for text already in hand (``path`` only names it in messages)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            found = _TOML_POSITION.search(str(e))
            where = f"{path}:{found.group(1)}" if found else str(path)
            raise error(f"{where}: invalid TOML: {e}") from e
        return cls(Path(path), text, data, error)

    # --- where --------------------------------------------------------------------------------

    def line_of(self, *keys: Key) -> int | None:
        """The line ``keys`` is written on; else its nearest enclosing table's or value's; else None."""
        if self._lines is None:
            self._lines = _Locator(self.text).run()
        path = tuple(keys)
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None

    def where(self, keys: Keys = ()) -> str:
        """``path:line: key.path`` (without the line when it cannot be found, without keys when none)."""
        line = self.line_of(*keys)
        head = f"{self.path}:{line}" if line is not None else str(self.path)
        return f"{head}: {key_path(keys)}" if keys else head

    def error(self, keys: Keys, message: str) -> Exception:
        """The caller's error, ``path:line: key.path: message``, to raise."""
        return self.error_type(f"{self.where(keys)}: {message}")

    # --- common checks ------------------------------------------------------------------------

    def get(self, keys: Keys, default: Any = None) -> Any:
        """The value at ``keys`` (through tables and array indices), or ``default`` where absent."""
        value: Any = self.data
        for key in keys:
            if isinstance(key, int):
                if not isinstance(value, list) or not -len(value) <= key < len(value):
                    return default
            elif not isinstance(value, dict) or key not in value:
                return default
            value = value[key]
        return value

    def value(self, keys: Keys, kind: type | tuple[type, ...], what: str, *, default: Any = _MISSING,
              ok: Callable[[Any], object] | None = None) -> Any:
        """The value at ``keys``, of type ``kind`` (and ``ok(value)`` true), else the error "must be <what>".

        Absent, it is ``default``, or the error "missing" without one. ``bool`` is not an ``int`` here.
        """
        value = self.get(keys, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise self.error(keys, "missing")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
                or (ok is not None and not ok(value))):
            raise self.error(keys, f"must be {what}, not {value!r}")
        return value

    def text_value(self, keys: Keys, *, default: Any = _MISSING) -> str:
        """A non-empty string (not only spaces), as written."""
        return self.value(keys, str, "a non-empty string", default=default, ok=lambda s: bool(s.strip()))

    def table(self, keys: Keys, *, default: Any = _MISSING) -> dict[str, Any]:
        """The table at ``keys`` (errors "missing" and "must be a table")."""
        return self.value(keys, dict, "a table", default=default)

    def tables(self, keys: Keys, *, default: Any = _MISSING, nonempty: bool = True) -> list[dict[str, Any]]:
        """The array of tables at ``keys`` (``[[name]]``), every entry a table."""
        rows = self.value(keys, list, f"an array of tables ([[{key_path(keys)}]])", default=default,
                          ok=lambda v: bool(v) or not nonempty)
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self.error((*keys, i), f"must be a table, not {row!r}")
        return rows

    def no_unknown(self, keys: Keys, allowed: Iterable[str], what: str = "key") -> None:
        """Refuse a key of the table at ``keys`` that is not ``allowed``, naming it and listing them.

        ``what`` names such a key in the message ("unknown table 'extra'" at the top of a file).
        """
        table = self.get(keys)
        if not isinstance(table, dict):
            return
        allowed = list(allowed)
        unknown = [k for k in table if k not in allowed]
        if unknown:
            raise self.error((*keys, unknown[0]),
                             f"unknown {what} {unknown[0]!r} (expected one of {', '.join(sorted(allowed))})")


# --- locating keys in the text ------------------------------------------------------------------


class _Locator:
    """Where each key path is written: a small scanner over text that tomllib has already accepted.

    Records the line of every key (``a.b = 1`` also records ``a``), table header (``[a.b]``,
    ``[[a]]`` as ``a`` and ``(a, n)`` for its n-th entry) and array element (``(key, i)``), inside
    inline tables and arrays too. Implicit parents keep the first line they appear on.
    """

    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.lines: dict[tuple[Key, ...], int] = {}
        self.explicit: set[tuple[Key, ...]] = set()
        self.arrays: dict[tuple[Key, ...], int] = {}  # array of tables -> entries so far

    def run(self) -> dict[tuple[Key, ...], int]:
        try:
            self._document()
        except (IndexError, ValueError):  # pragma: no cover - tomllib accepted the text; keep what was found
            pass
        return self.lines

    def _line(self) -> int:
        return bisect.bisect_left(self.newlines, self.i) + 1

    def _record(self, path: tuple[Key, ...], line: int, explicit: bool = True) -> None:
        for n in range(1, len(path)):
            self.lines.setdefault(path[:n], line)
        if explicit and path not in self.explicit:
            self.lines[path] = line
            self.explicit.add(path)
        else:
            self.lines.setdefault(path, line)

    def _skip(self, newlines: bool) -> None:
        """Spaces and comments (and newlines, where the grammar allows them)."""
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            else:
                return

    def _document(self) -> None:
        s = self.s
        table: tuple[Key, ...] = ()
        while True:
            self._skip(newlines=True)
            if self.i >= len(s):
                return
            line = self._line()
            if s.startswith("[[", self.i):
                self.i += 2
                keys = self._keys()
                self.i = s.index("]]", self.i) + 2
                parent = self._resolve(keys[:-1])
                array = (*parent, keys[-1])
                count = self.arrays.get(array, 0)
                self.arrays[array] = count + 1
                table = (*array, count)
                self._record(array, line, explicit=False)
                self._record(table, line)
            elif s[self.i] == "[":
                self.i += 1
                keys = self._keys()
                self.i = s.index("]", self.i) + 1
                table = self._resolve(keys)
                self._record(table, line)
            else:
                self._pair(table)

    def _resolve(self, keys: list[str]) -> tuple[Key, ...]:
        """A header's dotted key as a path: an array of tables on the way means its last entry."""
        path: tuple[Key, ...] = ()
        for key in keys:
            path = (*path, key)
            if path in self.arrays:
                path = (*path, self.arrays[path] - 1)
        return path

    def _pair(self, table: tuple[Key, ...]) -> None:
        line = self._line()
        keys = self._keys()
        path = (*table, *keys)
        self._record(path, line)
        self._skip(newlines=False)
        self.i += 1  # "="
        self._value(path)

    def _keys(self) -> list[str]:
        """A dotted key; the scanner stops after its last part."""
        s = self.s
        keys = []
        while True:
            self._skip(newlines=False)
            c = s[self.i]
            if c == '"':
                start = self.i
                self._basic_string()
                keys.append(tomllib.loads(f"k = {s[start:self.i]}")["k"])
            elif c == "'":
                end = s.index("'", self.i + 1)
                keys.append(s[self.i + 1:end])
                self.i = end + 1
            else:
                m = _BARE_KEY.match(s, self.i)
                if not m:
                    raise ValueError(f"no key at {self.i}")
                keys.append(m.group())
                self.i = m.end()
            self._skip(newlines=False)
            if self.i < len(s) and s[self.i] == ".":
                self.i += 1
                continue
            return keys

    def _basic_string(self) -> None:
        s = self.s
        self.i += 1
        while s[self.i] != '"':
            self.i += 2 if s[self.i] == "\\" else 1
        self.i += 1

    def _multiline(self, quote: str) -> None:
        s = self.s
        self.i += 3
        while not s.startswith(quote * 3, self.i):
            self.i += 2 if quote == '"' and s[self.i] == "\\" else 1
        self.i += 3
        extra = 0
        while extra < 2 and self.i < len(s) and s[self.i] == quote:  # up to two quotes end the content
            self.i += 1
            extra += 1

    def _value(self, path: tuple[Key, ...]) -> None:
        s = self.s
        self._skip(newlines=False)
        c = s[self.i]
        if s.startswith('"""', self.i):
            self._multiline('"')
        elif s.startswith("'''", self.i):
            self._multiline("'")
        elif c == '"':
            self._basic_string()
        elif c == "'":
            self.i = s.index("'", self.i + 1) + 1
        elif c == "[":
            self.i += 1
            index = 0
            while True:
                self._skip(newlines=True)
                if s[self.i] == "]":
                    self.i += 1
                    return
                self._record((*path, index), self._line())
                self._value((*path, index))
                self._skip(newlines=True)
                if s[self.i] == ",":
                    self.i += 1
                    index += 1
        elif c == "{":
            self.i += 1
            while True:
                self._skip(newlines=True)
                if s[self.i] == "}":
                    self.i += 1
                    return
                self._pair(path)
                self._skip(newlines=True)
                if s[self.i] == ",":
                    self.i += 1
        else:  # a number, a boolean, a date: up to the next delimiter
            m = _SCALAR.match(s, self.i)
            self.i = m.end() if m else self.i + 1
