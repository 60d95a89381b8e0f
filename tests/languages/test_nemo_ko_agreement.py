"""scripts/nemo_ko_agreement.py: the product's normalizer against NeMo-text-processing's Korean cases
(tests/fixtures/nemo_ko/, vendored), raw and after the written conventions (issue 44)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("nemo_ko_agreement", ROOT / "scripts" / "nemo_ko_agreement.py")
agreement = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = agreement  # its dataclasses look their module up
_SPEC.loader.exec_module(agreement)


@pytest.fixture(scope="module")
def figures():
    return agreement.measure(agreement.read_cases(), agreement.read_conventions())


def test_vendored_cases_are_whole(figures):
    assert sum(f.rows for f in figures.values()) == 369
    assert set(figures) == {"cardinal", "date", "decimal", "electronic", "fraction", "measure", "money", "ordinal",
                            "telephone", "time"}
    assert (agreement.CASES_DIR / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")


def test_agreement_after_conventions_meets_the_goals(figures):
    rows = sum(f.rows for f in figures.values())
    assert sum(f.after for f in figures.values()) / rows >= 0.90
    for cls, f in figures.items():
        assert f.after / f.rows >= 0.80, (cls, f.misses)


def test_every_convention_says_why_and_what_the_product_chose():
    text = (agreement.CONVENTIONS_FILE).read_text(encoding="utf-8")
    conventions = agreement.read_conventions()
    assert len(conventions) >= 10
    for c in conventions:
        assert f'name = "{c.name}"' in text
    docs = (ROOT / "docs" / "korean.md").read_text(encoding="utf-8")
    for c in conventions:
        assert f"`{c.name}`" in docs, f"docs/korean.md does not list the convention {c.name}"


@pytest.mark.parametrize(
    ("cls", "product", "nemo", "agree"),
    [
        ("telephone", "공일공 일이삼사", "영일영 일이삼사", True),  # 공 or 영 for a zero
        ("telephone", "공일공 일이삼사", "영일영 일이삼오", False),  # a wrong digit stays wrong
        ("money", "공 원", "영원", False),  # zero_in_digits is for digit strings only
        ("date", "삼월 일 일부터 오 일까지", "삼월 일일 부터 오일", True),
        ("date", "삼월 일 일부터 육 일까지", "삼월 일일 부터 오일", False),
        ("time", "열네 시 오 분", "십사시 오분", True),
        ("time", "열세 시 오 분", "십사시 오분", False),
        ("measure", "시속 삼십 킬로미터", "삼십 킬로미터 퍼 시간", True),
        ("measure", "삼십 킬로미터 퍼 아워", "삼십 킬로미터 퍼 시간", False),
        ("electronic", "에이 골뱅이 핫메일 점 디이", "a 골뱅이 hotmail 닷 디이", True),
        ("electronic", "에이 골뱅이 핫메일.디이", "a 골뱅이 hotmail 닷 디이", False),  # the dot left unread
    ],
)
def test_a_convention_only_excuses_its_own_difference(cls, product, nemo, agree):
    conventions = agreement.read_conventions()
    assert (agreement.canonical(product, cls, conventions) == agreement.canonical(nemo, cls, conventions)) is agree


def test_exit_status(tmp_path: Path, capsys):
    assert agreement.main([]) == 0
    assert "after" in capsys.readouterr().out
    assert agreement.main(["--goal", "100.1"]) == 1  # above what any run can reach
    bad = tmp_path / "conventions.toml"
    bad.write_text('[[convention]]\nname = "x"\nclasses = ["*"]\npattern = "("\nreplace = ""\nwhy = ""\nproduct = ""\n',
                   encoding="utf-8")
    assert agreement.main(["--conventions", str(bad)]) == 2
    assert agreement.main(["--cases", str(tmp_path)]) == 2  # no test_cases_*.txt there
