"""The phone voice agent. Where its own files live, for modules at any depth."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT_DIR = PACKAGE_DIR.parent  # the checkout: config.toml, models.toml, .venv-vllm
DATA_DIR = PACKAGE_DIR / "data"
