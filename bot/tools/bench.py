"""``run_bot.py bench``: latency as a distribution, from N simulated Twilio callers at once.

The bench places N calls at the same time over real sockets, exactly as Twilio would: a signed
``/twilio/voice`` webhook, the TwiML's one-time stream token, then the Media Streams WebSocket
with a caller line that sends 20 ms of 8 kHz mu-law every 20 ms (silence between utterances).
Each call plays a scripted conversation from the turn set (``bench/turns.toml``): wait until the
bot has finished speaking, pause 0.3-1.0 s, speak the next clip; after the last turn the caller
hangs up with ``stop`` (unless the bot already ended the call, as it does after a goodbye).

Two views of every turn:

* caller side (measured here): time to first audio = from the moment the caller's last SPEECH
  frame was sent (the clip's trailing silence excluded: ``speech_bounds`` finds the speech in the
  clip's energy envelope, and only the clip up to there is sent; the line then carries silence)
  to the first audible bot media after it. A turn is "cut off early" when the bot's first audio
  for it arrived while the caller was still sending speech (its TTFA is then negative and left
  out of the TTFA distribution).
* server side: after the calls, ``GET /api/turns?since=<bench start>`` gives the server's own turn
  records (marks and stages, route, LLM calls, interruptions) and its environment; records are
  matched to caller turns by call (``call_id`` = CallSid) and time (the server record whose
  speech end falls between this utterance's start and the next one's).

Writes ``DIR/report.md`` (environment and escape hatches, per-stage p50/p90/p99, budgets, LLM
calls per turn, shortcut share, route mix and expected-vs-actual routes, interruptions, event-loop
lag, caller TTFA beside the server's voice_to_voice), ``DIR/latency.png`` (CDFs) and
``DIR/turns.jsonl`` (one line per turn: server record + caller-side fields).

Without ``--url`` the bench starts the server itself (``run_bot.py`` in a subprocess, with the
given ``--config``/``--set``, a random TWILIO_AUTH_TOKEN and no TWILIO_ACCOUNT_SID so nothing
reaches Twilio's REST API) and, unless ``--no-fake-llm``, a fake vLLM in this process
(``bot.testing.fake_llm.FakeLLM``, first token after 150 ms, 3 characters per 10 ms). With
``--baseline stock`` the same calls then run against ``python -m bot.stock`` (stock Pipecat parts,
see ``bot/stock.py``) and the report puts ours/stock ratios side by side. The servers run one
after the other, never at once, so they do not compete for the CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import platform
import random
import secrets as pysecrets
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from loguru import logger

from bot.tools import baseline
from bot.wav import read_wav
from bot.config import Config, LatencyConfig
from bot.datafile import read_toml
from bot.telemetry.latency import STAGES, TurnRecord, format_table, percentile, summarize
from bot.testing.process import BotProcess, free_port

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_TURNS = ROOT / "bench" / "turns.toml"
ROUTES = ("shortcut", "llm")
BOT_QUIET_GAP = 0.3  # the bot counts as finished after this long without audible audio
HANG_UP_GRACE_S = 3.0  # then the caller waits this long for the bot's hang-up before hanging up itself
PAUSE_RANGE = (0.3, 1.0)  # caller's pause after the bot finished, before speaking
FRAME_SECS = 0.02
TURN_FIELDS = {f.name for f in dataclasses.fields(TurnRecord)}
# Marks every answered turn should have, by route (missing ones are listed in the report).
EXPECTED_MARKS = {
    "shortcut": ("speech_end", "vad_stop", "stt_done", "turn_end", "first_sentence", "tts_first_audio", "first_audio_out"),
    "llm": ("speech_end", "vad_stop", "stt_done", "turn_end", "llm_request", "llm_first_token", "first_sentence",
            "tts_first_audio", "first_audio_out"),
}  # fmt: skip


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
    raw = read_toml(path, BenchError, "turn set")
    turns: dict[str, Turn] = {}
    for i, item in enumerate(raw.get("turns", [])):
        where = f"{path}: turns[{i}]"
        tid, wav, route = item.get("id"), item.get("wav"), item.get("route")
        if not isinstance(tid, str) or not tid or tid in turns:
            raise BenchError(f"{where}: id must be a unique non-empty string")
        if route not in ROUTES:
            raise BenchError(f"{where}: route {route!r} is not one of {ROUTES}")
        if not isinstance(wav, str):
            raise BenchError(f"{where}: wav must be a path")
        wav_path = (path.parent / wav).resolve()
        if not wav_path.is_file():
            raise BenchError(f"{where}: {wav_path} not found (bench/make_audio.sh recreates the clips)")
        pcm, rate = read_wav(wav_path)
        start, end = speech_bounds(pcm, rate)
        if end <= start:
            raise BenchError(f"{where}: {wav_path} has no speech")
        turns[tid] = Turn(tid, wav_path, route, str(item.get("label") or tid), str(item.get("text") or ""),
                          pcm, rate, start, end)
    if not turns:
        raise BenchError(f"{path}: no [[turns]]")
    calls = [list(c.get("turns", [])) for c in raw.get("calls", [])] or [[t] for t in turns]
    for i, call in enumerate(calls):
        unknown = [t for t in call if t not in turns]
        if not call or unknown:
            raise BenchError(f"{path}: calls[{i}] is empty or names unknown turns {unknown}")
    return TurnSet(path, turns, calls)


# --------------------------------------------------------------------------------- caller side


@dataclass
class CallerTurn:
    """What the caller saw of one of its turns (times: wall clock, seconds)."""

    call_id: str
    turn: int  # 1-based within the call
    turn_id: str
    label: str
    expected_route: str
    wav: str
    speech_start: float | None = None  # the first speech frame was sent
    speech_end: float | None = None  # the last speech frame was sent
    pause_ms: float | None = None  # bot went quiet -> caller's first speech frame
    first_audio: float | None = None  # first audible bot media after this turn's speech began
    caller_ttfa_ms: float | None = None  # first_audio - speech_end (negative: cut off early)
    cut_off_early: bool = False
    no_answer: bool = False
    bot_resumed: int = 0  # the bot started talking again during the caller's pause


@dataclass
class CallResult:
    call_id: str
    script: list[str]
    turns: list[CallerTurn] = field(default_factory=list)
    ended_by: str = "caller"  # caller (stop) | bot (closed the stream) | rejected | error
    error: str | None = None
    max_send_lag_ms: float = 0.0
    greeting_ms: float | None = None  # stream start -> first audible greeting audio


@dataclass
class Target:
    """A server to call: where to POST the webhook, what URL the signature covers, the media URL."""

    base_url: str
    public_url: str
    ws_url: str
    auth_token: str | None
    records_token: str | None = None  # RECORDS_API_TOKEN: /api/turns answers 401/404 without it
    admin_url: str | None = None  # the operations listener (/healthz figures for the soak)

    @property
    def records_headers(self) -> dict[str, str]:
        from bot.server import bearer_header

        return bearer_header(self.records_token)


class _Clock:
    """Monotonic (what the simulator stamps) to wall clock (what the server records)."""

    def __init__(self):
        self.offset = time.time() - time.monotonic()

    def wall(self, mono: float | None) -> float | None:
        return None if mono is None else mono + self.offset


async def _pause_after_bot(call, rng: random.Random, timeout: float) -> tuple[float, int]:
    """Wait for the bot to finish, then pause 0.3-1.0 s; start over if the bot resumes. Returns (quiet, resumed)."""
    resumed = 0
    while True:
        quiet = await call.wait_for_silence_from_bot(gap=BOT_QUIET_GAP, timeout=timeout)
        if call.closed:
            return quiet, resumed
        target = quiet + rng.uniform(*PAUSE_RANGE)
        await asyncio.sleep(max(0.0, target - time.monotonic()))
        heard = call.audible_media_times
        if heard and heard[-1] > quiet:
            resumed += 1
            continue
        return quiet, resumed


async def _speak(call, turn: Turn) -> tuple[float, float]:
    """Send the clip up to its speech end; returns monotonic (first speech frame sent, last speech frame sent)."""
    end_samples = min(len(turn.pcm) // 2, math.ceil(turn.speech_end_s / FRAME_SECS) * round(FRAME_SECS * turn.rate))
    await call.send_audio(turn.pcm[: end_samples * 2], turn.rate)
    done = time.monotonic()
    frames = math.ceil(end_samples / (FRAME_SECS * turn.rate))
    first_speech_frame = int(turn.speech_start_s / FRAME_SECS)  # 0-based index of the frame holding it
    return done - (frames - 1 - first_speech_frame) * FRAME_SECS, done


async def run_call(target: Target, script: list[Turn], *, clock: _Clock, rng: random.Random,
                   answer_timeout: float, on_turn=None) -> CallResult:
    """One simulated caller: webhook, stream, greeting, the scripted turns, hang up."""
    from bot.testing.twilio_sim import CallClosed, TwilioCallSimulator, new_sid, parse_twiml_stream, post_voice_webhook, voice_webhook_params

    call_sid = new_sid("CA")
    result = CallResult(call_sid, [t.id for t in script])
    try:
        resp = await post_voice_webhook(target.base_url, target.public_url, voice_webhook_params(call_sid), target.auth_token)
        if resp.status_code != 200:
            raise BenchError(f"webhook answered {resp.status_code}: {resp.text[:200]}")
        try:
            _, params = parse_twiml_stream(resp.text)
        except ValueError as e:
            result.ended_by, result.error = "rejected", f"{e}: {resp.text[:200]}"
            return result
    except (httpx.HTTPError, BenchError) as e:
        result.ended_by, result.error = "error", str(e)
        return result

    done = 0
    try:
        async with TwilioCallSimulator(target.ws_url, call_sid=call_sid, custom_parameters=params) as call:
            greeting = await call.wait_for_media(timeout=answer_timeout)
            result.greeting_ms = round((greeting - call.started_at) * 1000, 1)
            for i, turn in enumerate(script, 1):
                ct = CallerTurn(call_sid, i, turn.id, turn.label, turn.route, str(turn.wav.name))
                result.turns.append(ct)
                quiet, ct.bot_resumed = await _pause_after_bot(call, rng, timeout=answer_timeout * 3)
                if call.closed:
                    result.ended_by = "bot"
                    break
                start, end = await _speak(call, turn)
                ct.speech_start, ct.speech_end = clock.wall(start), clock.wall(end)
                ct.pause_ms = round((start - quiet) * 1000, 1)
                try:
                    first = await call.wait_for_media(timeout=answer_timeout, after=start)
                except TimeoutError:
                    ct.no_answer = True
                else:
                    ct.first_audio = clock.wall(first)
                    ct.caller_ttfa_ms = round((first - end) * 1000, 1)
                    ct.cut_off_early = first <= end
                done += 1
                if on_turn:
                    on_turn()
            if not call.closed:
                await call.wait_for_silence_from_bot(gap=BOT_QUIET_GAP, timeout=answer_timeout * 3)
            if not call.closed:
                # After its last words the bot may be hanging up (goodbye -> end -> close): a caller
                # gives it a moment before putting the phone down, however busy the machine is.
                with contextlib.suppress(TimeoutError):
                    await call.wait_closed(timeout=HANG_UP_GRACE_S)
            if call.closed:
                result.ended_by = "bot"
            else:
                await call.stop()
            result.max_send_lag_ms = round(call.max_send_lag * 1000, 1)
    except CallClosed as e:
        result.ended_by, result.error = "bot", f"stream closed early: {e}"
    except (TimeoutError, OSError) as e:
        result.ended_by, result.error = "error", f"{type(e).__name__}: {e}"
    finally:
        if on_turn:
            for _ in range(len(script) - done):
                on_turn()
    return result


# --------------------------------------------------------------------------------- servers


def bench_responder(body: dict[str, Any]):
    """The fake LLM's answer: the structured turn when the request asks for JSON, else its reply text.

    The stock baseline (plain ``OpenAILLMService``, no ``response_format``) thus gets the same
    words our pipeline speaks, rather than JSON it would read aloud.
    """
    from bot.testing.responders import DEFAULT_TURN, default_responder, schema_of

    return default_responder(body) if schema_of(body) is not None else DEFAULT_TURN["reply"]


class ServerProcess(BotProcess):
    """Our server (``run_bot.py``) or the stock one (``python -m bot.stock``) in a subprocess."""

    def __init__(self, system: str, config_path: str | None, overrides: list[str], log_path: Path, auth_token: str):
        sets = list(overrides)
        if system == "stock":
            sets.append("turn.fast_input_resampler=false")
        port = free_port()
        sets.append(f"server.public_host='127.0.0.1:{port}'")
        # A random webhook token and no account SID: nothing is ever sent to Twilio's REST API.
        super().__init__(sets, {"TWILIO_AUTH_TOKEN": auth_token, "TWILIO_ACCOUNT_SID": None}, log_path,
                         entry=("-m", "bot.stock") if system == "stock" else None, config_path=config_path, port=port)
        self.system = system
        self.target = Target(self.base_url, f"https://127.0.0.1:{self.port}/twilio/voice", self.ws_url, auth_token,
                             records_token=self.records_token, admin_url=self.admin_url)

    def wait_ready(self, timeout: float = 300.0) -> None:
        try:
            super().wait_ready(timeout)
        except (RuntimeError, TimeoutError) as e:
            raise BenchError(f"{self.system} server: {e}") from e


# --------------------------------------------------------------------------------- a run


@dataclass
class RunResult:
    """One system's bench run: the caller side and what the server said about it."""

    system: str  # ours | stock
    url: str
    calls: list[CallResult]
    server_turns: list[dict]  # every record of the bench's calls, greetings included
    environment: dict = field(default_factory=dict)
    loop_lag: dict = field(default_factory=dict)  # the server's last-60-s window at the end
    loop_lag_worst: dict = field(default_factory=dict)  # worst window polled during the run
    started: float = 0.0
    wall_secs: float = 0.0

    def rows(self) -> list[dict]:
        """Caller turns joined to server records; then server turns no caller turn explains."""
        by_call: dict[str, list[dict]] = {}
        for rec in self.server_turns:
            by_call.setdefault(rec.get("call_id"), []).append(rec)
        rows = []
        for call in self.calls:
            recs = sorted((r for r in by_call.get(call.call_id, []) if r.get("route") != "greeting"),
                          key=lambda r: r.get("index", 0))
            used: set[int] = set()
            spoken = [t for t in call.turns if t.speech_start is not None]
            for j, ct in enumerate(spoken):
                lo = ct.speech_start
                hi = spoken[j + 1].speech_start if j + 1 < len(spoken) else math.inf
                match = None
                for k, rec in enumerate(recs):
                    t = rec.get("speech_end") or rec.get("turn_end") or rec.get("first_audio_out")
                    if k not in used and t is not None and lo <= t < hi:
                        match = k
                        break
                if match is not None:
                    used.add(match)
                rows.append({"system": self.system, "call_id": call.call_id, "turn": ct.turn,
                             "server": recs[match] if match is not None else None, "caller": dataclasses.asdict(ct)})
            rows += [{"system": self.system, "call_id": call.call_id, "turn": None, "server": rec, "caller": None}
                     for k, rec in enumerate(recs) if k not in used]
        return rows


