"""Static checks over the tree: ruff (async and logging rules), the import layers and mypy (pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

BIN = Path(sys.executable).parent


def _run(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_ruff_finds_nothing():
    out = _run(str(BIN / "ruff"), "check", ".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_mypy_finds_nothing():
    # As CI runs it: the packages and flags are pyproject.toml's [tool.mypy]; the version is the dev lock's.
    pinned = next(line.split("==")[1] for line in (ROOT / "requirements" / "dev.in").read_text().splitlines()
                  if line.startswith("mypy=="))
    out = _run(str(BIN / "mypy"), "--version")
    assert out.stdout.split()[:2] == ["mypy", pinned], out.stdout + out.stderr
    out = _run(str(BIN / "mypy"))
    assert out.returncode == 0 and out.stdout.startswith("Success:"), out.stdout[-4000:] + out.stderr[-2000:]


def test_the_import_layers_hold():
    out = _run(str(BIN / "lint-imports"), "--no-cache")
    assert out.returncode == 0 and "BROKEN" not in out.stdout, out.stdout[-4000:]
    assert out.stdout.count("KEPT") == 2


def test_a_new_import_circle_breaks_the_contract(tmp_path):
    # The same tree with one upward import (the dialog state importing the pipeline): CI must fail.
    shutil.copytree(ROOT / "bot", tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__", "data", "migrations"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    state = tmp_path / "bot" / "dialog" / "state.py"
    state.write_text(state.read_text(encoding="utf-8") + "\n\ndef _late():\n    from bot.call.build import build_call\n",
                     encoding="utf-8")
    out = _run(str(BIN / "lint-imports"), "--no-cache", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert out.returncode != 0, out.stdout[-3000:]
    assert "BROKEN" in out.stdout and "bot.dialog.state -> bot.call.build" in out.stdout


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


PACKAGES = sorted(p.name for p in (ROOT / "bot").iterdir() if (p / "__init__.py").is_file())


def test_every_product_package_sits_in_a_layer_of_the_contract():
    layers = _pyproject()["tool"]["importlinter"]["contracts"][0]["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    assert {f"bot.{p}" for p in PACKAGES} - named == set()


def test_mypy_checks_every_product_package():
    checked = {Path(f).name for f in _pyproject()["tool"]["mypy"]["files"]}
    assert set(PACKAGES) - checked - {"testing", "tools"} == set()  # the test helpers and the tools: not the product
