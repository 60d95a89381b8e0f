"""Call recordings from the command line: export one for a formal request, put or lift a legal hold.

    run_bot.py recording export CA0123... DIR [--actor NAME]   # the audio, its transcript, a manifest
    run_bot.py recording hold 20260042 --note "정보공개 청구 2026-118" [--actor NAME]
    run_bot.py recording release 20260042 [--actor NAME]
    run_bot.py recording cost [--secs 60]                       # bytes per minute and CPU per call, per format

Every export is in the recording's access audit (the desk shows it); holds are in the ticket's trail.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import TextIO

from bot.config import Config
from bot.privacy import mask
from bot.recording import files
from bot.store import recordings
from bot.store.db import StoreError, now, open_store

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    e = sub.add_parser("export", help="copy a call's recording with its transcript and a manifest into DIR")
    e.add_argument("call_sid")
    e.add_argument("dir")
    e.add_argument("--actor", default="cli", help="who asked (the access audit's actor; default cli)")
    for name, what in (("hold", "put a legal hold on a ticket: its call's recording outlives retention"),
                       ("release", "lift a ticket's legal hold")):
        h = sub.add_parser(name, help=what)
        h.add_argument("reception_no")
        h.add_argument("--note", default="", help="why (the ticket's audit trail)")
        h.add_argument("--actor", default="cli")
    c = sub.add_parser("cost", help="record a simulated phone call in each format: bytes per minute, CPU per call")
    c.add_argument("--secs", type=int, default=60, help="the call's length (default 60)")
    c.add_argument("--caller-wav", default=str(FIXTURES / "ko_trash.wav"), help="the caller's voice, repeated")
    c.add_argument("--bot-wav", default=str(FIXTURES / "ko_greeting.wav"), help="the bot's voice, repeated")


def run(config: Config, args, out: TextIO = sys.stdout) -> int:
    if args.action == "cost":
        return cost(args.secs, Path(args.caller_wav), Path(args.bot_wav), out=out)
    store = open_store(config)
    try:
        if args.action == "export":
            return export(config, store, args.call_sid, Path(args.dir), actor=args.actor, out=out)
        changed = recordings.set_legal_hold(store, args.reception_no, args.action == "hold", actor=args.actor,
                                            note=args.note)
        out.write(f"ticket {args.reception_no}: legal hold {'on' if args.action == 'hold' else 'off'}"
                  f"{'' if changed else ' (already)'}\n")
        return 0
    finally:
        store.close()


def export(config: Config, store, call_sid: str, directory: Path, *, actor: str, out: TextIO) -> int:
    """``DIR/<call>.opus`` (as recorded), ``<call>.txt`` (the turns, masked as stored) and ``<call>.json``
    (call, tickets, length, SHA-256 of the audio, who exported it and when)."""
    rec = recordings.find_recording(store, call_sid)
    if rec is None:
        raise StoreError(f"no call {call_sid}")
    try:
        source = files.resolve(config.path(config.recording.dir), rec["path"])
    except files.RecordingMissing as e:
        gone = f" (deleted {rec['deleted_at']:%Y-%m-%d})" if rec["deleted_at"] else ""
        raise StoreError(f"call {mask(call_sid)} has no recording{gone}") from e
    directory.mkdir(parents=True, exist_ok=True)
    audio = directory / f"{source.stem}{source.suffix}"
    shutil.copyfile(source, audio)
    turns = recordings.call_transcript(store, call_sid)
    lines = [f"통화 {call_sid}  시작 {rec['started_at']:%Y-%m-%d %H:%M:%S} UTC  녹음 {audio.name}", ""]
    for t in turns:
        if t["caller"]:
            lines.append(f"[{t['index']}] 발신자: {t['caller']}")
        if t["bot"]:
            lines.append(f"[{t['index']}] 안내: {t['bot']}")
    (directory / f"{source.stem}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    secs = rec["secs"] if rec["secs"] is not None else files.duration_secs(source)
    manifest = {"call_sid": call_sid, "started_at": rec["started_at"].isoformat(), "recording": audio.name,
                "channels": {"left": "caller", "right": "bot, as the caller heard it"}, "seconds": secs,
                "sha256": hashlib.sha256(audio.read_bytes()).hexdigest(),
                "tickets": [{"reception_no": t["reception_no"], "legal_hold": bool(t["legal_hold"])}
                            for t in rec["tickets"]],
                "turns": [{**t, "at": t["at"].isoformat() if t["at"] else None} for t in turns],
                "exported_by": actor, "exported_at": now().isoformat()}
    (directory / f"{source.stem}.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n",
                                                   encoding="utf-8")
    recordings.note_access(store, call_sid, actor=actor, action="export")
    out.write(f"exported call {mask(call_sid)}: {audio} ({secs or 0:.1f} s), its transcript and manifest\n")
    return 0


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