def records_token(args) -> str | None:
    """``--records-token``, else env RECORDS_API_TOKEN: what a running server's /api/turns wants."""
    return getattr(args, "records_token", None) or os.environ.get("RECORDS_API_TOKEN") or None


def to_record(d: dict) -> TurnRecord:
    """A server turn record (``TurnRecord.to_dict()``) back as a ``TurnRecord``."""
    return TurnRecord(**{k: v for k, v in d.items() if k in TURN_FIELDS})


async def _fetch_turns(client: httpx.AsyncClient, target: Target, since: float) -> dict:
    resp = await client.get(f"{target.base_url}/api/turns", params={"since": since}, headers=target.records_headers,
                            timeout=10)
    if resp.status_code in (401, 404):
        raise BenchError(f"GET {target.base_url}/api/turns answered {resp.status_code}: the server's turn records need "
                         "env RECORDS_API_TOKEN set on the server and the same token here (--records-token or env)")
    resp.raise_for_status()
    return resp.json()


async def _watch_loop_lag(client: httpx.AsyncClient, target: Target, worst: dict, every: float = 20.0) -> None:
    """Poll the server's loop-lag window during the run (it only covers the last 60 s)."""
    while True:
        await asyncio.sleep(every)
        try:
            lag = (await _fetch_turns(client, target, 1e12)).get("loop_lag") or {}
        except (httpx.HTTPError, ValueError, BenchError):
            continue
        for k in ("p99_ms", "max_ms"):
            v = lag.get(k)
            if isinstance(v, (int, float)) and not math.isnan(v) and v > worst.get(k, -1.0):
                worst[k] = v


