#!/usr/bin/env python3
"""Agreement of the product's Korean normalizer with NVIDIA NeMo-text-processing's Korean test cases.

Every row of tests/fixtures/nemo_ko/test_cases_<class>.txt (``written~spoken``, written by NeMo's
authors, vendored unchanged) goes through ``normalize_korean``, the function the TTS stage uses. Per
class it prints three figures:

- exact: the product's text equals NeMo's;
- raw: equal once spaces are ignored (a space is not heard);
- after conventions: equal once every convention of tests/fixtures/nemo_ko/conventions.toml (two
  readings that are both right, e.g. 공 or 영 for a zero) is applied to both sides.

Exits 1 below the goals (``--goal`` overall and ``--class-goal`` per class, after conventions) and 2
when the cases or the conventions cannot be read.

    python scripts/nemo_ko_agreement.py
    python scripts/nemo_ko_agreement.py --misses     # every row that disagrees after conventions
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.languages.ko.normalize import normalize_korean, read_address_part  # noqa: E402

CASES_DIR = ROOT / "tests" / "fixtures" / "nemo_ko"
CONVENTIONS_FILE = CASES_DIR / "conventions.toml"
GOAL = 90.0  # % of all rows, after conventions
CLASS_GOAL = 80.0  # % of each class, after conventions
_PRODUCT = "@product"  # a convention's replace: the product's own reading of the match, as an address part


@dataclass(frozen=True)
class Convention:
    """Two readings that are both right: ``pattern`` is rewritten the same way on both sides."""

    name: str
    classes: tuple[str, ...]
    pattern: re.Pattern[str]
    replace: str | None = None
    table: dict[str, str] = field(default_factory=dict)
    raw: bool = False

    def applies(self, cls: str) -> bool:
        return "*" in self.classes or cls in self.classes

    def apply(self, text: str) -> str:
        if self.table:
            return self.pattern.sub(lambda m: self.table.get(m.group(0), m.group(0)), text)
        if self.replace == _PRODUCT:
            return self.pattern.sub(lambda m: re.sub(r"\s+", "", read_address_part(m.group(0))), text)
        return self.pattern.sub(self.replace or "", text)


@dataclass
class ClassFigures:
    rows: int = 0
    exact: int = 0
    raw: int = 0
    after: int = 0
    misses: list[tuple[str, str, str]] = field(default_factory=list)


def read_cases(folder: Path = CASES_DIR) -> dict[str, list[tuple[str, str]]]:
    """{class: [(written, spoken)]} from test_cases_<class>.txt; a malformed line raises ValueError."""
    cases: dict[str, list[tuple[str, str]]] = {}
    files = sorted(folder.glob("test_cases_*.txt"))
    if not files:
        raise ValueError(f"{folder}: no test_cases_*.txt")
    for path in files:
        cls = path.stem.removeprefix("test_cases_")
        rows = cases.setdefault(cls, [])
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            if "~" not in line:
                raise ValueError(f"{path.name}:{number}: no '~' between the written and the spoken text")
            written, spoken = line.split("~", 1)
            rows.append((written, spoken.strip()))
    return cases


def read_conventions(path: Path = CONVENTIONS_FILE) -> list[Convention]:
    """The conventions table; a bad entry raises ValueError naming it."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, entry in enumerate(data.get("convention", [])):
        name = entry.get("name", f"#{i + 1}")
        missing = {"name", "classes", "pattern", "why", "product"} - entry.keys()
        if missing or ("replace" in entry) == ("map" in entry):
            raise ValueError(f"{path.name}: convention {name}: needs {sorted(missing)} and one of replace or map")
        try:
            pattern = re.compile(entry["pattern"])
        except re.error as e:
            raise ValueError(f"{path.name}: convention {name}: bad pattern: {e}") from e
        out.append(Convention(name, tuple(entry["classes"]), pattern, entry.get("replace"), dict(entry.get("map", {})),
                              bool(entry.get("raw", False))))
    if not out:
        raise ValueError(f"{path.name}: no [[convention]]")
    return out


def canonical(text: str, cls: str, conventions: list[Convention], raw_only: bool = False) -> str:
    """``text`` with the conventions of ``cls`` applied (only the raw ones when ``raw_only``)."""
    for c in conventions:
        if c.applies(cls) and (c.raw or not raw_only):
            text = c.apply(text)
    return text


def measure(cases: dict[str, list[tuple[str, str]]], conventions: list[Convention]) -> dict[str, ClassFigures]:
    """Per class: rows, exact, raw and after-conventions agreement, and the rows that disagree."""
    figures = {}
    for cls, rows in cases.items():
        f = figures[cls] = ClassFigures()
        for written, spoken in rows:
            got = normalize_korean(written)
            f.rows += 1
            f.exact += got == spoken
            f.raw += canonical(got, cls, conventions, True) == canonical(spoken, cls, conventions, True)
            if canonical(got, cls, conventions) == canonical(spoken, cls, conventions):
                f.after += 1
            else:
                f.misses.append((written, got, spoken))
    return figures


def _pct(hit: int, total: int) -> float:
    return 100.0 * hit / total if total else 100.0


def report(figures: dict[str, ClassFigures], misses: bool = False) -> tuple[float, float]:
    """Prints the table; returns (overall %, lowest class %) after conventions."""
    print(f"{'class':<12}{'rows':>6}{'exact':>9}{'raw':>9}{'after':>9}")
    for cls, f in figures.items():
        print(f"{cls:<12}{f.rows:>6}{_pct(f.exact, f.rows):>8.1f}%{_pct(f.raw, f.rows):>8.1f}%"
              f"{_pct(f.after, f.rows):>8.1f}%")
    rows = sum(f.rows for f in figures.values())
    totals = [sum(getattr(f, k) for f in figures.values()) for k in ("exact", "raw", "after")]
    print(f"{'all':<12}{rows:>6}" + "".join(f"{_pct(t, rows):>8.1f}%" for t in totals)
          + f"   ({totals[0]}, {totals[1]}, {totals[2]} of {rows})")
    if misses:
        for cls, f in figures.items():
            for written, got, spoken in f.misses:
                print(f"  {cls}: {written!r}\n      product: {got}\n      NeMo:    {spoken}")
    return _pct(totals[2], rows), min(_pct(f.after, f.rows) for f in figures.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=CASES_DIR, help="folder of test_cases_*.txt")
    ap.add_argument("--conventions", type=Path, default=CONVENTIONS_FILE)
    ap.add_argument("--goal", type=float, default=GOAL, help="overall %% after conventions")
    ap.add_argument("--class-goal", type=float, default=CLASS_GOAL, help="each class's %% after conventions")
    ap.add_argument("--misses", action="store_true", help="list every row that disagrees after conventions")
    args = ap.parse_args(argv)
    try:
        cases, conventions = read_cases(args.cases), read_conventions(args.conventions)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as e:
        print(f"cannot judge: {e}", file=sys.stderr)
        return 2
    overall, lowest = report(measure(cases, conventions), args.misses)
    if overall < args.goal or lowest < args.class_goal:
        print(f"below the goals: {overall:.1f}% overall (goal {args.goal}%), lowest class {lowest:.1f}% "
              f"(goal {args.class_goal}%)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
