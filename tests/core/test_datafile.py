"""The data-file loader: the line of a key path in tricky TOML, the common checks, and real loaders
pointing at the right line of a broken copy of their real data file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.config import DEFAULT_CONFIG, ConfigError, load_config
from bot.core.datafile import DataFile, key_path, read_toml
from bot.dialog.domain import DomainError, load_domain
from bot.dialog.emergency import EmergencyDataError, EmergencyRules
from bot.dialog.intake import Intake, IntakeError
from bot.dialog.language_packs import LanguageError, load_language
from bot.dialog.shortcuts import ShortcutError, load_shortcuts
from bot.stages.korean_turn_stop import EndOfTurnRules
from tests.conftest import ROOT

DATA = ROOT / "bot" / "data"

TRICKY = '''\
# a comment with = and [brackets] and [[arrays]]
title = "x = [y]"  # trailing = [z]
[server]
port = 80
a.b.c = 1
"quoted.key" = 2
'literal key' = 3
[server.inner]
x = { y = 1, z = { w = 2 } }
arr = [
  1,  # one, ] and = in a comment
  "two ]",
  { k = "v" },
]
ml = """
[fake]
key = 1
"""
lit = \'\'\'x = [\'\'\'
esc = "a \\" [b] = c"
[[rules]]
name = "a"
[[rules]]
name = "b"
patterns = ['x', 'y']
[rules.sub]
q = 1
[[rules.items]]
z = 1
[[rules.items]]
z = 2
date = 1979-05-27 07:32:00
after = true
'''


@pytest.fixture(scope="module")
def tricky() -> DataFile:
    return DataFile.parse(TRICKY, "t.toml")


@pytest.mark.parametrize(("keys", "line"), [
    (("title",), 2),
    (("server",), 3),
    (("server", "port"), 4),
    (("server", "a"), 5),
    (("server", "a", "b", "c"), 5),
    (("server", "quoted.key"), 6),
    (("server", "literal key"), 7),
    (("server", "inner"), 8),
    (("server", "inner", "x", "z", "w"), 9),
    (("server", "inner", "arr"), 10),
    (("server", "inner", "arr", 0), 11),
    (("server", "inner", "arr", 1), 12),
    (("server", "inner", "arr", 2, "k"), 13),
    (("server", "inner", "ml"), 15),
    (("server", "inner", "lit"), 19),
    (("server", "inner", "esc"), 20),
    (("rules",), 21),
    (("rules", 0), 21),
    (("rules", 0, "name"), 22),
    (("rules", 1), 23),
    (("rules", 1, "patterns", 1), 25),
    (("rules", 1, "sub", "q"), 27),
    (("rules", 1, "items", 0, "z"), 29),
    (("rules", 1, "items", 1), 30),
    (("rules", 1, "items", 1, "after"), 33),
])
def test_the_line_of_a_key_path_in_tricky_toml(tricky: DataFile, keys, line) -> None:
    assert tricky.get(keys) is not None
    assert tricky.line_of(*keys) == line


def test_a_key_not_written_falls_back_to_its_enclosing_table_then_to_no_line(tricky: DataFile) -> None:
    assert tricky.line_of("rules", 1, "missing") == 23
    assert tricky.line_of("server", "inner", "arr", 7) == 10
    assert tricky.line_of("fake") is None  # the header inside a multi-line string is no table
    assert tricky.line_of("nothing", "here") is None
    assert tricky.where(("nothing",)) == "t.toml: nothing"


def test_key_paths_read_as_written() -> None:
    assert key_path(("rules", 3, "patterns", 0)) == "rules[3].patterns[0]"
    assert key_path(("counters", "개")) == 'counters."개"'
    assert key_path(()) == ""


def test_errors_name_file_line_and_key_in_the_callers_type(tricky: DataFile) -> None:
    tricky.error_type = KeyError
    err = tricky.error(("rules", 1, "patterns", 1), "invalid regex")
    assert isinstance(err, KeyError) and err.args[0] == "t.toml:25: rules[1].patterns[1]: invalid regex"


class Bad(ValueError):
    pass


def _source(text: str) -> DataFile:
    return DataFile.parse(text, "f.toml", Bad)


def test_common_checks() -> None:
    src = _source('n = 1\nflag = 1\nname = " "\n[t]\na = 1\nb = 2\n[[row]]\nx = 1\n')
    assert src.value(("n",), int, "a number") == 1
    assert src.value(("absent",), int, "a number", default=7) == 7
    with pytest.raises(Bad, match=r"^f.toml:4: t.c: missing$"):
        src.value(("t", "c"), int, "a number")
    with pytest.raises(Bad, match=r"^f.toml:2: flag: must be true or false, not 1$"):
        src.value(("flag",), bool, "true or false")
    with pytest.raises(Bad, match=r"^f.toml:1: n: must be a string, not 1$"):
        src.value(("n",), str, "a string")
    with pytest.raises(Bad, match=r"^f.toml:3: name: must be a non-empty string"):
        src.text_value(("name",))
    src.value(("n",), int, "a number")  # an int is a number
    with pytest.raises(Bad, match=r"must be a number, not True"):
        _source("n = true\n").value(("n",), int, "a number")  # a bool is not
    with pytest.raises(Bad, match=r"^f.toml:6: t.b: unknown key 'b' \(expected one of a, c\)$"):
        src.no_unknown(("t",), ("a", "c"))
    with pytest.raises(Bad, match=r"^f.toml:4: t: unknown table 't'"):
        src.no_unknown((), ("n", "flag", "name", "row"), what="table")
    assert src.tables(("row",)) == [{"x": 1}]
    with pytest.raises(Bad, match=r"^f.toml:4: t: must be an array of tables \(\[\[t\]\]\)"):
        src.tables(("t",))
    with pytest.raises(Bad, match=r"^f.toml:1: n: must be a table"):
        src.table(("n",))


def test_a_missing_file_or_invalid_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    with pytest.raises(Bad, match="thing not found: .*nope.toml"):
        DataFile.read(tmp_path / "nope.toml", Bad, "thing")
    bad = tmp_path / "bad.toml"
    bad.write_text("a = 1\n\nb = = 2\n", encoding="utf-8")
    with pytest.raises(Bad, match=r"bad.toml:3: invalid TOML"):
        read_toml(bad, Bad, "thing")


def test_every_key_of_every_data_file_has_its_own_line() -> None:
    """No key path of the project's TOML files falls back to an enclosing line, and a named key's
    line has its name on it."""

    def paths(value, path=()):
        yield path
        if isinstance(value, dict):
            for k, v in value.items():
                yield from paths(v, (*path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from paths(v, (*path, i))

    files = [*DATA.rglob("*.toml"), *(ROOT / "bench").glob("*.toml"), ROOT / "config.toml",
             ROOT / "bot" / "desk" / "departments.toml"]
    for file in files:
        src = DataFile.read(file, ValueError, "data file")
        lines = src.text.split("\n")
        src.line_of("x")
        assert src._lines is not None
        for path in paths(src.data):
            if path:
                assert path in src._lines, (file, path)
                if isinstance(path[-1], str):
                    assert path[-1] in lines[src._lines[path] - 1], (file, path)


# --- real loaders on broken copies of their real data files ----------------------------------------


def _broken(tmp_path: Path, real: Path, old: str, new: str, name: str | None = None) -> tuple[Path, int]:
    """A copy of ``real`` with ``old`` replaced by ``new`` once; and the line where ``new`` starts."""
    text = real.read_text(encoding="utf-8")
    assert old in text, old
    at = text.index(old)
    path = tmp_path / (name or real.name)
    path.write_text(text[:at] + new + text[at + len(old):], encoding="utf-8")
    return path, text[:at].count("\n") + 1


def _line_of_error(err: pytest.ExceptionInfo, path: Path) -> int:
    m = re.match(re.escape(str(path)) + r":(\d+): ", str(err.value))
    assert m, str(err.value)
    return int(m.group(1))


def test_shortcuts_point_at_the_bad_pattern(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, DATA / "shortcuts.toml", "patterns = ['(?:네)?(?:${hello}",
                         "patterns = ['((?:네)?(?:${hello}")
    with pytest.raises(ShortcutError, match=r"rules\[0\]\.patterns\[0\]: bad regex '\(\(") as err:
        load_shortcuts(path)
    assert _line_of_error(err, path) == line


def test_shortcuts_point_at_an_unknown_key(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, DATA / "shortcuts.toml", 'name = "hearing_check"\n',
                         'name = "hearing_check"\nprio = 1\n')
    with pytest.raises(ShortcutError, match=r"\.prio: unknown key 'prio'") as err:
        load_shortcuts(path)
    assert _line_of_error(err, path) == line + 1


def test_domain_points_at_the_bad_name(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, DATA / "domain.toml", 'name = "report_problem"', 'name = "Report-Problem"')
    with pytest.raises(DomainError, match=r"intents\[0\]\.name: must be snake_case ASCII") as err:
        load_domain(path)
    assert _line_of_error(err, path) == line


def test_emergency_points_at_the_bad_number_and_a_missing_key_at_its_table(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, DATA / "emergency.toml", '[kind.fire]\nnumber = "119"', '[kind.fire]\nnumber = "11"')
    with pytest.raises(EmergencyDataError, match=r"kind\.fire\.number: must be a string of 3-4 digits") as err:
        EmergencyRules.load(path)
    assert _line_of_error(err, path) == line + 1
    path, line = _broken(tmp_path, DATA / "emergency.toml", '[kind.fire]\nnumber = "119"\n', "[kind.fire]\n")
    with pytest.raises(EmergencyDataError, match=r"kind\.fire\.number: missing") as err:
        EmergencyRules.load(path)
    assert _line_of_error(err, path) == line


def test_end_of_turn_rules_point_at_the_bad_kind(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, DATA / "endpointing.toml", 'kind = "final"\nname = "question_mark"',
                         'kind = "last"\nname = "question_mark"')
    with pytest.raises(ValueError, match=r"rules\[0\]\.kind: must be final or continuing") as err:
        EndOfTurnRules.load(path)
    assert _line_of_error(err, path) == line


def test_intake_and_a_language_pack_point_into_their_tables(tmp_path: Path) -> None:
    domain = load_domain(DATA / "domain.toml")
    path, line = _broken(tmp_path, DATA / "intake.toml", 'needs_time = ["noise", ', 'needs_time = ["noize", ')
    with pytest.raises(IntakeError, match=r"needs_time\[0\]: needs_time names unknown category 'noize'") as err:
        Intake.load(path, domain)
    assert _line_of_error(err, path) == line
    english = ROOT / "bot" / "languages" / "en"
    (tmp_path / "shortcuts.toml").write_text((english / "shortcuts.toml").read_text(encoding="utf-8"))
    path, line = _broken(tmp_path, english / "language.toml", "[intake.category_labels]\n",
                         "[intake.category_labels]\nparks = \"Parks\"\n", name="language.toml")
    with pytest.raises(LanguageError, match=r"intake\.category_labels\.parks: category_labels names unknown") as err:
        load_language("en", domain, tmp_path)
    assert _line_of_error(err, path) == line + 1


def test_config_keeps_naming_the_key_and_adds_the_line(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, DEFAULT_CONFIG, "beam_size = 1", "beam_size = 'one'", name="config.toml")
    with pytest.raises(ConfigError, match=r"stt\.beam_size: expected int, got str 'one'") as err:
        load_config(path)
    assert _line_of_error(err, path) == line
    with pytest.raises(ConfigError, match=r"^stt\.beam_size: expected int"):  # a --set value has no line
        load_config(path, ["stt.beam_size='two'"])