async def run_bench_calls(system: str, target: Target, turn_set: TurnSet, n_calls: int, *, seed: int = 0,
                          answer_timeout: float = 30.0, progress: bool = True, collect_timeout: float = 60.0,
                          rounds: int = 1) -> RunResult:
    """Place ``n_calls`` calls at once against ``target``, ``rounds`` times; collect the server's records.

    Call ``i`` of round ``r`` plays script ``r * n_calls + i``, so more rounds cover more of the set.
    """
    from tqdm import tqdm

    clock = _Clock()
    started = time.time()
    t0 = time.monotonic()
    total = sum(len(turn_set.script(i)) for i in range(n_calls * rounds))
    bar = tqdm(total=total, unit="turn", desc=f"bench {system} x{n_calls}", disable=not progress, file=sys.stderr)
    worst: dict = {}
    async with httpx.AsyncClient() as client:
        watcher = asyncio.create_task(_watch_loop_lag(client, target, worst))
        try:
            calls = []
            for r in range(rounds):
                calls += await asyncio.gather(*(
                    run_call(target, turn_set.script(i), clock=clock, rng=random.Random(seed * 1000 + i),
                             answer_timeout=answer_timeout, on_turn=bar.update)
                    for i in range(r * n_calls, (r + 1) * n_calls)
                ))  # fmt: skip
        finally:
            watcher.cancel()
            bar.close()
        wall = time.monotonic() - t0
        ids = {c.call_id for c in calls if c.ended_by != "rejected" and c.greeting_ms is not None}
        data: dict = {}
        deadline = time.monotonic() + collect_timeout
        while True:  # a call's records arrive when its pipeline has finished
            try:
                data = await _fetch_turns(client, target, started)
            except (httpx.HTTPError, ValueError) as e:
                raise BenchError(f"GET {target.base_url}/api/turns failed: {e}") from e
            seen = {t.get("call_id") for t in data.get("turns", [])}
            if ids <= seen or time.monotonic() > deadline:
                if not ids <= seen:
                    logger.warning("bench: no server records for {} call(s)", len(ids - seen))
                break
            await asyncio.sleep(0.5)
    all_ids = {c.call_id for c in calls}
    turns = [t for t in data.get("turns", []) if t.get("call_id") in all_ids]
    lag = data.get("loop_lag") or {}
    for k in ("p99_ms", "max_ms"):
        v = lag.get(k)
        if isinstance(v, (int, float)) and not math.isnan(v) and v > worst.get(k, -1.0):
            worst[k] = v
    return RunResult(system, target.base_url, list(calls), turns, data.get("environment") or {}, lag, worst,
                     started, wall)


