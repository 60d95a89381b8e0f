"""The line's faults of ``run_bot.py faults`` (issue 46): a worker dies or drains under a call in progress.

Two lab workers (``python -m bot.testing.lab_server --workers 2``: the product server under
``run_bot.py serve --workers``' supervisor, which restarts a worker that exits) behind a real nginx
(``bot/testing/nginx.py``: deploy/nginx.conf's configuration), one records database, the fake vLLM, no
Twilio REST credentials (the bot's own end closes the stream). Callers are ``TwilioCall``: Twilio's side
of a whole call, which asks the ``<Connect>``'s action when a stream closes and runs the TwiML it gets.

* **worker killed mid-intake**: a caller reports a complaint (the category said); the worker holding
  the call is SIGKILLed. Measured: the resume sentence's first audio after the kill (the proxy's close,
  Twilio's action request and the new stream included), the caller's longest silence across it; then the
  caller gives the location, hears the read-back and keys 1: the ticket must hold the category said
  before the kill. The records: one call, its segments, resumes used.
* **rolling restart (4 calls)**: four calls in progress (each has said a turn); each worker in turn
  is sent SIGTERM (``server.drain_handover``: each call handed over at its next quiet moment) and the
  next waits until the supervisor has it back. Then every caller says another turn and hears the answer.
  Measured: calls dropped, resume sentences and goodbyes heard per call, the longest silence across a
  hand-over.

This module measures; ``bot/testing/fault_oracles.py`` judges (``tests/call/test_line_faults.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from loguru import logger

from bot.core.wav import read_wav
from bot.store.db import Store
from bot.store.segments import list_segments
from bot.testing.call_steps import model_turn
from bot.testing.fake_llm import FakeLLM
from bot.testing.fault_rows import Row
from bot.testing.nginx import NginxProxy, free_port_run, wait_workers_ready
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import CallClosed, TwilioCall, TwilioCallSimulator

ROOT = Path(__file__).resolve().parent.parent.parent
CLIP = ROOT / "tests" / "fixtures" / "ko_majayo.wav"  # one speech segment: one turn per utterance
CLIP_TEXT = "가로등이 고장났어요"  # what the fixed-delay STT hears (the tests); real Whisper hears its own
AUTH_TOKEN = "line-lab-token-0123456789"
PUBLIC_HOST = "voice-line.example.org"
LIMIT_RESUME_S = 3.0  # the kill to the resume sentence's first audio, Twilio's action request included
LINE_OVERRIDES = ("stt.language='en'", "stt.hotwords=''", "call.idle_prompt_secs=0", "server.drain_handover=true",
                  "records.worker='line'", f"server.public_host='{PUBLIC_HOST}'")
LOCATION = "중앙로 12번길"


class LineLab:
    """``with LineLab(...) as lab: rows = asyncio.run(lab.run())``: the two workers, nginx and the fakes."""

    def __init__(self, config_path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                 work_dir: Path | None = None, stt_delay_ms: float | None = None, verbose: bool = False):
        self.config_path, self.stt_delay_ms, self.verbose = config_path, stt_delay_ms, verbose
        self.overrides = [*overrides, *LINE_OVERRIDES]
        self._stack = ExitStack()
        self.work = Path(work_dir) if work_dir else Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        self.work.mkdir(parents=True, exist_ok=True)
        self.clip_pcm, self.clip_rate = read_wav(CLIP)

    def __enter__(self) -> LineLab:
        try:
            self.llm = self._stack.enter_context(FakeLLM(first_token_delay=0.1, token_delay=0.005))
            db = self.work / "records" / "calls.db"
            db.parent.mkdir(parents=True, exist_ok=True)
            self.records_url = f"sqlite:///{db}"
            port, admin = free_port_run(2), free_port_run(2)
            self.ports = [port, port + 1]
            entry = ["-m", "bot.testing.lab_server", "--workers", "2"]
            if self.stt_delay_ms is not None:
                entry += ["--stt-text", CLIP_TEXT, "--stt-delay-ms", str(self.stt_delay_ms)]
            self.proc = BotProcess([*self.overrides, f"llm.base_url='{self.llm.base_url}'",
                                    f"records.url='{self.records_url}'"],
                                   {"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None},
                                   self.work / "workers.log", entry=tuple(entry), config_path=self.config_path,
                                   port=port, admin_port=admin, extra_args=("-v",) if self.verbose else ())
            self._stack.callback(self.proc.stop)
            wait_workers_ready(self.proc, self.ports, timeout=300)
            self.nginx = self._stack.enter_context(NginxProxy(self.ports))
            self.store = Store(self.records_url)
            self._stack.callback(self.store.close)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    # --- the workers --------------------------------------------------------------------------

    def _health(self, i: int) -> dict:
        try:
            return httpx.get(f"http://127.0.0.1:{self.proc.admin_port + i}/healthz", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return {}

    def _ready(self, i: int) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.proc.admin_port + i}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def worker_of(self, name: str) -> tuple[int, int]:
        """(index, pid) of the worker called ``name`` (``line-0``, ``line-1``)."""
        i = int(name.rsplit("-", 1)[1])
        return i, int(self._health(i)["pid"])

    async def back(self, i: int, old_pid: int, since: float, timeout: float = 240.0) -> float:
        """Wait until the supervisor has worker ``i`` back (a new process, ready); returns the seconds
        from ``since`` (monotonic: the signal)."""
        t0 = since
        while time.monotonic() - t0 < timeout:
            h = await asyncio.to_thread(self._health, i)
            if h.get("pid") and h["pid"] != old_pid and await asyncio.to_thread(self._ready, i):
                return time.monotonic() - t0
            await asyncio.sleep(0.5)
        raise TimeoutError(f"worker {i} not back within {timeout:.0f} s")

    def segments(self, call_sid: str) -> list[dict]:
        return list_segments(self.store, call_sid)

    def turns(self, call_sid: str) -> list[dict]:
        row = next((c for c in self.store.list_calls() if c["call_sid"] == call_sid), None)
        return row["turns"] if row else []

    # --- callers ------------------------------------------------------------------------------

    def call(self) -> TwilioCall:
        return TwilioCall(self.nginx.base_url, public_host=PUBLIC_HOST, auth_token=AUTH_TOKEN,
                          ws_base=self.nginx.base_url.replace("http", "ws", 1))

    async def say(self, stream: TwilioCallSimulator, reply: dict | None = None) -> float:
        """The clip on the line, the model's answer scripted; returns when the bot went quiet after it."""
        if reply is not None:
            self.llm.script(reply)
        await stream.send_audio(self.clip_pcm, self.clip_rate)
        t = time.monotonic()
        await stream.wait_for_media(timeout=30, after=t)
        return await stream.wait_for_silence_from_bot(gap=0.8, timeout=40)

    @staticmethod
    async def greeted(stream: TwilioCallSimulator) -> None:
        await stream.wait_for_media(timeout=30)
        await stream.wait_for_silence_from_bot(gap=0.6, timeout=40)

    async def current_worker(self, call: TwilioCall, timeout: float = 10.0) -> str:
        """The worker running the call's open stream (its segment's row)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            segs = await asyncio.to_thread(self.segments, call.call_sid)
            seg = next((s for s in segs if s["idx"] == len(call.legs) - 1 and s["worker"]), None)
            if seg is not None:
                return seg["worker"]
            await asyncio.sleep(0.1)
        raise TimeoutError(f"no segment row for stream {len(call.legs) - 1}")

    # --- rows ---------------------------------------------------------------------------------

    async def kill_row(self) -> Row:
        row = Row("worker killed mid-intake", "SIGKILL of the worker holding the call, after the category was "
                  "said (two workers behind nginx)")
        t0 = time.monotonic()
        self.llm.reset()
        call = self.call()
        async with call:
            await self.greeted(call.stream)
            await self.say(call.stream, model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?"))
            victim = await self.current_worker(call)
            i, pid = self.worker_of(victim)
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            logger.warning("line faults: SIGKILL {} (pid {}) holding call {}", victim, pid, call.call_sid[-6:])
            try:
                stream = await call.wait_next_stream(0, timeout=15)
                heard = await stream.wait_for_media(timeout=15)
            except (CallClosed, TimeoutError) as e:
                row.outcome = f"not resumed: {e} (call end: {call.end})"
                row.seconds = round(time.monotonic() - t0, 1)
                return row
            await stream.wait_for_silence_from_bot(gap=0.6, timeout=30)
            took = await self.current_worker(call)
            await self.say(stream, model_turn("알겠습니다.", location=LOCATION))  # the read-back
            before = len(stream.media_audio())
            t = time.monotonic()
            await stream.send_dtmf("1")  # yes: the ticket
            await stream.wait_for_media(timeout=30, after=t)
            await stream.wait_for_silence_from_bot(gap=0.8, timeout=40)
            number_audio_s = (len(stream.media_audio()) - before) / 2 / 8000
        back_s = await self.back(i, pid, killed)
        tickets = [t for t in self.store.list_tickets() if t["call_sid"] == call.call_sid]
        segs = self.segments(call.call_sid)
        names = [n for t in self.turns(call.call_sid) for n in (t.get("heard") or [])]
        (gap,) = call.gaps() or [{}]
        ticket = tickets[0] if tickets else {}
        row.names = names
        row.heard = " → ".join(n for n in names if n != "greeting") or "nothing"
        row.first_audio_s = round(heard - killed, 2)
        row.longest_silence_s = round(gap["silence"], 2) if gap.get("silence") is not None else None
        row.records_intact = (len(segs) == 2 and ticket.get("category") == "street_lights"
                              and ticket.get("location") == LOCATION)
        row.facts.update(resume_heard_s=row.first_audio_s, action_s=gap.get("action_s"), segments=len(segs),
                         segment_workers=[s["worker"] for s in segs], killed=victim, resumed_on=took,
                         ticket_category=ticket.get("category"), ticket_location=ticket.get("location"),
                         resumes=len(call.legs) - 1, resume_sentences=names.count("resumed"),
                         number_audio_s=round(number_audio_s, 1), worker_back_s=round(back_s, 1),
                         calls_in_records=[c["call_sid"] for c in self.store.list_calls()].count(call.call_sid))
        row.outcome = (f"resume sentence {row.first_audio_s:.2f} s after the kill (limit {LIMIT_RESUME_S}); "
                       f"{victim} -> {took}; ticket {ticket.get('reception_no', 'none')} "
                       f"({ticket.get('category')}, {ticket.get('location')}); {len(segs)} segments; "
                       f"worker back in {back_s:.0f} s")
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def rolling_row(self, n: int = 4) -> Row:
        row = Row(f"rolling restart ({n} calls)", f"SIGTERM to each worker in turn (server.drain_handover), {n} "
                  "calls in progress, the next worker after the first is back; gap: a stream's close to the next "
                  "stream's start")
        t0 = time.monotonic()
        self.llm.reset()
        calls = [self.call() for _ in range(n)]
        async with httpx.AsyncClient(timeout=5) as http:
            for call in calls:
                await call.start()  # the webhook and the stream: the next two turns of nginx's round-robin
                await http.get(f"{self.nginx.base_url}/healthz")  # one more: the next call's stream, the other worker
        try:
            for call in calls:
                await self.greeted(call.stream)
                await self.say(call.stream, model_turn("네, 말씀하세요.", intent="other", category="none"))
            restarts = []
            for i in range(2):
                pid = int(self._health(i)["pid"])
                on_it = [c for c in calls if await self.current_worker(c) == f"line-{i}"]
                legs = {c.call_sid: len(c.legs) for c in on_it}
                sent = time.monotonic()
                os.kill(pid, signal.SIGTERM)
                logger.warning("line faults: SIGTERM line-{} (pid {}) with {} call(s)", i, pid, len(on_it))
                for c in on_it:
                    with_new = legs[c.call_sid] - 1
                    try:
                        await c.wait_next_stream(with_new, timeout=40)
                    except (CallClosed, TimeoutError) as e:
                        logger.error("line faults: call {} not handed over: {}", c.call_sid[-6:], e)
                handed = time.monotonic() - sent
                back_s = await self.back(i, pid, sent)
                restarts.append({"worker": f"line-{i}", "calls": len(on_it), "handed_over_s": round(handed, 1),
                                 "back_s": round(back_s, 1)})
            answered = 0
            for call in calls:
                if call.ended.is_set():
                    continue
                try:
                    await self.say(call.stream, model_turn("네, 더 도와드릴까요?", intent="other", category="none"))
                    answered += 1
                except (CallClosed, TimeoutError) as e:
                    logger.error("line faults: call {} after the restart: {}", call.call_sid[-6:], e)
        finally:
            dropped = {call.call_sid: call.ended.is_set() for call in calls}  # ended before the caller hung up
            for call in calls:
                await call.hang_up()
        per_call = []
        for call in calls:
            names = [nm for t in self.turns(call.call_sid) for nm in (t.get("heard") or [])]
            silences = [g["dead_s"] for g in call.gaps() if g.get("dead_s") is not None]
            per_call.append({"streams": len(call.legs), "resume_sentences": names.count("resumed"),
                             "goodbyes": names.count("shutdown_goodbye"), "dropped": dropped[call.call_sid],
                             "end": call.end, "longest_gap_s": round(max(silences), 2) if silences else None})
        n_dropped = sum(c["dropped"] for c in per_call)
        gaps = [c["longest_gap_s"] for c in per_call if c["longest_gap_s"] is not None]
        row.longest_silence_s = max(gaps) if gaps else None
        row.records_intact = all(len(self.segments(c.call_sid)) == len(c.legs) for c in calls)
        row.facts.update(dropped=n_dropped, answered_after=answered, calls=per_call, restarts=restarts,
                         max_resume_sentences=max(c["resume_sentences"] for c in per_call),
                         goodbyes=sum(c["goodbyes"] for c in per_call),
                         hand_overs=sum(c["streams"] - 1 for c in per_call))
        row.heard = (f"resume sentences per call: {[c['resume_sentences'] for c in per_call]}; goodbyes: "
                     f"{row.facts['goodbyes']}")
        row.outcome = (f"{n_dropped} dropped of {n}; {answered} answered after both restarts; "
                       f"{row.facts['hand_overs']} hand-overs; longest gap {row.longest_silence_s} s")
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def run(self, only: list[str] | None = None) -> list[Row]:
        """The line's rows (``only``: of "kill", "rolling")."""
        rows = []
        if not only or "kill" in only:
            rows.append(await self.kill_row())
        if not only or "rolling" in only:
            rows.append(await self.rolling_row())
        return rows


LINE_SCENARIOS = ("kill", "rolling")
__all__ = ["LIMIT_RESUME_S", "LINE_SCENARIOS", "LineLab"]
