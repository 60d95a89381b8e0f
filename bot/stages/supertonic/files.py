"""Supertonic's model directory: its layout, the download from the hub, and the checks on it.

Layout (``tts.model_dir``)::

    onnx/{duration_predictor,text_encoder,vector_estimator,vocoder}.onnx
    onnx/tts.json               the config; ``"standin": true`` marks the stand-in (noise, not speech)
    onnx/unicode_indexer.json
    voice_styles/<voice>.json   F1 ... F5, M1 ... M5

This module is the one home of those names: the engine loads, the manifest (``bot/modelfiles/manifest.py``)
pins and the stand-in (``bot/modelfiles/standin.py``) writes the files it names here.
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
VOICES = ("F1", "F2", "F3", "F4", "F5", "M1", "M2", "M3", "M4", "M5")  # the styles Supertonic 3 ships

ONNX_DIR, STYLES_DIR = "onnx", "voice_styles"
TTS_JSON = f"{ONNX_DIR}/tts.json"
INDEXER_JSON = f"{ONNX_DIR}/unicode_indexer.json"
#: What a download from the hub takes (besides the model card and licence).
HUB_PATTERNS = (f"{ONNX_DIR}/*", f"{STYLES_DIR}/*")

#: Files a usable model directory must contain (relative to it), besides the voice style.
REQUIRED_FILES = (
    *(f"{ONNX_DIR}/{name}.onnx" for name in SESSION_NAMES),
    TTS_JSON,
    INDEXER_JSON,
)


def session_file(model_dir: Path, name: str) -> Path:
    """One of the four ONNX graphs (``SESSION_NAMES``)."""
    return Path(model_dir) / ONNX_DIR / f"{name}.onnx"


def style_file(model_dir: Path, voice: str) -> Path:
    return Path(model_dir) / STYLES_DIR / f"{voice}.json"


def style_files(model_dir: Path) -> list[Path]:
    """Every voice style of a model directory, by name."""
    return sorted((Path(model_dir) / STYLES_DIR).glob("*.json"))

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
    return json.loads((Path(model_dir) / TTS_JSON).read_text(encoding="utf-8"))


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
    styles = model_dir / STYLES_DIR
    if voice is not None:
        if not style_file(model_dir, voice).is_file():
            have = [p.stem for p in style_files(model_dir)]
            raise TTSModelMissingError(
                f"Supertonic voice style missing: {style_file(model_dir, voice)} (tts.voice = {voice!r}; "
                f"available: {', '.join(have) or 'none'}). {_HOW_TO_GET}"
            )
    elif not style_files(model_dir):
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
            allow_patterns=[*HUB_PATTERNS, "*.md", "LICENSE*"],
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
