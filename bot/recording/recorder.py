"""One call's recording: two channels (the caller, the bot as the caller heard it), written as the call goes.

``RecordingObserver`` watches the call's pipeline without being a stage of it (a Pipecat observer:
it sees every frame push in order, off the frames' path):

* the caller's audio as the input transport pushes it, before anything can drop it (the user
  aggregator mutes the caller during the greeting when ``call.mute_during_greeting`` is on);
* the bot's audio as the output transport pushes it on, which it does only after the frame was
  written to the line (Twilio or WebRTC): what was actually sent, never what the TTS made;
* the output transport's ``InterruptionFrame``: the line is cleared (Twilio's ``clear``), so bot
  audio sent but not yet played is cut from the recording too.

Placement follows the caller's line clock: the caller's frames arrive at real time without gaps
(Twilio sends 20 ms of μ-law every 20 ms, silence included), so the samples heard so far are the
call's time. A bot frame starts where the bot's previous audio ended or at the line's now,
whichever is later: Pipecat sends phone audio at twice real time and Twilio plays it at real time,
so this is when the caller heard it. A barge-in cuts the bot channel at the line's now.

Writing runs in a thread of its own (resampling, encoding, the file): the event loop only hands it
bytes. Everything heard is on disk within ``flush_secs``; Ogg pages are self-contained, so a
process killed mid-call leaves a file that plays up to its last flush.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import soundfile as sf
import soxr
from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    InputAudioRawFrame,
    InterruptionFrame,
    OutputAudioRawFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport

from bot.config import Config, RecordingConfig
from bot.privacy import mask
from bot.recording import files

# format -> (libsndfile container, subtype, file suffix)
FORMATS = {"opus": ("OGG", "OPUS", ".opus"), "flac": ("FLAC", "PCM_16", ".flac")}
CALLER, BOT = 0, 1  # channel order: left the caller, right the bot
# The caller's line fell silent this long (a stalled stream): the gap is kept as silence, on the wall clock.
GAP_SECS = 1.0


@dataclasses.dataclass(frozen=True)
class RecordingDone:
    """A finished recording: its file and how long it is (seconds)."""

    path: Path
    secs: float
    cpu_secs: float = 0.0  # the writer thread's CPU (resampling, encoding, writing): the recording's cost


class _Channel:
    """One channel's samples not yet written, from the file's write position on, with its resampler."""

    def __init__(self, rate: int):
        self.rate = rate
        self._buf = np.zeros(rate * 4, dtype=np.int16)  # grows by doubling; pending is its first _n samples
        self._n = 0
        self._resampler: soxr.ResampleStream | None = None
        self._from_rate = 0
        self._next_in: float | None = None  # where the next contiguous frame would start
        self._head = 0  # where the resampler's next output goes (absolute samples)

    def place(self, written: int, pos: float, pcm: bytes, in_rate: int) -> None:
        x = np.frombuffer(pcm, dtype=np.int16)
        n_out = len(x) * self.rate / in_rate
        if in_rate == self.rate:
            start, y = round(pos), x
        else:
            if self._resampler is None or in_rate != self._from_rate or self._next_in is None or \
                    abs(pos - self._next_in) > 1.0:  # a gap: a fresh resampler from here
                self._resampler = soxr.ResampleStream(in_rate, self.rate, 1, dtype="int16")
                self._from_rate, self._head = in_rate, round(pos)
            y = self._resampler.resample_chunk(x)
            start = self._head
            self._head += len(y)
        self._next_in = pos + n_out
        self._put(written, start, y)

    def _put(self, written: int, start: int, y: np.ndarray) -> None:
        if start < written:  # already on disk (late audio): keep only what is new
            y = y[written - start:]
            start = written
        if not len(y):
            return
        at = start - written
        end = at + len(y)
        if end > len(self._buf):
            grown = np.zeros(max(end, 2 * len(self._buf)), dtype=np.int16)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown
        if at > self._n:
            self._buf[self._n : at] = 0
        self._buf[at:end] = y
        self._n = max(self._n, end)

    @property
    def pending(self) -> np.ndarray:
        return self._buf[: self._n]

    def cut(self, written: int, pos: int) -> None:
        """Nothing from ``pos`` on (the line was cleared: the caller never heard it)."""
        self._n = min(self._n, max(0, pos - written))
        self._next_in = None

    def take(self, n: int) -> np.ndarray:
        out = np.zeros(n, dtype=np.int16)
        m = min(n, self._n)
        out[:m] = self._buf[:m]
        rest = self._n - m
        self._buf[:rest] = self._buf[m : self._n]
        self._buf[rest : self._n] = 0
        self._n = rest
        return out


class CallRecording:
    """One call's two-channel file, written by its own thread.

    The event loop calls ``caller``, ``bot``, ``interrupted`` and ``close``: each only computes a
    position and queues bytes. ``on_done`` runs on the writer thread once the file is closed.
    """

    def __init__(self, path: Path, *, rate: int, fmt: str = "opus", flush_secs: float = 1.0,
                 on_done: Callable[[RecordingDone], None] | None = None, clock: Callable[[], float] = time.monotonic):
        if fmt not in FORMATS:
            raise ValueError(f"recording.format: {fmt!r} is not one of {list(FORMATS)}")
        self.path = path
        self.rate = rate
        self.fmt = fmt
        self.flush_secs = flush_secs
        self._on_done = on_done
        self._clock = clock
        self._t0: float | None = None
        self._heard = 0.0  # the caller's line clock: samples (at ``rate``) of the call so far
        self._bot_end = 0.0  # where the bot's audio sent so far ends
        self._closed = False
        self._queue: collections.deque = collections.deque()  # appends from the loop, pops by the writer (atomic)
        self._wake = threading.Event()  # set at close: the writer finishes without waiting for its next flush
        self.done = threading.Event()
        self.result: RecordingDone | None = None
        # Started at the first audio: a call that never ran leaves no file and no thread.
        self._thread = threading.Thread(target=self._run, name=f"recording-{path.stem[-6:]}", daemon=True)

    # --- the event loop's side: positions only ----------------------------------------------------

    def _line_now(self) -> float:
        self._start_clock()
        return self._heard

    def _start_clock(self) -> float:
        """When the line's first audio came (the writer thread starts with it)."""
        if self._t0 is None:
            self._t0 = self._clock()
            self._thread.start()
        return self._t0

    def caller(self, pcm: bytes, sample_rate: int) -> None:
        if self._closed or not pcm or self.done.is_set():  # done before close: the writer failed (logged)
            return
        t0 = self._start_clock()
        # A stalled line (no frames for a while) keeps its silence, on the wall clock.
        wall = (self._clock() - t0) * self.rate
        n = len(pcm) // 2 * self.rate / sample_rate
        if wall - n - self._heard > GAP_SECS * self.rate:
            self._heard = wall - n
        self._queue.append(("audio", CALLER, self._heard, pcm, sample_rate))
        self._heard += n

    def bot(self, pcm: bytes, sample_rate: int) -> None:
        if self._closed or not pcm or self.done.is_set():
            return
        start = max(self._bot_end, self._line_now())
        self._bot_end = start + len(pcm) // 2 * self.rate / sample_rate
        self._queue.append(("audio", BOT, start, pcm, sample_rate))

    def interrupted(self) -> None:
        """The line was cleared: bot audio not played yet is not heard."""
        if self._closed or self._t0 is None:
            return
        now = self._line_now()
        if self._bot_end > now:
            self._bot_end = now
            self._queue.append(("cut", round(now)))

    def close(self, *, cut: bool = False) -> None:
        """Finish the file (on the writer thread). ``cut``: the caller left, so bot audio not yet
        played was never heard; otherwise (the bot ended the call) it plays out."""
        if self._closed:
            return
        if self._t0 is None:  # no audio ever came: nothing to write
            self._closed = True
            self.done.set()
            return
        if cut:
            self.interrupted()
        self._closed = True
        self._queue.append(("close",))
        self._wake.set()

    # --- the writer thread --------------------------------------------------------------------------

    def _run(self) -> None:
        container, subtype, _ = FORMATS[self.fmt]
        chans = [_Channel(self.rate), _Channel(self.rate)]
        written = 0
        heard = 0
        f = None
        last_flush = time.monotonic()
        try:
            files.private_dirs(self.path.parent)
            os.close(files.open_private(self.path, new=False))  # 0600 before a byte is in it; libsndfile keeps the mode
            f = sf.SoundFile(self.path, "w", samplerate=self.rate, channels=2, format=container, subtype=subtype)
            closing = False
            while not closing:
                # Once per flush (or at close): a thread that woke for every 20 ms frame would take the GIL
                # from the event loop 100 times a second per call; this takes it once, for a batch.
                self._wake.wait(timeout=max(0.0, self.flush_secs - (time.monotonic() - last_flush)))
                while True:
                    try:
                        item = self._queue.popleft()
                    except IndexError:
                        break
                    if item[0] == "audio":
                        _, ch, pos, pcm, in_rate = item
                        chans[ch].place(written, pos, pcm, in_rate)
                        if ch == CALLER:  # the line's clock: the caller's samples so far
                            heard = max(heard, round(pos + len(pcm) // 2 * self.rate / in_rate))
                    elif item[0] == "cut":
                        chans[BOT].cut(written, item[1])
                    elif item[0] == "close":
                        closing = True
                        break
                if closing:
                    end = written + max(len(c.pending) for c in chans)
                    written = self._write(f, chans, written, max(end, heard))
                elif time.monotonic() - last_flush >= self.flush_secs:
                    # Up to the line's now: bot audio queued beyond it has not been heard yet.
                    written = self._write(f, chans, written, heard)
                    f.flush()
                    last_flush = time.monotonic()
        except Exception as e:  # noqa: BLE001 - a failed recording must never end the call
            logger.error("recording {}: failed: {}: {}", self.path.name, type(e).__name__, e)
        finally:
            if f is not None:
                try:
                    f.close()
                except Exception as e:  # noqa: BLE001
                    logger.error("recording {}: close failed: {}", self.path.name, e)
            self.result = RecordingDone(self.path, written / self.rate, time.thread_time())
            self.done.set()
            if self._on_done is not None:
                try:
                    self._on_done(self.result)
                except Exception as e:  # noqa: BLE001
                    logger.error("recording {}: not noted in the records: {}", self.path.name, e)

    @staticmethod
    def _write(f: sf.SoundFile, chans: list[_Channel], written: int, upto: int) -> int:
        n = upto - written
        if n <= 0:
            return written
        f.write(np.stack([chans[CALLER].take(n), chans[BOT].take(n)], axis=1))
        return upto


class RecordingObserver(BaseObserver):
    """Feeds a ``CallRecording`` from the call's transports (see the module's docstring)."""

    def __init__(self, recording: CallRecording, *, on_start: Callable[[Path], None] | None = None, **kwargs: Any):
        # First pushes only: a frame passed on by every stage reaches us once (the output transport's audio
        # chunks are its own new frames), about a tenth of the event loop's hand-offs of every push.
        super().__init__(observe_every_push=False, **kwargs)
        self.recording = recording
        self._on_start = on_start  # at the first audio (the call's row exists by then)
        self._ending = False  # an EndFrame is on its way: the output transport plays out what it holds

    def _started(self) -> None:
        if self._on_start is not None:
            on_start, self._on_start = self._on_start, None
            on_start(self.recording.path)

    async def on_push_frame(self, data: FramePushed) -> None:
        frame, src = data.frame, data.source
        if data.direction != FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, InputAudioRawFrame):
            if isinstance(src, BaseInputTransport):
                self._started()
                self.recording.caller(frame.audio, frame.sample_rate)
        elif isinstance(frame, OutputAudioRawFrame):
            if isinstance(src, BaseOutputTransport):  # written to the line, then pushed on
                self._started()
                self.recording.bot(frame.audio, frame.sample_rate)
        elif isinstance(frame, InterruptionFrame):
            # On its way to the output transport, which clears the line (Twilio's clear) a few stages later.
            self.recording.interrupted()
        elif isinstance(frame, EndFrame):
            self._ending = True  # the output transport sends what it holds first: closed at cleanup
        elif isinstance(frame, CancelFrame):
            self.recording.close(cut=True)  # the caller left: what was not played was not heard

    async def cleanup(self):
        await super().cleanup()
        # The worker is over: an ended call played out its last words; anything else was cut off.
        self.recording.close(cut=not self._ending)


def recording_path(directory: Path, call_id: str, fmt: str, *, when: float | None = None) -> Path:
    """``DIR/YYYY/MM/DD/<call>.<suffix>`` (UTC date: workers in any zone agree)."""
    day = time.strftime("%Y/%m/%d", time.gmtime(when if when is not None else time.time()))
    safe = "".join(c for c in call_id if c.isalnum() or c in "-_")[:64] or "call"
    return directory / day / f"{safe}{FORMATS[fmt][2]}"


def start_recording(config: RecordingConfig, directory: Path, call_id: str, *, rate: int,
                    on_start: Callable[[Path], None] | None = None,
                    on_done: Callable[[RecordingDone], None] | None = None, segment: int = 0) -> RecordingObserver:
    """A call's recording and the observer that feeds it (``build_call``). A resumed call (issue 46)
    records its segment ``segment`` in a file of its own beside the first (``<call>-<segment>``)."""
    path = recording_path(directory, f"{call_id}-{segment}" if segment else call_id, config.format)
    rec = CallRecording(path, rate=rate, fmt=config.format, flush_secs=config.flush_secs, on_done=on_done)
    return RecordingObserver(rec, on_start=on_start)


class RecordingNotes(Protocol):
    """Where a recording is noted on the call's row (``bot.store.CallLog``, a layer above)."""

    def recording(self, call_sid: str, path: str, secs: float | None = None, *, segment: int = 0) -> None: ...


def call_recording(config: Config, call_id: str, *, in_rate: int, out_rate: int,
                   records: RecordingNotes | None = None, segment: int = 0) -> list[RecordingObserver]:
    """The call's recording observer when ``recording.enabled`` (else none), at the call's rate (the lower
    of its two: 8 kHz on the phone), noted on the call's row in ``records`` (``CallLog``) when given."""
    rc = config.recording
    if not rc.enabled:
        return []
    directory = config.path(rc.dir)

    def started(path: Path) -> None:
        if records is not None:
            records.recording(call_id, files.relative(directory, path), segment=segment)

    def done(result: RecordingDone) -> None:
        logger.info("recording of call {}: {:.1f} s in {} ({:.0f} kB, {:.2f} s CPU)", mask(call_id), result.secs,
                    result.path.name, result.path.stat().st_size / 1000 if result.path.exists() else 0,
                    result.cpu_secs)
        if records is not None:
            records.recording(call_id, files.relative(directory, result.path), round(result.secs, 2), segment=segment)

    return [start_recording(rc, directory, call_id, rate=min(in_rate, out_rate), on_start=started, on_done=done,
                            segment=segment)]