# --------------------------------------------------------------------------------- report


def _dist(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values) if values else math.nan}


def _f(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, (int, float)) else str(v)


@dataclass
class RunStats:
    """Everything the report says about one run, computed once."""

    run: RunResult
    rows: list[dict]
    records: list[TurnRecord]  # server turns (greetings excluded)
    caller_ttfa: list[float]  # caller TTFA (ms) of answered turns not cut off
    v2v: list[float]

    @classmethod
    def of(cls, run: RunResult) -> "RunStats":
        rows = run.rows()
        records = [to_record(r["server"]) for r in rows if r["server"] is not None]
        ttfa = [r["caller"]["caller_ttfa_ms"] for r in rows if r["caller"] and r["caller"]["caller_ttfa_ms"] is not None
                and not r["caller"]["cut_off_early"]]
        v2v = [rec.stages_ms()["voice_to_voice"] for rec in records if "voice_to_voice" in rec.stages_ms()]
        return cls(run, rows, records, ttfa, v2v)

    def caller_turns(self) -> list[dict]:
        return [r["caller"] for r in self.rows if r["caller"] is not None]


def _environment_lines(env: dict) -> list[str]:
    stt, tts, llm = env.get("stt") or {}, env.get("tts") or {}, env.get("llm") or {}
    lines = [
        f"- STT: model `{stt.get('model')}`, device {stt.get('device')}, compute type {stt.get('compute_type')}, "
        f"beam {stt.get('beam_size')}",
        f"- TTS: voice {tts.get('voice')}, {tts.get('steps')} steps, stand-in model: {tts.get('standin')}",
    ]
    providers = tts.get("providers") or {}
    if isinstance(providers, dict):
        lines += [f"  - ONNX session `{name}`: {', '.join(p) if isinstance(p, list) else p}" for name, p in providers.items()]
    else:
        lines.append(f"  - ONNX sessions: {providers}")
    lines.append(f"- LLM: model `{llm.get('model')}`, dialect {llm.get('dialect')}, base_url {llm.get('base_url')}")
    for k, v in env.items():
        if k not in ("stt", "tts", "llm", "escape_hatches"):
            lines.append(f"- {k}: {json.dumps(v, ensure_ascii=False)}")
    return lines


