"""Call recordings from the command line: export one for a formal request, put or lift a legal hold.

    run_bot.py recording export CA0123... DIR --reason WHY [--actor NAME]   # into a new folder: audio, transcript, manifest
    run_bot.py recording export CA0123... DIR --actor ADMIN --unmasked --reason "법원 제출 2026가합1234"
    run_bot.py recording hold 20260042 --note "정보공개 청구 2026-118" [--actor NAME]
    run_bot.py recording release 20260042 [--actor NAME]
    run_bot.py recording cost [--secs 60]                       # bytes per minute and CPU per call, per format

Every export is in the recording's access audit (the desk shows it); holds are in the ticket's trail.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from bot.config import Config
from bot.privacy import mask
from bot.recording import files
from bot.store import recordings
from bot.store.db import StoreError, now, open_store

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
# What a masked export says of itself (its manifest's "masking"): the desk's function and what it hides.
MASKING = {"function": "bot.privacy.mask", "as": "the staff desk shows turns",
           "hides": ["phone numbers (010-****-**89, +82 **-****-**89)", "resident registration numbers",
                     "card numbers", "the same said as Korean digit words"]}


class ExportError(StoreError):
    """An export that cannot be made as asked (the target exists, an unmasked export without the right)."""


def add_arguments(p: argparse.ArgumentParser, common: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """``common``: run_bot.py's options of every command, so that ``recording export ... --config X`` works."""
    sub = p.add_subparsers(dest="action", required=True)
    e = sub.add_parser("export", help="copy a call's recording with its transcript and a manifest into a new DIR")
    e.add_argument("call_sid")
    e.add_argument("dir", help="a folder that does not exist yet (made 0700; the files in it 0600)")
    e.add_argument("--actor", default="cli", help="who asked (the access audit's actor; default cli)")
    e.add_argument("--unmasked", action="store_true", help="phone numbers in clear: only for --actor naming an "
                   "active admin account of the desk, with --reason (audited as export_unmasked)")
    e.add_argument("--reason", default="", help="why it is made (required: kept in the access audit)")
    subs = [e]
    for name, what in (("hold", "put a legal hold on a ticket: its call's recording outlives retention"),
                       ("release", "lift a ticket's legal hold")):
        h = sub.add_parser(name, help=what)
        h.add_argument("reception_no")
        h.add_argument("--note", default="", help="why (the ticket's audit trail)")
        h.add_argument("--actor", default="cli")
        subs.append(h)
    c = sub.add_parser("cost", help="record a simulated phone call in each format: bytes per minute, CPU per call")
    c.add_argument("--secs", type=int, default=60, help="the call's length (default 60)")
    c.add_argument("--caller-wav", default=str(FIXTURES / "ko_trash.wav"), help="the caller's voice, repeated")
    c.add_argument("--bot-wav", default=str(FIXTURES / "ko_greeting.wav"), help="the bot's voice, repeated")
    subs.append(c)
    for s in subs if common else ():
        common(s)


def run(config: Config, args, out: TextIO = sys.stdout, err: TextIO | None = None) -> int:
    """The ``recording`` command; an export or hold that cannot be done is one line on stderr and exit 2."""
    if args.action == "cost":
        return cost(args.secs, Path(args.caller_wav), Path(args.bot_wav), out=out)
    store = open_store(config)
    try:
        if args.action == "export":
            return export(config, store, args.call_sid, Path(args.dir), actor=args.actor, out=out,
                          unmasked=getattr(args, "unmasked", False), reason=getattr(args, "reason", ""))
        changed = recordings.set_legal_hold(store, args.reception_no, args.action == "hold", actor=args.actor,
                                            note=args.note)
        out.write(f"ticket {args.reception_no}: legal hold {'on' if args.action == 'hold' else 'off'}"
                  f"{'' if changed else ' (already)'}\n")
        return 0
    except StoreError as e:
        (err or sys.stderr).write(f"error: {e}\n")
        return 2
    finally:
        store.close()


