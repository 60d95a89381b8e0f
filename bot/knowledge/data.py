"""The FAQ and department files (``bot/data/faq.toml``, ``bot/data/directory.toml``): entries and checks.

Both files are edited by hand, so every mistake is reported as ``path:line: message`` with the
line of the offending entry or key, and the bot refuses to start rather than answer from a
half-read file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from bot.core.datafile import DataFile

_FAQ_ID_RE = re.compile(r"^faq-[a-z][a-z0-9]*-\d{3}$")
_DEPT_ID_RE = re.compile(r"^dept-[a-z][a-z0-9-]*$")
# Area code, then one or two groups ("031-120-2310", "1599-0903"); short lines ("120", "129") too.
_PHONE_RE = re.compile(r"^(\d{2,4}(-\d{3,4}){1,2}|\d{3,4})$")
# TOMLDecodeError has no line attribute before Python 3.14; its message ends "(at line 3, column 5)".
_TOML_LINE_RE = re.compile(r"\(at line (\d+), column \d+\)$")

# An answer is read out on the phone: past this many characters it is no longer "1-2 sentences".
MAX_ANSWER_CHARS = 200


class KnowledgeDataError(ValueError):
    """A FAQ or department file that cannot be used. ``str()`` is ``path:line: message``."""

    def __init__(self, path: Path | str, line: int, message: str):
        self.path = Path(path)
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: {message}")


@dataclass(frozen=True)
class FaqEntry:
    """One question the city answers, with the words callers use for it."""

    kind: ClassVar[Literal["faq"]] = "faq"

    id: str
    category: str
    question: str
    keywords: tuple[str, ...]
    answer: str
    line: int = 0  # line of the entry's [[faq]] header, for messages

    @property
    def fact(self) -> str:
        """The text given to the model for this entry."""
        return self.answer


@dataclass(frozen=True)
class Department:
    """One department of the directory."""

    kind: ClassVar[Literal["department"]] = "department"

    id: str
    name: str
    aliases: tuple[str, ...]
    phone: str
    hours: str
    handles: tuple[str, ...]
    line: int = 0

    @property
    def fact(self) -> str:
        """The text given to the model for this entry."""
        return f"{self.name}: {', '.join(self.handles)} 담당. 전화번호 {self.phone}, 운영 시간 {self.hours}."


Entry = FaqEntry | Department


@dataclass(frozen=True)
class Directory:
    """The departments, plus the words that make a question a phone-number/hours request."""

    departments: tuple[Department, ...]
    ask_words: tuple[str, ...]


class _Source:
    """One file's entries, to name the line of an entry or a key in messages (``DataFile``'s locator)."""

    def __init__(self, file: DataFile, table: str):
        self.file = file
        self.path = file.path
        self.table = table

    def entry_line(self, index: int) -> int:
        """Line of the ``index``-th ``[[table]]`` header (1 when the file uses another layout)."""
        return self.file.line_of(self.table, index) or 1

    def key_line(self, index: int, key: str) -> int:
        """Line of ``key = ...`` inside the ``index``-th entry, else the entry's header line."""
        return self.file.line_of(self.table, index, key) or self.entry_line(index)

    def error(self, line: int, message: str) -> KnowledgeDataError:
        return KnowledgeDataError(self.path, line, message)


def _read(path: Path, table: str, allowed_top: set[str]) -> tuple[dict[str, Any], _Source]:
    try:
        file = DataFile.read(path, _Unreadable, "file")
    except _Unreadable as e:
        # "path:LINE: message" (invalid TOML, not UTF-8) or "file not found: path": the line apart.
        message = str(e).removeprefix(f"{path}:")
        line, _, rest = message.partition(": ")
        if line.isdigit():
            raise KnowledgeDataError(path, int(line), _TOML_LINE_RE.sub("", rest).strip()) from e
        raise KnowledgeDataError(path, 0, "file not found") from e
    data, source = file.data, _Source(file, table)
    for key in data:
        if key not in allowed_top:
            raise source.error(_top_key_line(source, key), f"unknown section {key!r} (expected {sorted(allowed_top)})")
    entries = data.get(table)
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise source.error(1, f"no [[{table}]] entries")
    return data, source


class _Unreadable(ValueError):
    """The file is missing or not TOML (re-raised as ``KnowledgeDataError`` with its line)."""


def _top_key_line(source: _Source, key: str) -> int:
    return source.file.line_of(key) or 1


