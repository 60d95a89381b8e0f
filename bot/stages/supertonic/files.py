"""Supertonic's model directory: its layout, the download from the hub, and the checks on it.

Layout (``tts.model_dir``)::

    onnx/{duration_predictor,text_encoder,vector_estimator,vocoder}.onnx
    onnx/tts.json               the config; ``"standin": true`` marks the stand-in (noise, not speech)
    onnx/unicode_indexer.json
    voice_styles/<voice>.json   F1 ... F5, M1 ... M5

The manifest (``bot/modelfiles/manifest.py``) pins these files; the stand-in is built by
``bot/modelfiles/standin.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loguru import logger

from bot.stages.supertonic.errors import TTSDownloadError, TTSModelMissingError

#: Hugging Face hub repository of the real model (what the Supertonic SDK pins).
SUPERTONIC_REPO = "Supertone/supertonic-3"

SESSION_NAMES = ("duration_predictor", "text_encoder", "vector_estimator", "vocoder")

#: Files a usable model directory must contain (relative to it), besides the voice style.
REQUIRED_FILES = (
    *(f"onnx/{name}.onnx" for name in SESSION_NAMES),
    "onnx/tts.json",
    "onnx/unicode_indexer.json",
)

_HOW_TO_GET = (
    "Get the model with `python run_bot.py models` (downloads Supertonic 3 from the Hugging Face "
    "hub), or, without the hub, `python run_bot.py models --offline` (a stand-in voice for "
    "plumbing only: it is noise, not speech)."
)


def resolve(path: str, base_dir: Path | None) -> Path:
    """A config path: ``~`` expanded, relative ones against ``base_dir`` (the current directory when None)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or base_dir is None else Path(base_dir) / p


def read_tts_json(model_dir: Path) -> dict[str, Any]:
    """``onnx/tts.json`` of a model directory (raises ``OSError`` / ``ValueError`` as reading it does)."""
    return json.loads((Path(model_dir) / "onnx" / "tts.json").read_text(encoding="utf-8"))


def is_standin(model_dir: Path) -> bool:
    """Whether the directory holds the stand-in model (raises like ``read_tts_json``)."""
    return bool(read_tts_json(model_dir).get("standin", False))


def check_model_dir(model_dir: Path, voice: str | None = None) -> None:
    """Check that a Supertonic model directory has every file synthesis needs.

    Args:
        model_dir: The directory (``tts.model_dir``).
        voice: Also require ``voice_styles/<voice>.json``; when None, require at least one style.

    Raises:
        TTSModelMissingError: Naming the first missing file and how to get the model.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise TTSModelMissingError(
            f"Supertonic model directory {model_dir} does not exist (tts.model_dir). {_HOW_TO_GET}"
        )
    for rel in REQUIRED_FILES:
        if not (model_dir / rel).is_file():
            raise TTSModelMissingError(f"Supertonic model file missing: {model_dir / rel}. {_HOW_TO_GET}")
    styles = model_dir / "voice_styles"
    if voice is not None:
        if not (styles / f"{voice}.json").is_file():
            have = sorted(p.stem for p in styles.glob("*.json")) if styles.is_dir() else []
            raise TTSModelMissingError(
                f"Supertonic voice style missing: {styles / f'{voice}.json'} (tts.voice = {voice!r}; "
                f"available: {', '.join(have) or 'none'}). {_HOW_TO_GET}"
            )
    elif not styles.is_dir() or not any(styles.glob("*.json")):
        raise TTSModelMissingError(f"No voice styles in {styles}. {_HOW_TO_GET}")


def download_supertonic(model_dir: Path, *, repo_id: str = SUPERTONIC_REPO, revision: str | None = None) -> Path:
    """Download Supertonic 3 from the Hugging Face hub into ``model_dir`` (needs network access).

    Uses ``huggingface_hub.snapshot_download``, which shows tqdm progress bars and resumes
    partial downloads, then checks that every file synthesis needs is there. Blocking.

    Args:
        model_dir: Target directory (``tts.model_dir``).
        repo_id: Hub repository.
        revision: The commit to download (models.toml pins it); None takes what the repository holds today.

    Returns:
        ``model_dir``.

    Raises:
        TTSDownloadError: The hub could not be reached or the download failed.
        TTSModelMissingError: The download finished but files are missing.
    """
    model_dir = Path(model_dir)
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        raise TTSDownloadError(
            "huggingface_hub is not installed (it comes with faster-whisper): pip install huggingface_hub"
        ) from e
    logger.info("Downloading {} at {} into {} (about 400 MB)", repo_id, revision or "its newest commit (NOT PINNED)",
                model_dir)
    try:
        snapshot_download(
            repo_id=repo_id,
            revision=revision,
            local_dir=str(model_dir),
            allow_patterns=["onnx/*", "voice_styles/*", "*.md", "LICENSE*"],
        )
    except Exception as e:
        raise TTSDownloadError(
            f"Could not download {repo_id} into {model_dir}: {type(e).__name__}: {str(e).rstrip('.')}. "
            "Without access to the Hugging Face hub, copy a Supertonic 3 model directory from a "
            "machine that has one and point tts.model_dir at it, or run "
            "`python run_bot.py models --offline` for a stand-in voice (plumbing only, not speech)."
        ) from e
    check_model_dir(model_dir)
    logger.info("Supertonic model ready in {}", model_dir)
    return model_dir
