"""Issue 49: a recording and its export keep private what the desk keeps private.

The export command called in process (``bot.tools.recording``): its transcript masked as the desk shows turns,
an unmasked export only for an admin with a reason (audited), written into a new folder without following
links, 0600; recordings written 0600 in 0700 folders; a legal hold keeps the call's turns and transfer note
past the records' retention. The desk's side (copies, refusals, headers) is tests/desk/test_recording_desk.py.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import signal
import stat
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from bot.config import load_config
from bot.recording import files
from bot.recording.recorder import CallRecording, recording_path
from bot.store import recordings
from bot.store.db import Store
from bot.tools.recording import run

CALL = "CA" + "e" * 32
# A caller who says their number three ways: written, as Korean digit words, international.
SAID = "제 번호는 010-2345-6789, 공일공 이삼사오 육칠팔구 이고 해외에서는 +82 10-2345-6789 입니다"
CLEAR = ("010-2345-6789", "공일공 이삼사오 육칠팔구", "+82 10-2345-6789", "2345", "이삼사오")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def line(tmp_path):
    """A config and records database with one recorded call: its turns say a phone number, a roads ticket."""
    db = tmp_path / "calls.db"
    config = load_config(None, [f"records.url='sqlite:///{db}'", f"recording.dir='{tmp_path / 'rec'}'"])
    store = Store(f"sqlite:///{db}")
    store.migrate()
    started = dt.datetime.now(dt.UTC) - dt.timedelta(days=100)
    path = recording_path(tmp_path / "rec", CALL, "opus", when=started.timestamp())
    path.parent.mkdir(parents=True)
    sf.write(path, np.zeros((800, 2), dtype=np.int16), 8000, format="OGG", subtype="OPUS")
    store.start_call(CALL, caller="+821023456789", worker="w", qa=False, started_at=started)
    recordings.set_recording(store, CALL, files.relative(tmp_path / "rec", path), 0.1)
    store.save_turn(CALL, {"index": 0, "route": "greeting", "reply": "안녕하세요, 한빛시청입니다."})
    store.save_turn(CALL, {"index": 1, "route": "llm", "transcript": SAID, "reply": "010-2345-6789 번으로 연락드릴까요?"})
    store.set_transfer_note(CALL, "가로등 고장, 연락처 010-2345-6789")
    number = store.create_ticket(call_sid=CALL, category="street_lights", location="중앙로", time=None, excerpt="x")
    store.add_staff("admin1", role="admin", department=None, password_hash="-")
    store.add_staff("agent1", role="agent", department=None, password_hash="-")
    yield SimpleNamespace(config=config, store=store, number=number, audio=path, tmp=tmp_path)
    store.close()


def export(line, dest: Path, **kw) -> tuple[int, str]:
    out = io.StringIO()
    args = SimpleNamespace(action="export", call_sid=CALL, dir=str(dest), actor=kw.pop("actor", "kim"),
                           unmasked=kw.pop("unmasked", False), reason=kw.pop("reason", "정보공개 청구 2026-118"))
    assert not kw
    return run(line.config, args, out), out.getvalue()


# --- 1. masked as the desk shows turns ----------------------------------------------------------------


def test_an_export_masks_a_phone_number_said_three_ways_as_the_desk_does_and_says_so(line):
    dest = line.tmp / "out"
    assert export(line, dest)[0] == 0
    text = (dest / f"{CALL}.txt").read_text(encoding="utf-8")
    raw = (dest / f"{CALL}.json").read_text(encoding="utf-8")
    for shown in (text, raw):
        for clear in CLEAR:
            assert clear not in shown, clear
    assert "[1] 발신자: 제 번호는 010-****-**89, 010-****-**89이고 해외에서는 +82 **-****-**89 입니다" in text
    assert "[1] 안내: 010-****-**89 번으로 연락드릴까요?" in text
    manifest = json.loads(raw)
    assert manifest["masking"]["function"] == "bot.privacy.mask"  # the desk's filter (bot/desk/context.py)
    assert any("phone" in h for h in manifest["masking"]["hides"]) and manifest["masking"]["unmasked"] is False
    assert manifest["transfer_note"] == "가로등 고장, 연락처 010-****-**89"
    assert [r["action"] for r in recordings.access_log(line.store, CALL)] == ["export"]


def test_an_unmasked_export_needs_an_admin_and_a_reason_and_both_are_audited(line):
    code, _ = export(line, line.tmp / "a", actor="agent1", unmasked=True, reason="법원 제출")
    assert code == 2 and not (line.tmp / "a").exists()  # not an admin
    code, _ = export(line, line.tmp / "b", actor="admin1", unmasked=True, reason="  ")
    assert code == 2 and not (line.tmp / "b").exists()  # no reason
    code, _ = export(line, line.tmp / "c", actor="nobody", unmasked=True, reason="법원 제출")
    assert code == 2 and not (line.tmp / "c").exists()  # no such account
    assert recordings.access_log(line.store, CALL) == []
    assert export(line, line.tmp / "d", actor="admin1", unmasked=True, reason="법원 제출 2026가합1234")[0] == 0
    text = (line.tmp / "d" / f"{CALL}.txt").read_text(encoding="utf-8")
    assert "010-2345-6789" in text and "공일공 이삼사오 육칠팔구" in text
    manifest = json.loads((line.tmp / "d" / f"{CALL}.json").read_text(encoding="utf-8"))
    assert manifest["masking"]["unmasked"] is True and manifest["masking"]["reason"] == "법원 제출 2026가합1234"
    (row,) = recordings.access_log(line.store, CALL)
    assert (row["actor"], row["action"], row["reason"]) == ("admin1", "export_unmasked", "법원 제출 2026가합1234")


# --- 3. written safely -----------------------------------------------------------------------------


def test_an_export_into_a_folder_with_planted_links_leaves_their_targets_untouched(line, capsys):
    victim_dir = line.tmp / "victim"
    victim_dir.mkdir()
    targets = {suffix: victim_dir / f"precious{suffix}" for suffix in (".opus", ".json", ".txt")}
    for target in targets.values():
        target.write_text("precious")
    trap = line.tmp / "trap"
    trap.mkdir()
    for suffix, target in targets.items():
        (trap / f"{CALL}{suffix}").symlink_to(target)
    code, _ = export(line, trap)
    assert code == 2
    assert all(t.read_text() == "precious" for t in targets.values())
    assert all((trap / f"{CALL}{s}").is_symlink() for s in targets)
    assert "exists" in capsys.readouterr().err
    (line.tmp / "link").symlink_to(victim_dir)  # a link to a folder: not a new folder either
    assert export(line, line.tmp / "link")[0] == 2
    assert sorted(p.name for p in victim_dir.iterdir()) == ["precious.json", "precious.opus", "precious.txt"]
    assert recordings.access_log(line.store, CALL) == []


def test_a_target_that_exists_or_is_a_file_is_a_clear_error_not_a_traceback(line, capsys):
    (line.tmp / "afile").write_text("keep")
    assert export(line, line.tmp / "afile")[0] == 2
    err = capsys.readouterr().err
    assert "afile" in err and "is a file" in err and "Traceback" not in err
    assert (line.tmp / "afile").read_text() == "keep"
    assert export(line, line.tmp / "afile" / "under")[0] == 2
    assert "Traceback" not in capsys.readouterr().err
    (line.tmp / "full").mkdir()
    (line.tmp / "full" / "mine.txt").write_text("keep")
    assert export(line, line.tmp / "full")[0] == 2
    assert "exists" in capsys.readouterr().err and (line.tmp / "full" / "mine.txt").read_text() == "keep"


def test_an_export_is_a_new_private_folder_of_0600_files(line):
    dest = line.tmp / "new" / "export"
    assert export(line, dest)[0] == 0
    assert mode(dest) == 0o700
    assert sorted(p.name for p in dest.iterdir()) == [f"{CALL}.json", f"{CALL}.opus", f"{CALL}.txt"]
    assert {p.name: mode(p) for p in dest.iterdir()} == {p.name: 0o600 for p in dest.iterdir()}
    assert (dest / f"{CALL}.opus").read_bytes() == line.audio.read_bytes()
    assert [p.name for p in dest.parent.iterdir()] == ["export"]  # no temporary folder left beside it


def test_recordings_are_written_0600_in_0700_folders(tmp_path):
    old = os.umask(0o022)  # a shell's umask: the recorder does not rely on the service's
    try:
        path = recording_path(tmp_path / "rec", "CAmode", "opus", when=0)
        rec = CallRecording(path, rate=8000)
        rec.caller(b"\0\0" * 160, 8000)
        rec.close()
        assert rec.done.wait(10)
        files.check_writable(tmp_path / "rec2")
    finally:
        os.umask(old)
    assert mode(path) == 0o600
    assert [mode(d) for d in (path.parent, path.parent.parent, path.parent.parent.parent, tmp_path / "rec")] == \
        [0o700] * 4
    assert mode(tmp_path / "rec2") == 0o700


def test_the_service_and_the_desk_alone_start_with_a_private_umask():
    # serve (each worker it starts runs serve) and the desk alone: recordings, the SQLite records, exports private.
    # A bad server.forwarded_allow_ips stops each right after the umask is set.
    from bot.app.serve import serve
    from bot.core.errors import StartupError
    from bot.tools.staff import serve_desk

    config = load_config(None, ["server.forwarded_allow_ips=['not an address']"])
    for start in (lambda: serve(config, None), lambda: serve_desk(config, 0, "127.0.0.1")):
        old, term = os.umask(0o022), signal.getsignal(signal.SIGTERM)
        try:
            with pytest.raises(StartupError, match="forwarded_allow_ips"):
                start()
        finally:
            signal.signal(signal.SIGTERM, term)  # serve's handler for a stop while loading
            assert os.umask(old) == 0o077


def test_the_deploy_manifest_makes_the_recordings_volume_private():
    import yaml

    from tests.conftest import ROOT

    docs = {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all((ROOT / "deploy/bot.yaml").read_text())}
    pod = docs["Deployment/voice-bot"]["spec"]["template"]["spec"]
    assert "fsGroup" not in pod.get("securityContext", {})  # the kubelet would make every file group-readable
    (init,) = [c for c in pod["initContainers"] if c["name"] == "recordings-private"]
    mount = next(m for m in init["volumeMounts"] if m["name"] == "recordings")
    assert "chmod 0700 " + mount["mountPath"] in " ".join(init["command"])


# --- 4. a legal hold keeps the words with the audio ------------------------------------------------------


def test_a_held_calls_export_after_the_records_retention_still_has_its_transcript(line):
    from loguru import logger

    from bot.store.calls import CallLog

    recordings.set_legal_hold(line.store, line.number, True, actor="admin1", note="정보공개 청구")
    other = "CA" + "f" * 32  # an old call without a hold: its words go
    line.store.start_call(other, caller=None, worker="w", qa=False,
                          started_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=100))
    line.store.save_turn(other, {"index": 1, "route": "llm", "transcript": "지나간 통화"})
    line.store.set_transfer_note(other, "지나간 메모")
    with line.store.engine.begin() as conn:  # both calls' turns are as old as their calls
        from bot.store.schema import turns

        conn.execute(turns.update().values(created_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=100)))
    log = CallLog(line.store, worker="w", write_turns=True, retention_days=30, max_pending=10)
    log.recordings_dir, log.recording_retention_days = line.config.path(line.config.recording.dir), 90
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO")
    try:
        log.apply_retention()
    finally:
        logger.remove(sink)
    assert recordings.call_transcript(line.store, other) == [] and line.store.transfer_note(other) is None
    assert [t["index"] for t in recordings.call_transcript(line.store, CALL)] == [0, 1]
    assert line.store.transfer_note(CALL) == "가로등 고장, 연락처 010-2345-6789"
    kept = [x for x in lines if "legal hold" in x and "kept" in x]
    assert any(line.number in x and "2 turn(s)" in x and "transfer note" in x and "recording" in x for x in kept), lines
    dest = line.tmp / "held"
    assert export(line, dest)[0] == 0
    assert "[1] 발신자: 제 번호는 010-****-**89" in (dest / f"{CALL}.txt").read_text(encoding="utf-8")
    recordings.set_legal_hold(line.store, line.number, False, actor="admin1")
    try:
        log.apply_retention()  # released: the next run deletes them
    finally:
        log.writer.close()
    assert recordings.call_transcript(line.store, CALL) == [] and line.store.transfer_note(CALL) is None


# --- the command line ------------------------------------------------------------------------------


def test_recording_export_takes_config_after_the_subcommand_and_before_it(line):
    import run_bot
    from tests.conftest import ROOT

    cfg = line.tmp / "line.toml"
    cfg.write_text((ROOT / "config.toml").read_text(encoding="utf-8"), encoding="utf-8")
    parser = run_bot.build_parser()
    for argv in (["recording", "export", CALL, "d", "--config", str(cfg)],
                 ["recording", "--config", str(cfg), "export", CALL, "d"],
                 ["--config", str(cfg), "recording", "export", CALL, "d"]):
        assert parser.parse_args(argv).config == str(cfg), argv
    assert parser.parse_args(["recording", "export", CALL, "d"]).config is None
    assert run_bot.main(["recording", "export", CALL, str(line.tmp / "cli"), "--config", str(cfg), "--actor", "lee",
                         "--reason", "정보공개 청구",
                         "--set", f"records.url='sqlite:///{line.tmp / 'calls.db'}'",
                         "--set", f"recording.dir='{line.tmp / 'rec'}'"]) == 0
    assert (line.tmp / "cli" / f"{CALL}.txt").exists()
    assert [r["actor"] for r in recordings.access_log(line.store, CALL)] == ["lee"]


def test_an_unknown_call_is_a_clear_error(line, capsys):
    args = SimpleNamespace(action="export", call_sid="CAnosuch", dir=str(line.tmp / "x"), actor="kim",
                           unmasked=False, reason="정보공개 청구")
    assert run(line.config, args, io.StringIO()) == 2
    assert "no call CAnosuch" in capsys.readouterr().err and not (line.tmp / "x").exists()
