"""Placing the bench's calls: the server process, the fake LLM's answers, the server's own records."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from loguru import logger

from bot.telemetry.latency import TurnRecord
from bot.testing.process import BotProcess, free_port
from bot.tools.bench.caller import CallResult, Target, _Clock, run_call
from bot.tools.bench.turnset import BenchError, TurnSet

TURN_FIELDS = {f.name for f in dataclasses.fields(TurnRecord)}
# Marks every answered turn should have, by route (missing ones are listed in the report).
EXPECTED_MARKS = {
    "shortcut": ("speech_end", "vad_stop", "stt_done", "turn_end", "first_sentence", "tts_first_audio", "first_audio_out"),
    "llm": ("speech_end", "vad_stop", "stt_done", "turn_end", "llm_request", "llm_first_token", "first_sentence",
            "tts_first_audio", "first_audio_out"),
}  # fmt: skip



def bench_responder(body: dict[str, Any]):
    """The fake LLM's answer: the structured turn when the request asks for JSON, else its reply text.

    The stock baseline (plain ``OpenAILLMService``, no ``response_format``) thus gets the same
    words our pipeline speaks, rather than JSON it would read aloud.
    """
    from bot.testing.responders import DEFAULT_TURN, default_responder, schema_of

    return default_responder(body) if schema_of(body) is not None else DEFAULT_TURN["reply"]


class ServerProcess(BotProcess):
    """Our server (``run_bot.py``) or the stock one (``python -m bot.app.stock``) in a subprocess."""

    def __init__(self, system: str, config_path: str | None, overrides: list[str], log_path: Path, auth_token: str):
        sets = list(overrides)
        if system == "stock":
            sets.append("turn.fast_input_resampler=false")
        port = free_port()
        sets.append(f"server.public_host='127.0.0.1:{port}'")
        # A random webhook token and no account SID: nothing is ever sent to Twilio's REST API.
        super().__init__(sets, {"TWILIO_AUTH_TOKEN": auth_token, "TWILIO_ACCOUNT_SID": None}, log_path,
                         entry=("-m", "bot.app.stock") if system == "stock" else None, config_path=config_path, port=port)
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
    loop_lag_run: dict = field(default_factory=dict)  # samples since the run began (operations listener)

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
                server = None
                if match is not None:
                    used.add(match)
                    server = recs[match]
                    late = _late_answer(server, recs, used, lo, hi)
                    if late is not None:
                        used.add(late)
                        server = _joined(server, recs[late])
                rows.append({"system": self.system, "call_id": call.call_id, "turn": ct.turn,
                             "server": server, "caller": dataclasses.asdict(ct)})
            rows += [{"system": self.system, "call_id": call.call_id, "turn": None, "server": rec, "caller": None}
                     for k, rec in enumerate(recs) if k not in used]
        return rows


_CALLER_MARKS = ("speech_end", "vad_stop", "stt_done")


def _late_answer(rec: dict, recs: list[dict], used: set[int], lo: float, hi: float) -> int | None:
    """The record that answered ``rec``'s speech when its transcript came after the turn closed.

    Then the turn that heard the speech closed empty (no model request, no audio: the stop timeout
    beat the STT, as stock Pipecat's 5 s does with Whisper at beam 5 on two cores) and the late
    transcript opened a turn of its own, without the caller's marks, that was answered. Without
    the join that answer would have no voice_to_voice and the speech no answer.
    """
    if rec.get("first_audio_out") is not None or rec.get("llm_request") is not None:
        return None
    for k, other in enumerate(recs):
        t = other.get("turn_end") or other.get("first_audio_out")
        if (k not in used and t is not None and lo <= t < hi and other.get("first_audio_out") is not None
                and all(other.get(m) is None for m in _CALLER_MARKS)):
            return k
    return None


def _joined(heard: dict, answered: dict) -> dict:
    """One record for a speech and its late answer: the caller's marks from the turn that heard it."""
    out = dict(answered)
    out.update({m: heard.get(m) for m in _CALLER_MARKS})
    out["stt_audio_secs"], out["stt_ms"] = heard.get("stt_audio_secs"), heard.get("stt_ms")
    out["joined_late_answer"] = [heard.get("index"), answered.get("index")]
    stages = to_record(out).stages_ms()
    out["stages_ms"] = stages
    return out


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


async def collect_records(client: httpx.AsyncClient, target: Target, since: float, ids: set[str], *,
                          timeout: float = 60.0, retry_every: float = 0.5) -> dict:
    """``/api/turns`` once the records of every call in ``ids`` are in, or what it has at the deadline.

    A call's records arrive when its pipeline has finished. A failed request is retried until the
    deadline (under load one failed with an empty error while the records were on their way); only
    a refused token (``BenchError``) or a failure at the deadline ends the bench.
    """
    deadline = time.monotonic() + timeout
    data: dict = {}
    while True:
        try:
            data = await _fetch_turns(client, target, since)
        except (httpx.HTTPError, ValueError) as e:
            why = f"{type(e).__name__}: {e}".rstrip(": ")
            if time.monotonic() > deadline:
                raise BenchError(f"GET {target.base_url}/api/turns failed until the collect deadline "
                                 f"({timeout:.0f} s): {why}") from e
            logger.warning("bench: GET /api/turns failed ({}); retrying until the collect deadline", why)
            await asyncio.sleep(retry_every)
            continue
        seen = {t.get("call_id") for t in data.get("turns", [])}
        if ids <= seen or time.monotonic() > deadline:
            if not ids <= seen:
                logger.warning("bench: no server records for {} call(s)", len(ids - seen))
            return data
        await asyncio.sleep(retry_every)


async def _run_loop_lag(client: httpx.AsyncClient, target: Target, since: float) -> dict:
    """The operations listener's loop lag over the samples taken since the run began (its window
    holds about the last 60 s: a longer run gets its end); {} when it does not answer."""
    try:
        resp = await client.get(f"{target.admin_url}/api/loop_lag", params={"since": since}, timeout=10)
        resp.raise_for_status()
        return resp.json()
    except (httpx.HTTPError, ValueError) as e:
        logger.warning("bench: {}/api/loop_lag failed ({}: {})", target.admin_url, type(e).__name__, e)
        return {}


async def _watch_loop_lag(client: httpx.AsyncClient, target: Target, worst: dict, every: float = 20.0) -> None:
    """Poll the server's loop-lag window during the run (it only covers the last 60 s).

    ``since`` is now (a valid time that matches few turns): the answer's ``loop_lag`` is what is wanted."""
    while True:
        await asyncio.sleep(every)
        try:
            lag = (await _fetch_turns(client, target, time.time())).get("loop_lag") or {}
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

    # Imports the app's records module now: at the first loop-lag poll, 20 s into the calls, that import
    # stalled every caller's line by 1.2-1.3 s (the "send lag" of quiet runs; docs/regressions.md).
    _ = target.records_headers
    clock = _Clock()
    started = time.time()
    t0 = time.monotonic()
    total = sum(len(turn_set.script(i)) for i in range(n_calls * rounds))
    bar = tqdm(total=total, unit="turn", desc=f"bench {system} x{n_calls}", disable=not progress, file=sys.stderr)
    worst: dict = {}
    run_lag: dict = {}
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
        data = await collect_records(client, target, started, ids, timeout=collect_timeout)
        if target.admin_url:
            run_lag = await _run_loop_lag(client, target, started)
    all_ids = {c.call_id for c in calls}
    turns = [t for t in data.get("turns", []) if t.get("call_id") in all_ids]
    lag = data.get("loop_lag") or {}
    for k in ("p99_ms", "max_ms"):
        v = lag.get(k)
        if isinstance(v, (int, float)) and not math.isnan(v) and v > worst.get(k, -1.0):
            worst[k] = v
    return RunResult(system, target.base_url, list(calls), turns, data.get("environment") or {}, lag, worst,
                     started, wall, run_lag)


# --------------------------------------------------------------------------------- report