def _text(source: _Source, index: int, raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    if value is None:
        raise source.error(source.entry_line(index), f"entry is missing {key!r}")
    if not isinstance(value, str) or not value.strip():
        raise source.error(source.key_line(index, key), f"{key!r} must be a non-empty string")
    return value.strip()


def _words(source: _Source, index: int, raw: dict[str, Any], key: str, required: bool = True) -> tuple[str, ...]:
    value = raw.get(key)
    if value is None and not required:
        return ()
    if value is None:
        raise source.error(source.entry_line(index), f"entry is missing {key!r}")
    if not isinstance(value, list) or not all(isinstance(w, str) and w.strip() for w in value):
        raise source.error(source.key_line(index, key), f"{key!r} must be a list of non-empty strings")
    if required and not value:
        raise source.error(source.key_line(index, key), f"{key!r} must not be empty")
    return tuple(w.strip() for w in value)


def _check_keys(source: _Source, index: int, raw: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in raw:
        if key not in allowed:
            raise source.error(source.key_line(index, key), f"unknown key {key!r} (allowed: {', '.join(allowed)})")


def _entries(source: _Source, rows: list[dict[str, Any]], keys: tuple[str, ...], pattern: re.Pattern[str],
             example: str) -> Iterator[tuple[int, dict[str, Any], str]]:
    """(index, entry, its id) of each entry, its keys and its id checked (an id like ``example``, used once)."""
    seen: dict[str, int] = {}
    for index, raw in enumerate(rows):
        _check_keys(source, index, raw, keys)
        entry_id = _text(source, index, raw, "id")
        line = source.key_line(index, "id")
        if not pattern.match(entry_id):
            raise source.error(line, f"id {entry_id!r} does not look like {example!r}")
        if entry_id in seen:
            raise source.error(line, f"duplicate id {entry_id!r} (first used on line {seen[entry_id]})")
        seen[entry_id] = line
        yield index, raw, entry_id


_FAQ_KEYS = ("id", "category", "question", "keywords", "answer")


def load_faq(path: Path | str, categories: Iterable[str] | None = None) -> tuple[FaqEntry, ...]:
    """Read and check the FAQ file (blocking file I/O; call at startup).

    Args:
        path: The FAQ TOML file.
        categories: When given, every entry's ``category`` must be one of these names
            (the ``[[categories]]`` of ``domain.toml``).

    Raises:
        KnowledgeDataError: The file is missing, not TOML, or an entry is incomplete or wrong.
    """
    path = Path(path)
    data, source = _read(path, "faq", {"faq"})
    allowed = set(categories) if categories is not None else None
    entries = []
    for index, raw, entry_id in _entries(source, data["faq"], _FAQ_KEYS, _FAQ_ID_RE, "faq-doc-001"):
        category = _text(source, index, raw, "category")
        if allowed is not None and category not in allowed:
            raise source.error(source.key_line(index, "category"), f"unknown category {category!r} in {entry_id}")
        answer = _text(source, index, raw, "answer")
        if len(answer) > MAX_ANSWER_CHARS:
            raise source.error(source.key_line(index, "answer"),
                               f"answer of {entry_id} is {len(answer)} characters; keep it under {MAX_ANSWER_CHARS}")
        entries.append(FaqEntry(
            id=entry_id,
            category=category,
            question=_text(source, index, raw, "question"),
            keywords=_words(source, index, raw, "keywords"),
            answer=answer,
            line=source.entry_line(index),
        ))
    return tuple(entries)


_DEPT_KEYS = ("id", "name", "aliases", "phone", "hours", "handles")


def load_directory(path: Path | str) -> Directory:
    """Read and check the department directory (blocking file I/O; call at startup).

    Raises:
        KnowledgeDataError: The file is missing, not TOML, or an entry is incomplete or wrong.
    """
    path = Path(path)
    data, source = _read(path, "department", {"department", "ask"})
    ask = data.get("ask", {})
    ask_words: tuple[str, ...] = ()
    if ask:
        ask_line = _top_key_line(source, "ask")
        if not isinstance(ask, dict) or set(ask) - {"words"}:
            raise source.error(ask_line, "[ask] takes one key, 'words'")
        words = ask.get("words", [])
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise source.error(ask_line, "[ask] words must be a list of non-empty strings")
        ask_words = tuple(w.strip() for w in words)
    names: dict[str, str] = {}
    departments = []
    for index, raw, dept_id in _entries(source, data["department"], _DEPT_KEYS, _DEPT_ID_RE, "dept-clean"):
        name = _text(source, index, raw, "name")
        aliases = _words(source, index, raw, "aliases", required=False)
        # One spoken name must lead to one department, or "OO과 번호" would be a coin toss.
        for alias_key, spoken in [("name", name)] + [("aliases", a) for a in aliases]:
            key = spoken.replace(" ", "")
            if names.get(key, dept_id) != dept_id:
                raise source.error(source.key_line(index, alias_key),
                                   f"{spoken!r} of {dept_id} is already a name of {names[key]}")
            names[key] = dept_id
        phone = _text(source, index, raw, "phone")
        if not _PHONE_RE.match(phone):
            raise source.error(source.key_line(index, "phone"),
                               f"phone {phone!r} of {dept_id} is not digits with dashes like '031-120-2310'")
        departments.append(Department(
            id=dept_id,
            name=name,
            aliases=aliases,
            phone=phone,
            hours=_text(source, index, raw, "hours"),
            handles=_words(source, index, raw, "handles"),
            line=source.entry_line(index),
        ))
    return Directory(departments=tuple(departments), ask_words=ask_words)