def _hatch_lines(env: dict) -> list[str]:
    hatches = env.get("escape_hatches")
    if hatches is None:
        return ["- escape hatches: UNKNOWN (the server did not report them)"]
    return [f"- **ESCAPE HATCH:** {h}" for h in hatches] or ["- escape hatches: none"]


def calls_per_worker(run: RunResult) -> Counter:
    """How many of the run's calls each worker ran (from the server records; several workers behind a proxy)."""
    worker_of = {t.get("call_id"): t.get("worker") for t in run.server_turns if t.get("worker")}
    return Counter(worker_of.values())


def _run_section(st: RunStats, budgets: LatencyConfig) -> list[str]:
    run = st.run
    recs = st.records
    callers = st.caller_turns()
    lines = [f"## {run.system}: {run.url}", ""]
    lines += ["### Environment (from the server's /api/turns)", "", *_environment_lines(run.environment),
              "", "Escape hatches:", "", *_hatch_lines(run.environment), ""]
    ended = Counter(c.ended_by for c in run.calls)
    lines += [f"Calls: {len(run.calls)} ({', '.join(f'{k}: {v}' for k, v in sorted(ended.items()))}); "
              f"caller turns: {len(callers)}; server turns: {len(recs)}; wall time {run.wall_secs:.1f} s.", ""]
    share = calls_per_worker(run)
    if share:
        total = sum(share.values())
        lines += ["Calls per worker (the records' `worker`): " + ", ".join(
            f"{w} {n} ({100 * n / total:.0f} %)" for w, n in sorted(share.items())) + ".", ""]
    errors = [c for c in run.calls if c.error]
    if errors:
        lines += ["Call problems:", ""] + [f"- `{c.call_id[:10]}…` {c.ended_by}: {c.error}" for c in errors] + [""]

    lines += ["### Per-stage latency (server turn records)", "", format_table(summarize(recs, budgets)), ""]
    over = sum(v > budgets.total_ms for v in st.v2v)
    lines += [f"Turns over the {budgets.total_ms} ms voice-to-voice budget: **{over}/{len(st.v2v)}**.", ""]

    ca, sv = _dist(st.caller_ttfa), _dist(st.v2v)
    lines += ["### Caller-side time to first audio vs the server's voice_to_voice", "",
              "| measure | n | p50 ms | p90 ms | p99 ms | max ms |", "|---|---|---|---|---|---|",
              f"| caller TTFA (last speech frame sent -> first audible bot audio) | {ca['n']} | {_f(ca['p50'])} | "
              f"{_f(ca['p90'])} | {_f(ca['p99'])} | {_f(ca['max'])} |",
              f"| server voice_to_voice (speech_end -> first audio out) | {sv['n']} | {_f(sv['p50'])} | {_f(sv['p90'])} | "
              f"{_f(sv['p99'])} | {_f(sv['max'])} |"]
    diffs = [r["caller"]["caller_ttfa_ms"] - to_record(r["server"]).stages_ms()["voice_to_voice"] for r in st.rows
             if r["caller"] and r["server"] and r["caller"]["caller_ttfa_ms"] is not None
             and not r["caller"]["cut_off_early"] and "voice_to_voice" in to_record(r["server"]).stages_ms()]
    if diffs:
        lines.append(f"\nPer turn, caller TTFA minus server voice_to_voice: p50 {_f(percentile(diffs, 50))} ms, "
                     f"min {_f(min(diffs))}, max {_f(max(diffs))} (the server's speech_end is VAD stop minus "
                     "stop_secs; the caller's is the last speech frame sent).")
    lines.append("")

    calls_per_turn = Counter(r.llm_calls for r in recs)
    max_calls = max(calls_per_turn, default=0)
    verdict = "OK (at most one)" if max_calls <= 1 else f"**FAIL: {sum(v for k, v in calls_per_turn.items() if k > 1)} turn(s) made more than one call**"
    routes = Counter(r.route for r in recs)
    shortcut = routes.get("shortcut", 0)
    lines += ["### Turns", "",
              f"- LLM calls per turn: {', '.join(f'{k} call(s): {v} turns' for k, v in sorted(calls_per_turn.items())) or '-'}; "
              f"max {max_calls}: {verdict}",
              f"- Shortcut share: {shortcut}/{len(recs)} = {_f(100 * shortcut / len(recs) if recs else math.nan)} %",
              f"- Route mix: {', '.join(f'{k} {v}' for k, v in routes.most_common()) or '-'}",
              f"- Interrupted turns (server: the caller barged in while the bot spoke): {sum(r.interrupted for r in recs)}",
              f"- Cut off early (caller: bot audio arrived while the caller was still sending speech): "
              f"{sum(c['cut_off_early'] for c in callers)}",
              f"- No answer within the timeout: {sum(c['no_answer'] for c in callers)}",
              f"- Bot resumed talking during the caller's pause (gap > {BOT_QUIET_GAP} s inside a reply): "
              f"{sum(c['bot_resumed'] for c in callers)}",
              f"- Turns not played (the call had ended): {sum(c['speech_start'] is None for c in callers)}"]
    missing_server = sum(1 for r in st.rows if r["caller"] and r["caller"]["speech_start"] is not None and r["server"] is None)
    extra = sum(1 for r in st.rows if r["caller"] is None)
    lines.append(f"- Caller turns without a server record: {missing_server}; server turns no caller turn explains: {extra}")
    missing: Counter = Counter()
    for r in recs:
        for mark in EXPECTED_MARKS.get(r.route, ()):
            if getattr(r, mark) is None:
                missing[f"{r.route}.{mark}"] += 1
    lines.append("- Turns with missing marks: " + (", ".join(f"{k} x{v}" for k, v in sorted(missing.items())) or "none"))
    lag_ms = max((c.max_send_lag_ms for c in run.calls), default=0.0)
    lines.append(f"- Caller simulator: worst frame send lag {lag_ms:.0f} ms"
                 + (" (**over 50 ms: the bench machine was overloaded; caller figures are suspect**)" if lag_ms > 50 else ""))
    lines.append("")

    pairs = [(r["caller"], r["server"]) for r in st.rows if r["caller"] and r["server"]]
    agree = sum(c["expected_route"] == s.get("route") for c, s in pairs)
    lines += [f"Expected vs actual route: {agree}/{len(pairs)} agree.", ""]
    if pairs:
        table: Counter = Counter((c["turn_id"], c["label"], c["expected_route"], s.get("route")) for c, s in pairs)
        lines += ["| turn | label | expected | actual | n |", "|---|---|---|---|---|"]
        lines += [f"| {t} | {label} | {e} | {a}{'' if e == a else ' (mismatch)'} | {n} |"
                  for (t, label, e, a), n in sorted(table.items())]
        lines.append("")

    lag, worst = run.loop_lag or {}, run.loop_lag_worst or {}
    lines += ["### Event-loop lag (server)", "",
              f"- last 60 s at the end of the run: p50 {_f(lag.get('p50_ms'), 1)} ms, p99 {_f(lag.get('p99_ms'), 1)} ms, "
              f"max {_f(lag.get('max_ms'), 1)} ms (n={lag.get('n', '-')})",
              f"- worst 60-s window polled during the run: p99 {_f(worst.get('p99_ms'), 1)} ms, max {_f(worst.get('max_ms'), 1)} ms",
              ""]
    return lines


