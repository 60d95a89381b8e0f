"""models.toml: pinned revisions and digests, verification by models --verify, check and serve, mirrors the
city owns (a directory, an HTTP server), and no silent fallback to the offline set.

The production rows cannot be pinned from here (no hub): the tests pin a manifest from given digests, and
check every file of the offline set (Whisper base from PyPI, the stand-in TTS), whose digests are real.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.config import load_config
from bot.core.digest import sha256_file
from bot.core.errors import ModelIntegrityError, ModelMissingError, StartupError
from bot.modelfiles import manifest as models
from bot.ops import preflight as check
from tests.conftest import ROOT

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _flip_one_byte(path: Path, at: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture()
def offline_copy(tmp_path, whisper_dir, standin_tts_dir):
    """A copy of the offline set that a test may alter (Whisper's 145 MB model.bin hard-linked: only the
    small files and the stand-in are copied; a test that alters model.bin copies it first)."""
    stt = tmp_path / "models" / "whisper-base"
    stt.mkdir(parents=True)
    for f in whisper_dir.iterdir():
        if f.name == "model.bin":
            (stt / f.name).hardlink_to(f)
        elif f.is_file():
            shutil.copy2(f, stt / f.name)
    tts = tmp_path / "models" / "supertonic-3"
    shutil.copytree(standin_tts_dir, tts)
    return stt, tts


def _config(stt: Path, tts: Path, *extra: str):
    return load_config(overrides=[f"stt.model='{stt}'", f"tts.model_dir='{tts}'", *extra])


# --- the manifest -------------------------------------------------------------------------------


def test_the_manifest_names_every_model_and_invents_no_production_digest():
    entries = models.load_manifest(ROOT / "models.toml")
    gpu = load_config("config.gpu.toml")
    assert entries["supertonic-3"].repo == "Supertone/supertonic-3"
    assert entries["whisper-large-v3-turbo"].repo == "mobiuslabsgmbh/faster-whisper-large-v3-turbo"
    assert gpu.stt.model.endswith("whisper-large-v3-turbo")
    assert models.llm_entry(gpu).repo == gpu.llm.model == "Qwen/Qwen3.5-35B-A3B-FP8"
    # Not read from the hub, so not written: these rows say NOT PINNED until `models --pin` runs with the hub.
    for name in ("supertonic-3", "whisper-large-v3-turbo", "qwen3.5-35b-a3b-fp8", "whisper-base"):
        assert entries[name].revision == "" and entries[name].files == {} and not entries[name].pinned, name
    offline_stt, offline_tts = entries["whisper-base-offline"], entries["supertonic-standin"]
    assert offline_stt.offline and offline_stt.pinned and offline_tts.offline and offline_tts.pinned
    assert offline_stt.files["model.bin"] == models.OFFLINE_WHISPER_SHA256
    assert len(offline_tts.files) == 16  # 4 sessions, tts.json, the indexer, 10 voices


def test_the_stand_in_is_byte_identical_every_time_so_its_digests_can_be_pinned(tmp_path):
    from bot.modelfiles.standin import build_standin_model

    build_standin_model(tmp_path / "a")
    entry = models.load_manifest(ROOT / "models.toml")["supertonic-standin"]
    assert models.verify_dir(entry, tmp_path / "a").problems == []


def test_the_stand_in_the_manifest_and_the_download_take_the_files_one_module_names(standin_tts_dir):
    from bot.stages.supertonic import files

    want = {*files.REQUIRED_FILES, *(f"{files.STYLES_DIR}/{voice}.json" for voice in files.VOICES)}
    written = {p.relative_to(standin_tts_dir).as_posix() for p in standin_tts_dir.rglob("*") if p.is_file()}
    entries = models.load_manifest(ROOT / "models.toml")
    assert written == set(entries["supertonic-standin"].files) == want
    assert entries["supertonic-3"].patterns == list(files.HUB_PATTERNS)
    assert entries["supertonic-3"].repo == files.SUPERTONIC_REPO


def test_a_branch_name_or_a_bad_digest_in_the_manifest_is_refused(tmp_path):
    (tmp_path / "models.toml").write_text('[x]\nuse = "tts"\nrepo = "a/b"\nrevision = "main"\n')
    with pytest.raises(ModelIntegrityError, match="not a commit hash"):
        models.load_manifest(tmp_path / "models.toml")
    (tmp_path / "models.toml").write_text('[x]\nuse = "tts"\nrevision = ""\n[x.files]\n"a" = "abc"\n')
    with pytest.raises(ModelIntegrityError, match="not a sha256"):
        models.load_manifest(tmp_path / "models.toml")


def test_pin_writes_the_commit_and_every_digest_and_keeps_the_rest(tmp_path):
    manifest = tmp_path / "models.toml"
    shutil.copy(ROOT / "models.toml", manifest)
    asked = []

    def digests_for(repo, patterns):
        asked.append((repo, tuple(patterns)))
        return COMMIT, {"onnx/vocoder.onnx": "a" * 64, "voice_styles/F1.json": "b" * 64}

    done = models.pin_manifest(manifest, ["supertonic-3", "qwen3.5-35b-a3b-fp8"], digests_for=digests_for)
    assert [d.split(":")[0] for d in done] == ["supertonic-3", "qwen3.5-35b-a3b-fp8"]
    assert asked == [("Supertone/supertonic-3", ("onnx/*", "voice_styles/*")),
                     ("Qwen/Qwen3.5-35B-A3B-FP8", ("*.json", "*.safetensors", "*.txt", "*.jinja", "*.model",
                                                   "*.tiktoken"))]  # fmt: skip
    after = models.load_manifest(manifest)
    assert after["supertonic-3"].revision == COMMIT and after["supertonic-3"].pinned
    assert after["supertonic-3"].files == {"onnx/vocoder.onnx": "a" * 64, "voice_styles/F1.json": "b" * 64}
    assert after["qwen3.5-35b-a3b-fp8"].revision == COMMIT
    before = models.load_manifest(ROOT / "models.toml")
    for name in ("whisper-large-v3-turbo", "whisper-base-offline", "supertonic-standin"):
        assert after[name] == before[name], name
    text = manifest.read_text()
    assert text.startswith("# Pinned model files") and "# --- the offline set" in text
    # Pinned again (a newer commit): the table is replaced, not appended to.
    models.pin_manifest(manifest, ["supertonic-3"], digests_for=lambda r, p: ("f" * 40, {"onnx/x.onnx": "c" * 64}))
    assert models.load_manifest(manifest)["supertonic-3"].files == {"onnx/x.onnx": "c" * 64}


def test_pin_reads_lfs_digests_from_the_hub_listing_without_downloading_them():
    class Sibling:
        def __init__(self, name, sha=None):
            self.rfilename, self.lfs = name, ({"sha256": sha} if sha else None)

    class Api:
        def model_info(self, repo, files_metadata):
            assert files_metadata
            return type("Info", (), {"sha": COMMIT, "siblings": [Sibling("onnx/vocoder.onnx", "d" * 64),
                                                                  Sibling("README.md", "e" * 64)]})()  # fmt: skip

    revision, files = models.hub_file_digests("Supertone/supertonic-3", ["onnx/*"], api=Api())
    assert revision == COMMIT and files == {"onnx/vocoder.onnx": "d" * 64}


def test_llm_command_passes_the_pinned_revision_to_vllm(tmp_path):
    shutil.copy(ROOT / "config.gpu.toml", tmp_path / "config.gpu.toml")
    shutil.copy(ROOT / "models.toml", tmp_path / "models.toml")
    cfg = load_config(tmp_path / "config.gpu.toml")
    assert "--revision" not in check.llm_command(cfg)  # not pinned: nothing to pass (check says NOT PINNED)
    models.pin_manifest(tmp_path / "models.toml", ["qwen3.5-35b-a3b-fp8"],
                        digests_for=lambda r, p: (COMMIT, {"model.safetensors": "a" * 64}))
    cmd = check.llm_command(cfg)
    assert cmd[cmd.index("--revision") + 1] == COMMIT and cmd[cmd.index("--tokenizer-revision") + 1] == COMMIT
    docker = check.vllm_launch(cfg, docker=True)
    assert docker[docker.index("--revision") + 1] == COMMIT


# --- verification: models --verify, check, serve ------------------------------------------------


def test_the_offline_set_verifies_file_by_file(offline_copy):
    stt, tts = offline_copy
    found = dict(models.verify_models(_config(stt, tts)))
    assert found["stt"].entry.name == "whisper-base-offline" and found["stt"].checked == 4
    assert found["tts"].entry.name == "supertonic-standin" and found["tts"].checked == 16
    assert not found["stt"].problems and not found["tts"].problems


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_a_damaged_tts_file_fails_verify_check_and_serve_naming_the_file_and_digests(offline_copy, damage, capsys):
    stt, tts = offline_copy
    target = tts / "onnx" / "vocoder.onnx"
    want = models.load_manifest(ROOT / "models.toml")["supertonic-standin"].files["onnx/vocoder.onnx"]
    if damage == "flip":
        _flip_one_byte(target)
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:1000])
    else:
        target.unlink()
    cfg = _config(stt, tts)
    # models --verify
    assert models.print_verification(cfg) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("FAIL"))
    assert str(target) in line and want in line
    if damage != "delete":
        assert sha256_file(target) in line
    # check
    report = check.CheckReport()
    check.model_rows(report, cfg)
    row = next(r for r in report.rows if r.item == "tts")
    assert row.status == check.FAIL and str(target) in row.detail and want in row.detail
    # serve: stops before loading anything
    with pytest.raises(StartupError, match="not serving") as e:
        models.require_verified_models(cfg)
    assert str(target) in str(e.value) and want in str(e.value)


def test_one_byte_flipped_in_whispers_model_bin_fails_every_check(offline_copy, whisper_dir):
    stt, tts = offline_copy
    (stt / "model.bin").unlink()  # the hard link: flip a copy, never the shared file
    shutil.copyfile(whisper_dir / "model.bin", stt / "model.bin")
    _flip_one_byte(stt / "model.bin", at=50_000_000)
    found = dict(models.verify_models(_config(stt, tts)))
    problem = " ".join(found["stt"].problems)
    assert str(stt / "model.bin") in problem and models.OFFLINE_WHISPER_SHA256 in problem


@pytest.mark.slow  # a subprocess
def test_serve_and_models_verify_as_processes_stop_on_one_flipped_byte(offline_copy):
    stt, tts = offline_copy
    _flip_one_byte(tts / "voice_styles" / "F1.json")
    sets = ["--set", f"stt.model='{stt}'", "--set", f"tts.model_dir='{tts}'"]
    run = functools.partial(subprocess.run, cwd=ROOT, capture_output=True, text=True, timeout=180)
    verify = run([sys.executable, "run_bot.py", "models", "--verify", *sets])
    assert verify.returncode == 1 and str(tts / "voice_styles" / "F1.json") in verify.stdout
    serve = run([sys.executable, "run_bot.py", "serve", *sets, "--set", "server.port=1"])
    assert serve.returncode == 1, serve.stderr[-2000:]
    assert "model files are not the ones models.toml pins" in serve.stderr
    assert str(tts / "voice_styles" / "F1.json") in serve.stderr and "Traceback" not in serve.stderr


def test_check_says_not_pinned_and_how_to_pin(tmp_path, standin_tts_dir, whisper_dir, capsys):
    real = tmp_path / "supertonic-3"
    shutil.copytree(standin_tts_dir, real)
    tts_json = real / "onnx" / "tts.json"
    tts_json.write_text(tts_json.read_text().replace('"standin": true', '"standin": false'))  # "the real model"
    cfg = _config(whisper_dir, real)
    report = check.CheckReport()
    check.model_rows(report, cfg)
    rows = {r.item: r for r in report.rows}
    assert rows["tts"].status == check.WARN and "NOT PINNED" in rows["tts"].detail
    assert "run_bot.py models --pin" in rows["tts"].detail and "supertonic-3" in rows["tts"].detail
    assert rows["llm"].status == check.WARN and "NOT PINNED" in rows["llm"].detail
    assert models.print_verification(cfg) == 0  # nothing failed, but it cannot be checked: said loudly
    out = capsys.readouterr().out
    assert "NOT PINNED in models.toml: supertonic-3, qwen3.5-35b-a3b-fp8" in out


# --- mirrors ------------------------------------------------------------------------------------


@pytest.fixture()
def mirror(tmp_path, offline_copy):
    stt, tts = offline_copy
    done = models.make_mirror(_config(stt, tts), tmp_path / "mirror")
    assert [d.split(":")[0] for d in done] == ["whisper-base-offline", "supertonic-standin"]
    return tmp_path / "mirror"


def _fetch_from(source: str, dest: Path):
    cfg = load_config(overrides=[f"stt.model='{dest / 'whisper-base'}'", f"stt.download_root='{dest}'",
                                 f"tts.model_dir='{dest / 'supertonic-3'}'", f"stt.model_source='{source}'",
                                 f"tts.model_source='{source}'"])  # fmt: skip
    models.ensure_models(cfg, offline=True)
    return cfg


def test_a_mirror_directory_serves_the_models_checked_against_the_manifest(tmp_path, mirror):
    assert (mirror / "supertonic-standin" / ".model.json").is_file()
    cfg = _fetch_from(str(mirror), tmp_path / "got")
    found = dict(models.verify_models(cfg))
    assert found["stt"].checked == 4 and found["tts"].checked == 16
    assert not found["stt"].problems and not found["tts"].problems
    assert "mirror" in models._read_marker(tmp_path / "got" / "supertonic-3")["source"]


def test_an_http_mirror_serves_the_models_and_an_altered_file_there_is_refused(tmp_path, mirror):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        cfg = _fetch_from(url, tmp_path / "got")
        assert all(not c.problems for _, c in models.verify_models(cfg))
        _flip_one_byte(mirror / "supertonic-standin" / "onnx" / "text_encoder.onnx")
        with pytest.raises(ModelMissingError, match="text_encoder.onnx: sha256 [0-9a-f]{64}, expected") as e:
            _fetch_from(url, tmp_path / "again")
        assert url in str(e.value)
        assert not (tmp_path / "again" / "supertonic-3" / "onnx" / "text_encoder.onnx").exists()  # not installed
    finally:
        server.shutdown()


def test_a_mirror_without_the_model_says_how_to_make_one(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelMissingError, match="models --mirror DIR"):
        _fetch_from(str(tmp_path / "empty"), tmp_path / "got")


# --- no silent fallback ----------------------------------------------------------------------------


def test_a_failed_download_never_turns_into_the_stand_in(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub "fails" at once
    cfg = load_config(overrides=[f"tts.model_dir='{tmp_path / 'supertonic-3'}'", f"stt.download_root='{tmp_path}'",
                                 f"stt.model='{tmp_path / 'whisper-base'}'"])  # fmt: skip
    with pytest.raises(ModelMissingError):
        models.ensure_models(cfg)
    assert not (tmp_path / "supertonic-3" / "onnx" / "tts.json").exists()
    assert not (tmp_path / "whisper-base" / "model.bin").exists()


def test_the_offline_set_is_taken_only_when_declared(tmp_path):
    cfg = load_config(overrides=[f"tts.model_dir='{tmp_path / 'tts'}'", "tts.model_source='offline'"])
    path = models.fetch_supertonic(cfg.tts, cfg.base_dir)
    assert models._read_marker(path)["entry"] == "supertonic-standin"
    assert models.tts_model_check(cfg).entry.offline


def test_setup_falls_back_to_the_offline_set_only_without_hub_and_mirror_and_says_so():
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert "elif ! .venv/bin/python run_bot.py models; then" not in setup  # the old fallback on any failure
    branch = setup[setup.index('elif [ "$req" = requirements.txt ] && no_hub_and_no_mirror; then'):]
    branch = branch[:branch.index("\n  fi\n")]
    assert "OFFLINE model set" in branch and "run_bot.py models --offline" in branch
    assert branch.rstrip().endswith(".venv/bin/python run_bot.py models")  # else: the hub or mirror; errors stop
    assert "--require-hashes -r <(only" in branch


# --- without the hub: say so, change nothing --------------------------------------------------------


@pytest.fixture()
def no_hub(monkeypatch):
    """The model hub unreachable: HF_ENDPOINT on a closed local port (nothing answers, nothing waits)."""
    import socket

    import huggingface_hub.constants

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return endpoint


@pytest.fixture()
def offline_home(tmp_path, whisper_dir, standin_tts_dir):
    """A checkout's config.toml, models.toml and offline set as `scripts/setup.sh --dev` leaves them (own
    copies: model.bin too, so that nothing a test runs can touch the shared one)."""
    shutil.copy(ROOT / "config.toml", tmp_path / "config.toml")
    shutil.copy(ROOT / "models.toml", tmp_path / "models.toml")
    shutil.copytree(whisper_dir, tmp_path / "models" / "whisper-base")
    shutil.copytree(standin_tts_dir, tmp_path / "models" / "supertonic-3")
    models.ensure_models(load_config(tmp_path / "config.toml"), offline=True)
    return tmp_path


def _models_state(home: Path) -> dict:
    """Every file under models/ (small ones by content, model.bin by size and mtime) and what --verify finds."""
    files = {str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns) if p.name == "model.bin"
             else p.read_bytes() for p in (home / "models").rglob("*") if p.is_file()}  # fmt: skip
    found = {use: (c.entry.name, c.checked, c.problems) for use, c in
             models.verify_models(load_config(home / "config.toml"))}  # fmt: skip
    return {"files": files, "verify": found}


def test_models_without_the_hub_says_so_changes_nothing_and_fails(offline_home, no_hub):
    before = _models_state(offline_home)
    assert before["verify"]["stt"] == ("whisper-base-offline", 4, [])
    with pytest.raises(ModelMissingError, match="unreachable") as e:
        models.ensure_models(load_config(offline_home / "config.toml"))
    assert no_hub in str(e.value) and "models --offline" in str(e.value)
    assert _models_state(offline_home) == before


def test_pin_without_the_hub_says_so_and_leaves_the_manifest_as_it_was(tmp_path, no_hub):
    shutil.copy(ROOT / "models.toml", tmp_path / "models.toml")
    before = (tmp_path / "models.toml").read_bytes()
    with pytest.raises(ModelMissingError, match="unreachable"):
        models.pin_manifest(tmp_path / "models.toml")
    assert (tmp_path / "models.toml").read_bytes() == before


@pytest.mark.slow  # subprocesses: run_bot.py as the docs and the startup banner tell a user to run it
def test_run_bot_models_without_the_hub_exits_non_zero_and_verify_still_passes(offline_home, no_hub):
    before = _models_state(offline_home)
    run = functools.partial(subprocess.run, cwd=ROOT, capture_output=True, text=True, timeout=180)
    config = ["--config", str(offline_home / "config.toml")]
    got = run([sys.executable, "run_bot.py", "models", *config])
    assert got.returncode != 0 and "unreachable" in got.stderr and "Traceback" not in got.stderr
    assert _models_state(offline_home) == before
    verify = run([sys.executable, "run_bot.py", "models", "--verify", *config])
    assert verify.returncode == 0, verify.stdout
    assert "whisper-base-offline" in verify.stdout and "FAIL" not in verify.stdout


# --- downloads ask for the pinned revision and are checked ----------------------------------------


@pytest.fixture()
def pinned_home(tmp_path, standin_tts_dir):
    """A config directory with its own models.toml that pins Supertonic 3 and Whisper base to a commit, with
    the digests of "real" files (the stand-in relabelled; Whisper base from PyPI) the fake hub serves."""
    real = tmp_path / "hub-supertonic"
    shutil.copytree(standin_tts_dir, real)
    tts_json = real / "onnx" / "tts.json"
    tts_json.write_text(tts_json.read_text().replace('"standin": true', '"standin": false'))
    shutil.copy(ROOT / "config.toml", tmp_path / "config.toml")
    shutil.copy(ROOT / "models.toml", tmp_path / "models.toml")
    digests = {str(p.relative_to(real)): sha256_file(p) for p in real.rglob("*") if p.is_file()}
    models.pin_manifest(tmp_path / "models.toml", ["supertonic-3"], digests_for=lambda r, p: (COMMIT, digests))
    return tmp_path, real


def test_the_hub_download_asks_for_the_pinned_commit_and_checks_every_file(pinned_home, monkeypatch):
    import huggingface_hub

    home, real = pinned_home
    asked = []

    def snapshot_download(repo_id, revision, local_dir, allow_patterns):
        asked.append((repo_id, revision))
        shutil.copytree(real, local_dir, dirs_exist_ok=True)
        return local_dir

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(models, "hub_problem", lambda: None)  # the fake hub answers
    cfg = load_config(home / "config.toml", [f"tts.model_dir='{home / 'tts'}'"])
    models.fetch_supertonic(cfg.tts, cfg.base_dir)
    assert asked == [("Supertone/supertonic-3", COMMIT)]
    assert models._read_marker(home / "tts") == {"entry": "supertonic-3", "revision": COMMIT,
                                                  "source": "hub Supertone/supertonic-3"}  # fmt: skip
    check_ = models.tts_model_check(cfg)
    assert check_.pinned and check_.checked == 16 and not check_.problems
    # The hub (or a man in the middle) serves other bytes: named, with both digests; no marker written.
    _flip_one_byte(real / "onnx" / "text_encoder.onnx")
    shutil.rmtree(home / "tts")
    with pytest.raises(ModelIntegrityError, match=r"text_encoder.onnx: sha256 [0-9a-f]{64}, expected [0-9a-f]{64}"):
        models.fetch_supertonic(cfg.tts, cfg.base_dir)
    assert not (home / "tts" / models.MARKER_FILE).exists()


def test_the_whisper_download_asks_for_the_pinned_commit(tmp_path, monkeypatch, whisper_dir):
    import faster_whisper.utils

    shutil.copy(ROOT / "models.toml", tmp_path / "models.toml")
    files = {f: sha256_file(whisper_dir / f) for f in ("config.json", "model.bin", "tokenizer.json",
                                                           "vocabulary.json")}  # fmt: skip
    models.pin_manifest(tmp_path / "models.toml", ["whisper-base"], digests_for=lambda r, p: (COMMIT, files))
    asked = []

    def download_model(name, output_dir, revision=None):
        asked.append((name, revision))
        for f in files:
            (Path(output_dir) / f).hardlink_to(whisper_dir / f)
        return output_dir

    monkeypatch.setattr(faster_whisper.utils, "download_model", download_model)
    monkeypatch.setattr(models, "hub_problem", lambda: None)  # the fake hub answers
    from bot.config import STTConfig

    got = models.fetch_whisper(STTConfig(model="models/whisper-base"), tmp_path)
    assert asked == [("base", COMMIT)] and got == tmp_path / "models" / "whisper-base"
    assert models._read_marker(got)["revision"] == COMMIT


def test_verify_checks_the_llm_where_vllm_reads_it_at_the_pinned_commit(tmp_path, monkeypatch):
    shutil.copy(ROOT / "config.gpu.toml", tmp_path / "config.gpu.toml")
    shutil.copy(ROOT / "models.toml", tmp_path / "models.toml")
    snap = tmp_path / "hub" / "models--Qwen--Qwen3.5-35B-A3B-FP8" / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").write_text('{"model_type": "qwen3_5_moe"}')
    (snap / "model.safetensors").write_bytes(b"\x00" * 4096)
    files = {f.name: sha256_file(f) for f in snap.iterdir()}
    models.pin_manifest(tmp_path / "models.toml", ["qwen3.5-35b-a3b-fp8"], digests_for=lambda r, p: (COMMIT, files))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cfg = load_config(tmp_path / "config.gpu.toml")
    entry, found = models.llm_model_check(cfg)
    assert entry.revision == COMMIT and found.checked == 2 and not found.problems
    _flip_one_byte(snap / "model.safetensors")
    _, found = models.llm_model_check(cfg)
    assert str(snap / "model.safetensors") in " ".join(found.problems)
