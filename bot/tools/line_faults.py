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
* **pipeline raised mid-turn**: the stream carries the lab's ``fault=pipeline_raise:2``: the caller's
  second turn (the location) raises fatally in the dialog stage; the stream closes without a goodbye.
  Measured from the end of the caller's speech; the caller says the location again on the new stream.
* **socket reset by the proxy**: nginx's worker process is SIGKILLed (its master starts another): the
  caller's socket and the proxy's upstream socket both reset mid-intake.
* **records unreachable during a resume**: the records database fails every statement
  (``LAB_RECORDS_DOWN_FILE``) from just before the proxy's reset until the caller heard the resume:
  the action, the token and the call's past all unread. The caller must still hear the bot (the
  resume sentence, a fresh start in the line's first language); the next turn is answered once the
  database is back.

This module measures; ``bot/testing/fault_oracles.py`` judges (``tests/call/test_line_faults.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
from loguru import logger

from bot.core.wav import read_wav
from bot.store.db import Store
from bot.store.segments import list_segments
from bot.testing.call_steps import model_turn
from bot.testing.fake_llm import FakeLLM
from bot.testing.fault_rows import Row
from bot.testing.lab import Lab
from bot.testing.nginx import NginxProxy, free_port_run, wait_workers_ready
from bot.testing.process import BotProcess, local_http
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
PAST_UNREAD = "resumed WITHOUT its past"  # the worker's log line: the records not read at a resume


class LineLab(Lab):
    """``with LineLab(...) as lab: rows = asyncio.run(lab.run())``: the two workers, nginx and the fakes."""

    def __init__(self, config_path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                 work_dir: Path | None = None, stt_delay_ms: float | None = None, verbose: bool = False):
        self.config_path, self.stt_delay_ms, self.verbose = config_path, stt_delay_ms, verbose
        self.overrides = [*overrides, *LINE_OVERRIDES]
        super().__init__(work_dir)
        self.clip_pcm, self.clip_rate = read_wav(CLIP)
        self.records_down = self.work / "records-down"  # while it exists the workers' records fail

    def _start_parts(self) -> None:
        self.llm = self._stack.enter_context(FakeLLM(first_token_delay=0.1, token_delay=0.005))
        db = self.work / "records" / "calls.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        self.records_url = f"sqlite:///{db}"
        port, admin = free_port_run(2), free_port_run(2)
        self.ports = [port, port + 1]
        entry = ["-m", "bot.testing.lab_server", "--workers", "2", "--fault-injection"]
        if self.stt_delay_ms is not None:
            entry += ["--stt-text", CLIP_TEXT, "--stt-delay-ms", str(self.stt_delay_ms)]
        self.proc = BotProcess([*self.overrides, f"llm.base_url='{self.llm.base_url}'",
                                f"records.url='{self.records_url}'"],
                               {"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None,
                                "LAB_RECORDS_DOWN_FILE": str(self.records_down)},
                               self.work / "workers.log", entry=tuple(entry), config_path=self.config_path,
                               port=port, admin_port=admin, extra_args=("-v",) if self.verbose else ())
        self._stack.callback(self.proc.stop)
        wait_workers_ready(self.proc, self.ports, timeout=300)
        self.nginx = self._stack.enter_context(NginxProxy(self.ports))
        self.store = Store(self.records_url)
        self._stack.callback(self.store.close)

    # --- the workers --------------------------------------------------------------------------

    def _health(self, i: int) -> dict:
        try:
            return local_http().get(f"http://127.0.0.1:{self.proc.admin_port + i}/healthz", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return {}

    def _ready(self, i: int) -> bool:
        try:
            return local_http().get(f"http://127.0.0.1:{self.proc.admin_port + i}/readyz", timeout=2).status_code == 200
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

    def call(self, fault: str | None = None) -> TwilioCall:
        return TwilioCall(self.nginx.base_url, public_host=PUBLIC_HOST, auth_token=AUTH_TOKEN,
                          ws_base=self.nginx.base_url.replace("http", "ws", 1),
                          first_stream_parameters={"fault": fault} if fault else None)

    def reset_proxy(self) -> int:
        """SIGKILL nginx's worker process: every connection through it resets; the master starts another."""
        assert self.nginx.proc is not None
        master = self.nginx.proc.pid
        (child,) = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        os.kill(int(child), signal.SIGKILL)
        return int(child)

    async def finish_intake(self, stream: TwilioCallSimulator) -> float:
        """The caller gives the location, hears the read-back and keys 1; returns the seconds of the
        answer to the key (the reception number said)."""
        await self.say(stream, model_turn("알겠습니다.", location=LOCATION))  # the read-back
        before = len(stream.media_audio())
        t = time.monotonic()
        await stream.send_dtmf("1")  # yes: the ticket
        await stream.wait_for_media(timeout=30, after=t)
        await stream.wait_for_silence_from_bot(gap=0.8, timeout=40)
        return (len(stream.media_audio()) - before) / 2 / 8000

    def _summary(self, row: Row, call: TwilioCall, since: float, heard: float | None) -> dict:
        """The facts every resumed row shares: what was heard, the silence, the ticket, the segments."""
        tickets = [t for t in self.store.list_tickets() if t["call_sid"] == call.call_sid]
        ticket = tickets[0] if tickets else {}
        segs = self.segments(call.call_sid)
        names = [n for t in self.turns(call.call_sid) for n in (t.get("heard") or [])]
        gap = (call.gaps() or [{}])[0]
        row.names = names
        row.heard = " → ".join(n for n in names if n != "greeting") or "nothing"
        row.first_audio_s = round(heard - since, 2) if heard is not None else None
        row.longest_silence_s = round(gap["silence"], 2) if gap.get("silence") is not None else None
        row.facts.update(resume_heard_s=row.first_audio_s, longest_silence_s=row.longest_silence_s,
                         action_s=gap.get("action_s"), segments=len(segs),
                         segment_ends=[s.get("end_reason") for s in segs], resumes=len(call.legs) - 1,
                         resume_sentences=names.count("resumed"), ticket_category=ticket.get("category"),
                         ticket_location=ticket.get("location"), call_end=call.end,
                         calls_in_records=[c["call_sid"] for c in self.store.list_calls()].count(call.call_sid))
        return ticket

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
            number_audio_s = await self.finish_intake(stream)
        back_s = await self.back(i, pid, killed)
        ticket = self._summary(row, call, killed, heard)
        segs = self.segments(call.call_sid)
        row.records_intact = (len(segs) == 2 and ticket.get("category") == "street_lights"
                              and ticket.get("location") == LOCATION)
        row.facts.update(segment_workers=[s["worker"] for s in segs], killed=victim, resumed_on=took,
                         number_audio_s=round(number_audio_s, 1), worker_back_s=round(back_s, 1))
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

    async def intake_fault_row(self, kind: str) -> Row:
        """One caller mid-intake (the category said), then the fault ``kind``: "raise" (the pipeline
        raises in the caller's next turn), "reset" (the proxy's sockets reset) or "records" (the
        records database unreachable while the call resumes after a reset)."""
        name, injected = {
            "raise": ("pipeline raised mid-turn", "the dialog stage raises fatally in the caller's second turn "
                      "(lab fault pipeline_raise:2)"),
            "reset": ("socket reset by the proxy", "SIGKILL of nginx's worker mid-intake (the caller's and the "
                      "upstream socket reset)"),
            "records": ("records unreachable during a resume", "every records statement fails from before the "
                        "proxy's reset until the resume sentence was heard"),
        }[kind]
        row = Row(name, injected)
        t0 = time.monotonic()
        self.llm.reset()
        unread_before = (self.work / "workers.log").read_text(errors="replace").count(PAST_UNREAD)
        call = self.call("pipeline_raise:2" if kind == "raise" else None)
        async with call:
            await self.greeted(call.stream)
            await self.say(call.stream, model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?"))
            first = await self.current_worker(call)
            if kind == "raise":
                self.llm.script(model_turn("알겠습니다.", location=LOCATION))
                await call.stream.send_audio(self.clip_pcm, self.clip_rate)
                since = time.monotonic()  # the caller's speech sent: the turn that raises
            else:
                if kind == "records":
                    self.records_down.touch()
                since = time.monotonic()
                pid = self.reset_proxy()
                logger.warning("line faults: nginx worker {} killed (call {}{})", pid, call.call_sid[-6:],
                               ", records down" if kind == "records" else "")
            heard = None
            try:
                stream = await call.wait_next_stream(0, timeout=15)
                heard = await stream.wait_for_media(timeout=15)
                await stream.wait_for_silence_from_bot(gap=0.6, timeout=30)
            except (CallClosed, TimeoutError) as e:
                row.outcome = f"not resumed: {e} (call end: {call.end})"
            finally:
                self.records_down.unlink(missing_ok=True)
            if heard is None:
                row.seconds = round(time.monotonic() - t0, 1)
                return row
            resumed_audio_s = len(stream.media_audio()) / 2 / 8000
            took = await self.current_worker(call)
            number_audio_s = answered_s = None
            if kind == "records":  # a fresh start: the next turn is answered
                answered_s = await self.say(stream, model_turn("네, 말씀하세요.", intent="other", category="none"))
            else:
                number_audio_s = await self.finish_intake(stream)
        if kind == "raise":  # from the stream's close (the raise) as Twilio saw it
            since = call.legs[0].closed_at or since
        await asyncio.sleep(1.0)  # the call's last turn records (held back while the database was down)
        ticket = self._summary(row, call, since, heard)
        turns = self.turns(call.call_sid)
        log = (self.work / "workers.log").read_text(errors="replace")
        row.facts.update(first_worker=first, resumed_on=took, resume_audio_s=round(resumed_audio_s, 1),
                         number_audio_s=round(number_audio_s, 1) if number_audio_s is not None else None,
                         answered_after=answered_s is not None, turns=[t.get("route") for t in turns],
                         # what the caller said before the fault, still in the call's records
                         said_before_kept=any(t.get("route") == "llm" and (t.get("reply") or "").startswith("불편을")
                                              for t in turns),
                         past_unread=log.count(PAST_UNREAD) > unread_before)
        if kind == "records":
            row.records_intact = row.facts["resumes"] == 1
            row.outcome = (f"resume sentence {row.first_audio_s:.2f} s after the reset, the past unread "
                           f"(a fresh start); the next turn answered: {answered_s is not None}")
        else:
            row.records_intact = (ticket.get("category") == "street_lights" and ticket.get("location") == LOCATION
                                  and row.facts["segments"] == 2)
            row.outcome = (f"resume sentence {row.first_audio_s:.2f} s after the {'turn' if kind == 'raise' else 'reset'}"
                           f"; {first} -> {took}; ticket {ticket.get('reception_no', 'none')} "
                           f"({ticket.get('category')}, {ticket.get('location')}); {row.facts['segments']} segments")
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def run(self, only: list[str] | None = None) -> list[Row]:
        """The line's rows (``only``: of LINE_SCENARIOS)."""
        rows = []
        if not only or "kill" in only:
            rows.append(await self.kill_row())
        for kind in ("raise", "reset", "records"):
            if not only or kind in only:
                rows.append(await self.intake_fault_row(kind))
        if not only or "rolling" in only:
            rows.append(await self.rolling_row())
        return rows


LINE_SCENARIOS = ("kill", "raise", "reset", "records", "rolling")
__all__ = ["LIMIT_RESUME_S", "LINE_SCENARIOS", "LineLab"]
