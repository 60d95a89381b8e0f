"""The pattern grammar of ``shortcuts.toml`` and ``emergency.toml``: macros, ``${name}`` expansion, compiling.

A pattern is a regex over the normalized utterance (``bot.dialog.shortcuts.normalize``: no spaces).
``[macros]`` names regex pieces, a list being an alternation, that patterns and other macros use as
``${name}``; each expands inside ``(?:...)``. Errors are the file's own type and name its line and key::

    macros = load_macros(source)
    regex = compile_pattern(source, ("rules", 3, "patterns", 0), "${thanks}요", macros)
    # ShortcutError: bot/data/shortcuts.toml:42: rules[3].patterns[0]: unknown macro ${thanks}
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.core.datafile import DataFile, Keys

_MACRO_RE = re.compile(r"\$\{(\w+)\}")
_SPACE_RE = re.compile(r"\s")


def load_macros(source: DataFile) -> dict[str, str]:
    """``[macros]``, each as one regex with the macros it names expanded (a list is an alternation)."""
    bodies: dict[str, str] = {}
    for name, value in source.table(("macros",), default={}).items():
        if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
            value = "|".join(value)
        if not isinstance(value, str) or not value or _SPACE_RE.search(value):
            raise source.error(("macros", name), "must be a regex or a list of regexes, without spaces")
        bodies[name] = value
    done: dict[str, str] = {}

    def resolve(name: str, stack: tuple[str, ...]) -> str:
        if name not in done:
            if name in stack:
                raise source.error(("macros", name), "refers to itself")
            done[name] = expand(bodies[name], bodies, source, ("macros", name),
                                lambda m: resolve(m, (*stack, name)))
        return done[name]

    for name in bodies:
        resolve(name, ())
    return done


def expand(pattern: str, macros: dict[str, str], source: DataFile, key: Keys,
           resolve: Callable[[str], str] | None = None) -> str:
    """``pattern`` with each ``${name}`` replaced by its macro (``resolve`` expands that macro first).

    Raises:
        source's error type: "unknown macro ${name}", at ``key``.
    """

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in macros:
            raise source.error(key, f"unknown macro ${{{name}}}")
        return f"(?:{resolve(name) if resolve else macros[name]})"

    return _MACRO_RE.sub(sub, pattern)


def compile_pattern(source: DataFile, key: Keys, pattern: str, macros: dict[str, str], *,
                    group: bool = False) -> re.Pattern[str]:
    """One pattern, its macros expanded, compiled; ``group`` compiles it as ``(?:...)``, to join with ``|``.

    Raises:
        source's error type, at ``key``: whitespace, an unknown macro or a regex that does not compile.
    """
    if _SPACE_RE.search(pattern):
        raise source.error(key, f"pattern {pattern!r} has whitespace (the normalized form has none)")
    regex = expand(pattern, macros, source, key)
    try:
        # A grouped pattern is checked in the form it will be joined in.
        return re.compile(f"(?:{regex})" if group else regex)
    except re.error as e:
        raise source.error(key, f"bad regex {pattern!r}: {e}") from e