def _ratio_section(ours: RunStats, stock: RunStats, budgets: LatencyConfig) -> list[str]:
    a = {r.stage: r for r in summarize(ours.records, budgets)}
    b = {r.stage: r for r in summarize(stock.records, budgets)}

    def ratio(x: float, y: float) -> str:
        return "-" if math.isnan(x) or math.isnan(y) or y == 0 else f"{x / y:.2f}"

    lines = ["## Ours vs stock Pipecat (ratio = ours / stock; below 1 = ours faster)", "",
             "| stage | ours p50 | stock p50 | p50 ratio | ours p90 | stock p90 | p90 ratio |",
             "|---|---|---|---|---|---|---|"]
    for name, *_ in STAGES:
        x, y = a[name], b[name]
        lines.append(f"| {name} | {_f(x.p50)} | {_f(y.p50)} | {ratio(x.p50, y.p50)} | {_f(x.p90)} | {_f(y.p90)} | "
                     f"{ratio(x.p90, y.p90)} |")
    ca, cb = _dist(ours.caller_ttfa), _dist(stock.caller_ttfa)
    lines.append(f"| **caller TTFA** | {_f(ca['p50'])} | {_f(cb['p50'])} | {ratio(ca['p50'], cb['p50'])} | {_f(ca['p90'])} | "
                 f"{_f(cb['p90'])} | {ratio(ca['p90'], cb['p90'])} |")
    la, lb = ours.run.loop_lag_worst or {}, stock.run.loop_lag_worst or {}
    lines += ["", f"Event-loop lag, worst p99: ours {_f(la.get('p99_ms'), 1)} ms, stock {_f(lb.get('p99_ms'), 1)} ms.",
              "Stock = bot/stock.py: Pipecat WhisperSTTService (faster-whisper defaults, beam 5), default "
              "UserTurnStrategies (smart-turn v3 stop), default VAD params and input resampler, plain "
              "OpenAILLMService (no shortcuts, no structured output), the same Supertonic TTS.", ""]
    return lines


# The turn-taking features of bot/pipeline.py, switched off for the "ours-basic" run.
FEATURES_OFF = ("turn.korean_endpointing=false", "turn.speculative_reply=false", "tts.canned_audio=false")


def _ttfa_section(stats: list[RunStats]) -> list[str]:
    """What the caller waits for, every run side by side (ratios against stock when it ran)."""
    by = {st.run.system: st for st in stats}
    stock = _dist(by["stock"].caller_ttfa) if "stock" in by else None
    lines = ["## Caller-side time to first audio, all runs", "",
             "| run | turns | p50 ms | p90 ms | p99 ms | p50 / stock | cut off early | LLM calls cancelled |",
             "|---|---|---|---|---|---|---|---|"]
    for st in stats:
        d = _dist(st.caller_ttfa)
        ratio = f"{d['p50'] / stock['p50']:.2f}" if stock and stock["p50"] and not math.isnan(d["p50"]) else "-"
        cut = sum(c["cut_off_early"] for c in st.caller_turns())
        cancelled = sum(getattr(r, "llm_cancelled_calls", 0) for r in st.records)
        lines.append(f"| {st.run.system} | {len(st.caller_ttfa)} | {_f(d['p50'])} | {_f(d['p90'])} | {_f(d['p99'])} | "
                     f"{ratio} | {cut} | {cancelled} |")
    lines += ["", "ours = Korean end-of-turn waits + speculative reply + canned audio; ours-basic = the same server "
              f"with {', '.join(FEATURES_OFF)}; stock = bot/stock.py.", ""]
    return lines


