"""The bench's turn set (``bench/turns.toml``): clips, their routes, the calls' scripts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bot.core.datafile import DataFile
from bot.core.wav import read_wav

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TURNS = ROOT / "bench" / "turns.toml"
ROUTES = ("shortcut", "llm")


class BenchError(RuntimeError):
    """A bench that cannot run (bad turn set, server did not start, ...)."""



# --------------------------------------------------------------------------------- turn set


@dataclass
class Turn:
    """One caller utterance of the turn set."""

    id: str
    wav: Path
    route: str
    label: str
    text: str = ""
    pcm: bytes = b""
    rate: int = 0
    speech_start_s: float = 0.0
    speech_end_s: float = 0.0

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.rate if self.rate else 0.0


@dataclass
class TurnSet:
    path: Path
    turns: dict[str, Turn]
    calls: list[list[str]]

    def script(self, call_index: int) -> list[Turn]:
        return [self.turns[t] for t in self.calls[call_index % len(self.calls)]]


def speech_bounds(pcm: bytes, rate: int, *, window_ms: float = 10.0, rel_db: float = -40.0,
                  floor_rms: float = 30.0) -> tuple[float, float]:
    """(start, end) of the speech in a clip, in seconds, from its energy envelope.

    The envelope is the RMS of ``window_ms`` windows; a window is speech when its RMS is within
    ``rel_db`` of the loudest window and above ``floor_rms`` (dither and codec noise are not).
    Returns (0, 0) for a clip without speech.
    """
    x = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float64)
    n = max(1, int(rate * window_ms / 1000))
    if x.size < n:
        return 0.0, 0.0
    frames = x[: x.size // n * n].reshape(-1, n)
    env = np.sqrt(np.mean(frames * frames, axis=1))
    peak = float(env.max())
    threshold = max(floor_rms, peak * 10 ** (rel_db / 20))
    loud = np.flatnonzero(env > threshold)
    if peak <= floor_rms or loud.size == 0:
        return 0.0, 0.0
    return float(loud[0] * n / rate), float(min(x.size, (loud[-1] + 1) * n) / rate)


def load_turn_set(path: str | Path | None = None) -> TurnSet:
    """Read a turn set TOML (see ``bench/turns.toml``) and its clips."""
    path = Path(path or DEFAULT_TURNS).resolve()
    source = DataFile.read(path, BenchError, "turn set")
    turns: dict[str, Turn] = {}
    for i, item in enumerate(source.tables(("turns",), default=[], nonempty=False)):
        key = ("turns", i)
        tid = source.value((*key, "id"), str, "a unique non-empty string", ok=lambda v: bool(v) and v not in turns)
        route = source.value((*key, "route"), str, f"one of {ROUTES}", ok=lambda v: v in ROUTES)
        wav = source.value((*key, "wav"), str, "a path")
        wav_path = (path.parent / wav).resolve()
        if not wav_path.is_file():
            raise source.error((*key, "wav"), f"{wav_path} not found (bench/make_audio.sh recreates the clips)")
        pcm, rate = read_wav(wav_path)
        start, end = speech_bounds(pcm, rate)
        if end <= start:
            raise source.error((*key, "wav"), f"{wav_path} has no speech")
        turns[tid] = Turn(tid, wav_path, route, str(item.get("label") or tid), str(item.get("text") or ""),
                          pcm, rate, start, end)
    if not turns:
        raise source.error(("turns",), "no [[turns]]")
    calls_raw = source.tables(("calls",), default=[], nonempty=False)
    calls = [list(source.value(("calls", i, "turns"), list, "a list of turn ids", default=[]))
             for i in range(len(calls_raw))] or [[t] for t in turns]
    for i, call in enumerate(calls):
        unknown = [t for t in call if t not in turns]
        if not call or unknown:
            raise source.error(("calls", i), f"empty or names unknown turns {unknown}")
    return TurnSet(path, turns, calls)


# --------------------------------------------------------------------------------- caller side