def export(config: Config, store, call_sid: str, directory: Path, *, actor: str, out: TextIO,
           unmasked: bool = False, reason: str = "") -> int:
    """A new folder ``directory``: ``<call>.opus`` (as recorded), ``<call>.txt`` (the turns masked as the desk
    shows them, ``bot.privacy.mask``) and ``<call>.json`` (call, tickets, length, SHA-256 of the audio, the
    masking applied, who exported it and when). ``unmasked``: phone numbers in clear (resident registration
    and card numbers were masked when stored), only for an active admin. Every export states its ``reason``.

    Written safely: into a temporary 0700 folder beside ``directory``, each file created anew (O_EXCL,
    O_NOFOLLOW: never through a planted link) 0600, then renamed into place; a ``directory`` that exists
    (a folder, a file, a link) is refused. Raises ExportError / StoreError."""
    reason = reason.strip()
    if not reason:
        raise ExportError("an export needs --reason: why it is made (kept in the access audit)")
    if unmasked:
        account = store.find_staff(username=actor)
        if account is None or not account["active"] or account["role"] != "admin":
            raise ExportError(f"an unmasked export is for an active admin account of the desk: --actor {actor!r} "
                              "is not one")
    rec = recordings.find_recording(store, call_sid)
    if rec is None:
        raise StoreError(f"no call {call_sid}")
    try:
        source = files.resolve(config.path(config.recording.dir), rec["path"])
    except files.RecordingMissing as e:
        gone = f" (deleted {rec['deleted_at']:%Y-%m-%d})" if rec["deleted_at"] else ""
        raise StoreError(f"call {mask(call_sid)} has no recording{gone}") from e
    shown: Callable[[str | None], str | None] = (lambda v: v) if unmasked else (lambda v: mask(v) if v else v)
    turns = [{**t, "caller": shown(t["caller"]), "bot": shown(t["bot"])}
             for t in recordings.call_transcript(store, call_sid)]
    lines = [f"통화 {call_sid}  시작 {rec['started_at']:%Y-%m-%d %H:%M:%S} UTC  녹음 {source.name}", ""]
    for t in turns:
        if t["caller"]:
            lines.append(f"[{t['index']}] 발신자: {t['caller']}")
        if t["bot"]:
            lines.append(f"[{t['index']}] 안내: {t['bot']}")
    masking: dict[str, Any] = {**MASKING, "unmasked": False} if not unmasked else {
        "function": None, "unmasked": True, "reason": reason,
        "hides": ["resident registration numbers", "card numbers (both masked when stored)"]}
    secs = rec["secs"] if rec["secs"] is not None else files.duration_secs(source)

    folder = _new_folder(directory)
    try:
        with open(source, "rb") as f:
            digest = _write_new(folder / source.name, iter(lambda: f.read(1 << 20), b""))
        _write_new(folder / f"{source.stem}.txt", ["\n".join(lines).encode() + b"\n"])
        manifest = {"call_sid": call_sid, "started_at": rec["started_at"].isoformat(), "recording": source.name,
                    "channels": {"left": "caller", "right": "bot, as the caller heard it"}, "seconds": secs,
                    "sha256": digest, "masking": masking,
                    "tickets": [{"reception_no": t["reception_no"], "legal_hold": bool(t["legal_hold"])}
                                for t in rec["tickets"]],
                    "turns": [{**t, "at": t["at"].isoformat() if t["at"] else None} for t in turns],
                    "transfer_note": shown(store.transfer_note(call_sid)),
                    "exported_by": actor, "reason": reason, "exported_at": now().isoformat()}
        _write_new(folder / f"{source.stem}.json",
                   [json.dumps(manifest, ensure_ascii=False, indent=2).encode() + b"\n"])
        os.rename(folder, directory)  # onto nothing (checked); a folder made there meanwhile fails (not empty)
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise ExportError(f"export to {directory} failed: {e.strerror or e}") from e
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    recordings.note_access(store, call_sid, actor=actor, action="export_unmasked" if unmasked else "export",
                           reason=reason or None)
    out.write(f"exported call {mask(call_sid)}{' UNMASKED' if unmasked else ''}: {directory}/{source.name} "
              f"({secs or 0:.1f} s), its transcript and manifest\n")
    return 0