def _machine_lines(meta: dict) -> list[str]:
    return [f"- {k}: {v}" for k, v in meta.items()]


def machine_meta(n_calls: int, turn_set: TurnSet | None, argv: list[str] | None = None) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        pipecat_version = version("pipecat-ai")
    except PackageNotFoundError:  # pragma: no cover
        pipecat_version = "?"
    try:
        rev = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True,
                             timeout=5).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):  # pragma: no cover
        rev = "?"
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": " ".join(argv) if argv else "-",
        "concurrent calls (N)": n_calls,
        "turn set": str(turn_set.path) if turn_set else "-",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "pipecat": pipecat_version,
        "git": rev,
    }
    return meta


def render_report(runs: list[RunResult], meta: dict, budgets: LatencyConfig, turn_set: TurnSet | None = None) -> str:
    """The markdown report: machine and environment header, then one section per run, then ratios."""
    stats = [RunStats.of(r) for r in runs]
    first_env = runs[0].environment if runs else {}
    lines = ["# Voice agent bench", "", "Escape hatches (printed beside every latency report):", "",
             *_hatch_lines(first_env), "", "Machine and run:", "", *_machine_lines(meta), "",
             f"Budgets (this config): stt {budgets.stt_ms} ms, llm {budgets.llm_ms} ms, tts {budgets.tts_ms} ms, "
             f"voice-to-voice {budgets.total_ms} ms.", ""]
    if turn_set is not None:
        lines += ["Turn set:", "", "| turn | label | text | expected route | speech s |", "|---|---|---|---|---|"]
        lines += [f"| {t.id} | {t.label} | {t.text} | {t.route} | {t.speech_end_s - t.speech_start_s:.2f} |"
                  for t in turn_set.turns.values()]
        lines += ["", "Calls (call i plays script i mod " + str(len(turn_set.calls)) + "): "
                  + "; ".join(" -> ".join(c) for c in turn_set.calls), ""]
    for st in stats:
        lines += _run_section(st, budgets)
    by = {st.run.system: st for st in stats}
    if "ours" in by and "stock" in by:
        lines += _ratio_section(by["ours"], by["stock"], budgets)
    if len(by) > 1:
        lines += _ttfa_section(stats)
    lines += ["---", "", "Definitions: caller TTFA runs from the moment the caller's last speech frame was sent (the "
              "clip's trailing silence is not part of the speech: its end comes from the energy envelope) to the "
              "first audible bot media after it (arrival at the caller). Cut-off-early turns (bot audio while the "
              "caller was still sending speech) are counted, not included in the TTFA distribution. Server stages "
              "come from the server's own turn records (bot/telemetry/latency.py STAGES). latency.png has the CDFs, "
              "turns.jsonl every turn.", ""]
    return "\n".join(lines)


def _cdf(values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Step coordinates of an empirical CDF, starting at 0 (values clipped to 1 ms for the log axis)."""
    xs = np.sort(np.maximum(1.0, np.asarray(values, dtype=float)))
    return np.r_[xs[0], xs], np.r_[0.0, np.arange(1, xs.size + 1) / xs.size]


def plot_cdfs(runs: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(13, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"ours": "-", "stock": "--"}
    for run in runs:
        st = RunStats.of(run)
        ls = styles.get(run.system, ":")
        for i, (name, *_) in enumerate(STAGES):
            vals = [r.stages_ms()[name] for r in st.records if name in r.stages_ms()]
            if vals:
                ax.step(*_cdf(vals), where="post", ls=ls, color=colors[i % len(colors)],
                        label=f"{name} ({run.system}, n={len(vals)})")
        if st.caller_ttfa:
            ax.step(*_cdf(st.caller_ttfa), where="post", ls=ls, color="black", lw=2.5,
                    label=f"caller TTFA ({run.system}, n={len(st.caller_ttfa)})")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log scale)")
    ax.set_ylabel("fraction of turns")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Per-stage latency CDFs (server records) and caller-side time to first audio")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(out_dir: str | Path, runs: list[RunResult], meta: dict, budgets: LatencyConfig,
                  turn_set: TurnSet | None = None) -> dict[str, Path]:
    """Write report.md, latency.png and turns.jsonl; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"report": out / "report.md", "plot": out / "latency.png", "turns": out / "turns.jsonl"}
    paths["report"].write_text(render_report(runs, meta, budgets, turn_set), encoding="utf-8")
    plot_cdfs(runs, paths["plot"])
    with paths["turns"].open("w", encoding="utf-8") as f:
        for run in runs:
            for row in run.rows():
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return paths


# --------------------------------------------------------------------------------- command


def _http_to_ws(url: str) -> str:
    if url.startswith("https://"):
        return "wss://" + url[len("https://"):]
    if url.startswith("http://"):
        return "ws://" + url[len("http://"):]
    raise BenchError(f"--url must start with http:// or https://, not {url!r}")