def _new_folder(directory: Path) -> Path:
    """A temporary 0700 folder beside ``directory``, which must not exist yet; raises ExportError."""
    if os.path.lexists(directory):
        what = "is a link" if directory.is_symlink() else "is a file" if not directory.is_dir() else "exists"
        raise ExportError(f"{directory} {what}: an export goes into a new folder; name one that does not exist")
    parent = directory.parent
    try:
        files.private_dirs(parent)
        return Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=parent))
    except (FileExistsError, NotADirectoryError) as e:
        raise ExportError(f"{directory}: {e.filename or parent} is not a folder") from e
    except OSError as e:
        raise ExportError(f"{directory}: cannot make a folder there: {e.strerror or e}") from e


def _write_new(path: Path, chunks: Iterable[bytes]) -> str:
    """Write a new 0600 file (never through a link, never over a file); its SHA-256."""
    digest = hashlib.sha256()
    fd = files.open_private(path, new=True)
    with os.fdopen(fd, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
            digest.update(chunk)
        f.flush()
        os.fsync(f.fileno())
    return digest.hexdigest()


def cost(secs: int, caller_wav: Path, bot_wav: Path, *, out: TextIO) -> int:
    """A ``secs`` phone call through ``CallRecording`` (caller 16 kHz with a -50 dBFS line noise floor, the
    bot at 8 kHz sent at twice real time, 10x faster than real time): the file's size and the CPU of the
    writer thread and of the event loop's side, for each format."""
    import tempfile
    import time

    import numpy as np
    import soundfile as sf
    import soxr

    from bot.recording.recorder import FORMATS, CallRecording

    def voice(path: Path, rate: int, gap: float) -> np.ndarray:
        a, r = sf.read(str(path), dtype="float32")
        a = soxr.resample(a if a.ndim == 1 else a[:, 0], r, rate)
        one = np.concatenate([a, np.zeros(int(rate * gap), np.float32)])
        return np.tile(one, secs * rate // len(one) + 1)[: secs * rate]

    noise = np.random.default_rng(0).normal(0, 10 ** (-50 / 20), secs * 16000).astype(np.float32)
    caller = (np.clip(voice(caller_wav, 16000, 2.0) + noise, -1, 1) * 32767).astype(np.int16).tobytes()
    bot = (voice(bot_wav, 8000, 3.0) * 32767).astype(np.int16).tobytes()
    out.write(f"a {secs} s phone call recorded at 8 kHz, two channels\n")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in FORMATS:
            rec = CallRecording(Path(tmp) / f"cost{FORMATS[fmt][2]}", rate=8000, fmt=fmt, flush_secs=1.0)
            loop_cpu, t0 = 0.0, time.monotonic()
            for i in range(secs * 50):
                a = time.thread_time()
                rec.caller(caller[i * 640 : (i + 1) * 640], 16000)
                if i % 2 == 0:
                    rec.bot(bot[i * 320 : (i + 2) * 320], 8000)
                loop_cpu += time.thread_time() - a
                time.sleep(max(0.0, t0 + (i + 1) * 0.002 - time.monotonic()))
            rec.close()
            rec.done.wait(60)
            size, got = rec.path.stat().st_size, rec.result
            out.write(f"{fmt:5} {size / got.secs * 60 / 1000:6.0f} kB per minute  {size / got.secs * 3.6 / 1000:5.1f} MB "
                      f"per hour of calls  writer CPU {got.cpu_secs / got.secs * 60 * 1000:5.0f} ms per minute of call "
                      f"({got.cpu_secs / got.secs * 100:.2f}% of a core)  event loop {loop_cpu / got.secs * 60 * 1000:4.0f} "
                      "ms per minute\n")
    return 0