def run_bench(config: Config, args) -> int:
    """``run_bot.py bench``: see the module doc. ``args``: the parsed bench options."""
    turn_set = load_turn_set(args.turns)
    n = args.calls
    if n < 1:
        raise BenchError("--calls must be at least 1")
    out = Path(args.out)
    fake = args.fake_llm if args.fake_llm is not None else not args.url
    if args.url and fake:
        raise BenchError("--fake-llm needs the bench to start the server (no --url): a running server has its own LLM")
    if args.url and args.baseline and not args.baseline_url:
        raise BenchError("--baseline stock with --url needs --baseline-url (a running `python -m bot.stock` server)")
    if not args.url and n > config.server.max_calls:
        raise BenchError(f"--calls {n} > server.max_calls {config.server.max_calls}: the server would reject calls "
                         f"(add --set server.max_calls={n})")
    systems = ["ours"] + (["ours-basic"] if args.features_off else []) + (["stock"] if args.baseline else [])
    if args.url and args.features_off:
        raise BenchError("--features-off needs the bench to start the servers (no --url)")
    auth = args.auth_token or os.environ.get("TWILIO_AUTH_TOKEN")
    compare_to = getattr(args, "compare", None)
    try:
        baseline.NoiseRule.from_args(args)
    except ValueError as e:
        raise BenchError(str(e)) from None
    try:  # a bad baseline fails before any call is placed
        base = baseline.load(compare_to) if compare_to else None
    except ValueError as e:
        raise BenchError(str(e)) from None
    first_token_ms, char_ms = _fake_llm_delays(args)
    fake_llm = None
    runs: list[RunResult] = []
    try:
        if fake:
            from bot.testing.fake_llm import FakeLLM

            fake_llm = FakeLLM(first_token_delay=first_token_ms / 1000, token_delay=char_ms * FAKE_CHUNK_CHARS / 1000,
                               chunk_chars=FAKE_CHUNK_CHARS, responder=bench_responder).start()
            logger.info("bench: fake LLM at {} (first token {} ms, {} ms per character)", fake_llm.base_url,
                        first_token_ms, char_ms)
        for system in systems:
            url = args.url if system == "ours" else args.baseline_url
            if url:
                if not auth:
                    logger.warning("bench: no --auth-token / TWILIO_AUTH_TOKEN: webhooks go unsigned")
                base = url.rstrip("/")
                host = args.public_host or config.server.public_host
                target = Target(base, f"https://{host}/twilio/voice", _http_to_ws(base) + "/twilio/media", auth,
                                records_token=records_token(args))
                runs.append(asyncio.run(run_bench_calls(system, target, turn_set, n, seed=args.seed,
                                                        answer_timeout=args.answer_timeout, progress=not args.no_progress,
                                                        rounds=args.rounds)))
                continue
            overrides = list(args.overrides)
            if system == "ours-basic":
                overrides += list(FEATURES_OFF)
            if fake_llm is not None:
                overrides.append(f"llm.base_url='{fake_llm.base_url}'")
            overrides.append(f"records.url='sqlite:///{(out / 'records' / system / 'calls.db').resolve()}'")
            server = ServerProcess(system, args.config, overrides, out / f"server-{system}.log", pysecrets.token_hex(16))
            try:
                logger.info("bench: starting the {} server (log: {})", system, server.log_path)
                server.wait_ready()
                runs.append(asyncio.run(run_bench_calls(system, server.target, turn_set, n, seed=args.seed,
                                                        answer_timeout=args.answer_timeout,
                                                        progress=not args.no_progress, rounds=args.rounds)))
            finally:
                server.stop()
    finally:
        if fake_llm is not None:
            fake_llm.stop()
    meta = machine_meta(n, turn_set, getattr(args, "argv", None))
    meta["rounds"] = args.rounds
    if fake:
        meta["LLM"] = (f"fake vLLM (bot/testing/fake_llm.py): first token {first_token_ms:g} ms, "
                       f"{char_ms:g} ms per character")
    paths = write_outputs(out, runs, meta, config.latency, turn_set)
    print(paths["report"].read_text(encoding="utf-8"))
    print(f"wrote {paths['report']}, {paths['plot']}, {paths['turns']}", file=sys.stderr)
    if not (getattr(args, "save_baseline", None) or base):
        return 0
    set_path = Path(turn_set.path).resolve()
    settings = {"calls": n, "rounds": args.rounds, "overrides": list(args.overrides),
                "turn_set": str(set_path.relative_to(ROOT) if set_path.is_relative_to(ROOT) else set_path),
                "fake_llm": {"first_token_ms": first_token_ms, "char_ms": char_ms} if fake else None}
    now = baseline.summarize_run(RunStats.of(runs[0]), meta=meta, settings=settings)
    if args.save_baseline:
        print(f"wrote baseline {baseline.save(args.save_baseline, now)}", file=sys.stderr)
    if base is None:
        return 0
    rule = baseline.NoiseRule.from_args(args)
    findings = baseline.compare(base, now, rule)
    text = baseline.render(base, now, findings, rule, base_path=str(compare_to))
    (out / "compare.md").write_text(text, encoding="utf-8")
    print(text)
    return 1 if any(f.regression for f in findings) else 0


# The bench's fake LLM streams its reply in chunks of this many characters.
FAKE_CHUNK_CHARS = 3


def _fake_llm_delays(args) -> tuple[float, float]:
    first = getattr(args, "fake_llm_first_token_ms", None)
    char = getattr(args, "fake_llm_char_ms", None)
    first, char = (150.0 if first is None else first), (10 / 3 if char is None else char)
    if first < 0 or char < 0:
        raise BenchError("--fake-llm-first-token-ms and --fake-llm-char-ms cannot be negative")
    return first, char
