"""``run_bot.py faults``: each fault of the reliability suite injected into a real bot, as a caller hears it.

Two bot processes (``python -m bot.testing.lab_server``: the product server with fault injection
on, see ``bot/testing/inject.py``) run on the configured models with a fake vLLM and a fake Twilio
REST API:

* bot A: ``call.transfer_number`` set (the apology offers a person; two failures transfer);
* bot B: no transfer number (two failures end politely with the opening hours), ``server.max_calls``
  2 (overload), and it is the one sent SIGTERM at the end (graceful shutdown).

Every fault goes through a real socket or a real process boundary: simulated Twilio callers
(``TwilioCallSimulator``) dial the signed webhook and speak a clip on the media stream. For each
fault one row: what was injected, what the caller heard (the names of the sentences played, from
the server's turn records, and the first words), the time from the end of the caller's speech to
the first audible bot audio and the longest silence after it (both measured on the caller's side,
on the playback clock), the server's event-loop lag while the fault ran (what every other call
lives with), whether the call's turn records are complete, and what else the scenario observed
(status and close codes, counts, the calls beside it) in ``Row.facts`` and ``Row.others``.

The limits (docs/faults.md): no silence over 2.0 s after the caller's turn ends; after an LLM
failure the first words (the apology, or the filler while waiting) within 1.5 s of the turn's end
(server record); other calls' event-loop lag p99 under 20 ms while a client is hostile.

Then the line's rows (issue 46, ``bot/tools/line_faults.py``): two workers of one line behind a real
nginx, the worker holding a call in the middle of an intake killed (-9), the pipeline raising mid-turn,
the proxy's sockets reset, the records database unreachable during a resume, and both workers restarted
in turn with four calls in progress (``--only kill``, ``raise``, ``reset``, ``records``, ``rolling``).

This module measures and prints; it does not judge. ``run_bot.py faults`` is a benchmark: real
Whisper decides part of every silence, so it prints the figures with the limits beside them and
exits 0 whatever they are (1 only if the lab could not run). The tests (``tests/call/test_faults.py``)
run the scenarios that need a real process with a fixed-delay STT, whose time they control, and
hold each row to what the caller should hear and to the limits (``bot/testing/fault_oracles.py``);
the model's faults are held at the dialog stage (``tests/stages/test_dialog_llm.py``), the webhook
and overload rows in the app in-process (``tests/app/test_hostile_clients.py``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets as pysecrets
import signal
import sqlite3
import time
from contextlib import suppress
from pathlib import Path

import httpx
import websockets
from loguru import logger

from bot.config import Config
from bot.core.wav import read_wav
from bot.dialog.state import CannedReplies
from bot.testing.fake_llm import FakeLLM
from bot.testing.fault_rows import Row
from bot.testing.lab import Lab
from bot.testing.process import BotProcess, FakeTwilioAPI, tls_context
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    sign_twilio_request,
    voice_webhook_params,
)
from bot.tools.bench import Target, load_turn_set, speech_bounds
from bot.tools.soak import soak

ROOT = Path(__file__).resolve().parent.parent.parent
CLIP = ROOT / "tests" / "fixtures" / "en_hello.wav"
CLIP_TEXT = "Hello, how are you today?"  # what the clip says (tests/fixtures/make_fixtures.sh)
CANNED = CannedReplies.load(ROOT / "bot" / "data" / "replies.toml")
DESK = "+8221200000"
ACCOUNT_SID = "AC" + "2" * 32
AUTH_TOKEN = "fault-lab-" + pysecrets.token_hex(8)

# The limits the report prints beside the figures (docs/faults.md); the tests hold the rows to them.
LIMIT_SILENCE_S = 2.0
LIMIT_APOLOGY_S = 1.5
LIMIT_LAG_P99_MS = 20.0  # the target with a hostile client (the tests bound only blocking calls)
STAGGER_S = 0.2  # the first-named call of a scenario takes the speaking floor first
QUIET_DONE_S = 2.1  # the bot has finished when it has been quiet this long (longer than the silence limit)
NOTHING_HEARD_S = 6.0  # ... or when nothing at all came this long after the caller's turn
TALKING_ENOUGH_S = 4.0  # ... or (last turn) when it has talked this long without a pause

# Settings every fault run uses (printed in the report): English STT for the English test clip
# (the faults are about the call path, not Korean recognition), quick idle and slow-loris timers.
LAB_OVERRIDES = ("stt.language='en'", "stt.hotwords=''", "call.idle_prompt_secs=6.0",
                 "server.start_timeout_secs=3.0", "server.max_calls=16")
BOT_B_OVERRIDES = ("server.max_calls=2", "server.drain_secs=3.0")


# --------------------------------------------------------------------------------- rows


def _s(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def render_report(rows: list[Row], meta: dict[str, str]) -> str:
    """The figures of every row, the limits in the column heads: a table to read, not a verdict."""
    lines = ["# Fault report", "", "Every fault injected through a real socket or process boundary into `run_bot.py` "
             "(see bot/tools/faults.py). Caller side: simulated Twilio callers; times on the caller's playback clock.",
             "", *[f"- {k}: {v}" for k, v in meta.items()], "",
             f"Limits: longest silence after the caller's turn <= {LIMIT_SILENCE_S} s; LLM failures: first words "
             f"<= {LIMIT_APOLOGY_S} s after the turn ends (server record); hostile client: other calls' event-loop "
             f"lag p99 < {LIMIT_LAG_P99_MS:.0f} ms. What each row should sound like: docs/faults.md "
             "(tests/call/test_faults.py asserts it).", "",
             f"| fault | injected | caller heard (first words) | first audio s | apology s (limit {LIMIT_APOLOGY_S}) | "
             f"longest silence s (limit {LIMIT_SILENCE_S}) | loop lag p99 ms (target {LIMIT_LAG_P99_MS:.0f}) | "
             "records intact | outcome |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        intact = "-" if r.records_intact is None else ("yes" if r.records_intact else "**no**")
        lines.append(f"| {r.fault} | {r.injected} | {r.heard} | {_s(r.first_audio_s)} | {_s(r.apology_s)} | "
                     f"{_s(r.longest_silence_s)} | {_s(r.lag_p99_ms, 1)} | {intact} | {r.outcome} |")
    lines += ["", f"{len(rows)} rows; the figures beside their limits, not judged here.", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------- the lab


def heard_names(records: list[dict]) -> list[str]:
    """Sentence names the caller heard in these turns (greeting turn excluded), repeats of "reply" merged."""
    out: list[str] = []
    for rec in records:
        if rec.get("route") == "greeting":
            continue
        for name in rec.get("heard") or []:
            if not (name == "reply" and out and out[-1] == "reply"):
                out.append(name)
    return out


def describe_heard(names: list[str], records: list[dict]) -> str:
    if not names:
        return "nothing"
    first = names[0]
    if first == "reply":
        text = next((r.get("reply") for r in records if r.get("route") == "llm" and r.get("reply")), "") or ""
    else:
        text = getattr(CANNED, first, "") if hasattr(CANNED, first) else ""
    words = " ".join(text.split()[:3])
    return " → ".join(names) + (f" (“{words}…”)" if words else "")


class Bot:
    """One bot process of the lab and what a caller or the report needs from it."""

    def __init__(self, name: str, lab: FaultLab, overrides: list[str]):
        self.name = name
        self.lab = lab
        self.records_db = lab.work / f"records-{name}" / "calls.db"
        self.records_db.parent.mkdir(parents=True, exist_ok=True)
        self.public_host = f"voice-{name}.example.org"
        sets = [*lab.base_overrides, f"llm.base_url='{lab.llm.base_url}'", f"twilio.api_base_url='{lab.twilio.base_url}'",
                f"server.public_host='{self.public_host}'", f"records.url='sqlite:///{self.records_db}'", *overrides]
        entry = ["-m", "bot.testing.lab_server", "--fault-injection"]
        if lab.stt_delay_ms is not None:
            entry += ["--stt-text", CLIP_TEXT, "--stt-delay-ms", str(lab.stt_delay_ms)]
        self.proc = BotProcess(sets, {"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT_SID},
                               lab.work / f"bot-{name}.log", config_path=lab.config_path, entry=tuple(entry),
                               extra_args=("-v",) if lab.verbose else ())

    @property
    def public_url(self) -> str:
        return f"https://{self.public_host}/twilio/voice"

    async def webhook(self, call_sid: str | None = None, **kw) -> httpx.Response:
        params = voice_webhook_params(call_sid or new_sid("CA"), account_sid=ACCOUNT_SID)
        return await post_voice_webhook(self.proc.base_url, self.public_url, params, AUTH_TOKEN, **kw)

    async def open_call(self, fault: str | None = None) -> TwilioCallSimulator:
        """Dial: the signed webhook, then a simulator for the stream (``fault``: an injected fault)."""
        call_sid = new_sid("CA")
        resp = await self.webhook(call_sid)
        if resp.status_code != 200:
            raise RuntimeError(f"webhook answered {resp.status_code}: {resp.text[:200]}")
        _, params = parse_twiml_stream(resp.text)
        if fault:
            params["fault"] = fault
        return TwilioCallSimulator(self.proc.ws_url, call_sid=call_sid, custom_parameters=params,
                                   account_sid=ACCOUNT_SID)

    async def records(self, call_sid: str, *, timeout: float = 15.0) -> list[dict]:
        """The call's turn records once it has ended (from ``/api/turns``, i.e. the records database)."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            while True:
                data = (await client.get(f"{self.proc.base_url}/api/turns", headers=self.proc.records_headers)).json()
                recs = [t for t in data.get("turns", []) if t.get("call_id") == call_sid]
                if recs or time.monotonic() > deadline:
                    return sorted(recs, key=lambda r: r.get("index", 0))
                await asyncio.sleep(0.25)

    async def loop_lag(self, since_wall: float) -> dict:
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            return (await client.get(f"{self.proc.admin_url}/api/loop_lag", params={"since": since_wall})).json()

    async def metrics(self) -> str:
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            return (await client.get(f"{self.proc.admin_url}/metrics")).text

    async def healthz(self) -> httpx.Response:
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            return await client.get(f"{self.proc.admin_url}/healthz")


class FaultLab(Lab):
    """The fakes and the two bots; ``with FaultLab(...) as lab:`` then ``await lab.run(...)``."""

    def __init__(self, config_path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                 work_dir: Path | None = None, clip: Path = CLIP, verbose: bool = False,
                 stt_delay_ms: float | None = None):
        """``stt_delay_ms``: None runs real Whisper (the benchmark); a number gives every call the
        fixed-delay STT (``bot/testing/fixed_stt.py``), so the silence is the bot's own (the tests)."""
        self.config_path = config_path
        self.stt_delay_ms = stt_delay_ms
        self.verbose = verbose
        self.base_overrides = [*overrides, *LAB_OVERRIDES]
        super().__init__(work_dir)
        self.clip_pcm, self.clip_rate = _read_clip(clip)
        self._rows: set[str] | None = None  # run(rows=...): the llm and twice rows to run (None: all)

    def _start_parts(self) -> None:
        self.llm = self._stack.enter_context(FakeLLM(first_token_delay=0.15, token_delay=0.01))
        self.twilio = self._stack.enter_context(FakeTwilioAPI())
        # A desk that always answers: the transfer rows do not depend on the hour the suite runs.
        self.a = Bot("a", self, [f"call.transfer_number='{DESK}'", 'line.hours=["24/7"]', "line.breaks=[]"])
        self._stack.callback(self.a.proc.stop)
        self.b = Bot("b", self, list(BOT_B_OVERRIDES))
        self._stack.callback(self.b.proc.stop)
        self.a.proc.wait_ready(300)
        self.b.proc.wait_ready(300)

    # --- caller actions -----------------------------------------------------------------------

    async def greeted(self, call: TwilioCallSimulator) -> None:
        await call.wait_for_media(timeout=20)
        await call.wait_for_silence_from_bot(gap=0.6, timeout=30)

    async def speak(self, call: TwilioCallSimulator) -> float:
        """Say the clip up to the end of its speech; returns when its last speech frame was sent."""
        await call.send_audio(self.clip_pcm, self.clip_rate)
        return time.monotonic()

    def _floor(self) -> asyncio.Semaphore:
        """The speaking floor of this event loop: on a 2-core CPU box two transcriptions at once
        double each other's time, which is the machine, not the fault (production STT is on the GPU)."""
        loop = asyncio.get_running_loop()
        if getattr(self, "_floor_loop", None) is not loop:
            self._floor_loop, self._floor_sem = loop, asyncio.Semaphore(1)
        return self._floor_sem

    async def listen(self, call: TwilioCallSimulator, since: float, *, hang_up_early: bool = False) -> float:
        """Until the bot has answered and gone quiet (or hung up, or said nothing); returns the end.

        ``hang_up_early``: also stop once the bot has been talking without a pause for
        ``TALKING_ENOUGH_S`` (the caller's last turn: a gap inside a canned sentence cannot
        happen, and waiting out a 10-second apology only makes the suite slower).
        """
        while True:
            now = time.monotonic()
            if call.closed:
                return min(now, call.closed_at or now)
            after = [iv for iv in call.heard_intervals() if iv[1] > since]
            if after and now - after[-1][1] >= QUIET_DONE_S:
                return after[-1][1] + QUIET_DONE_S
            if not after and now - since >= NOTHING_HEARD_S:
                return now
            if hang_up_early and after:
                start = after[-1][0]
                for prev, nxt in zip(reversed(after[:-1]), reversed(after)):
                    if nxt[0] - prev[1] > 0.35:
                        break
                    start = prev[0]
                if min(now, after[-1][1]) - start >= TALKING_ENOUGH_S:
                    return now
            await asyncio.sleep(0.05)

    # --- rows ---------------------------------------------------------------------------------

    async def call_row(self, bot: Bot, row: Row, *, fault: str | None, turns: int = 1, until_end: bool = False,
                       apology: bool = False) -> Row:
        """A caller greets, speaks ``turns`` times and listens each time; the row says what it heard.

        ``until_end``: after the last turn the caller listens until the bot ends the call (else it
        hangs up once the bot has talked a while). ``apology``: the model fails, so the row also
        measures the first words after the failed turn and counts the error turns."""
        silences, firsts = [], []
        floor = self._floor()
        held = False

        async def take():
            nonlocal held
            await floor.acquire()
            held = True

        def give():
            nonlocal held
            if held:
                held = False
                floor.release()

        # The floor is taken before dialling and, for a next turn, while still listening to the
        # answer: a caller never waits for it in silence (the idle prompt would answer the wait).
        waiting: asyncio.Future = asyncio.ensure_future(take())
        try:
            await waiting
            t0, wall0 = time.monotonic(), time.time()
            call = await bot.open_call(fault)
            async with call:
                await self.greeted(call)
                for turn in range(turns):
                    await waiting
                    if call.closed:
                        break
                    speech_end = await self.speak(call)
                    # The next caller's clip (2.3 s) ends after this one's transcription.
                    await asyncio.sleep(0.3)
                    give()
                    if turn + 1 < turns:
                        waiting = asyncio.ensure_future(take())
                    end = await self.listen(call, speech_end, hang_up_early=turn + 1 == turns and not until_end)
                    first, silence = silence_after(call, speech_end, end)
                    silences.append(silence)
                    firsts.append(first)
                closed = call.closed
        finally:
            if not waiting.done():
                waiting.cancel()
                with suppress(asyncio.CancelledError):
                    await waiting
            give()
        records = await bot.records(call.call_sid)
        lag = await bot.loop_lag(wall0)
        names = heard_names(records)
        row.names = names
        row.heard = describe_heard(names, records)
        row.first_audio_s = firsts[0] if firsts else None
        row.longest_silence_s = max(silences) if silences else None
        row.lag_p99_ms = lag.get("p99_ms")
        answered = [r for r in records if r.get("route") != "greeting"]
        row.records_intact = bool(records) and records[0].get("route") == "greeting" and len(answered) >= min(turns, 1) \
            and all(r.get("route") not in (None, "pending") for r in records)
        if apology:
            failed = [r for r in answered if r.get("route") == "error"]
            row.facts["error_turns"] = len(failed)
            row.facts["error_turns_saying_why"] = sum(1 for r in failed if r.get("error"))
            if failed and failed[0].get("first_audio_out") and failed[0].get("turn_end"):
                row.apology_s = round(failed[0]["first_audio_out"] - failed[0]["turn_end"], 3)
        hangups = [h for h in self.twilio.hangups if call.call_sid in h["path"]]
        if any("Twiml" in h["form"] for h in hangups):
            row.outcome = "transferred to the desk (<Dial>)"
        elif hangups or closed:
            row.outcome = "hung up"
        else:
            row.outcome = "call goes on"
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def llm_rows(self) -> list[Row]:
        """The model slow, hanging, failing or answering garbage: one call each, staggered."""
        specs = [
            ("llm slow", "first token 1.2 s after the request", "slow-1200", False),
            ("llm hang", "headers, then nothing (first-token timeout 1.5 s)", "hang", True),
            ("llm 500", "HTTP 500 error body", "500", True),
            ("llm down", "proxy's 502 page: the model server is gone", "down", True),
            ("llm refused", "connection refused (nothing listening)", "refused", True),
            ("llm invalid json", "a complete stream that is not JSON", "invalid_json", True),
            ("llm cut off", "JSON cut in half, finish_reason=length", "cut_off", True),
        ]
        specs = [s for s in specs if self._wanted(s[0])]

        async def one(name, injected, fault, apology) -> Row:
            return await self.call_row(self.a, Row(name, injected), fault=f"llm:{fault}", apology=apology)

        return list(await asyncio.gather(*(one(*s) for s in specs)))

    async def repeated_failure_rows(self) -> list[Row]:
        """Two failed turns in a row: a person (bot A), or the opening hours and a hang-up (bot B)."""
        async def transfer() -> Row:
            return await self.call_row(self.a, Row("llm fails twice", "HTTP 500 on two turns in a row, transfer "
                                                   "number set"), fault="llm:500", turns=2, until_end=True, apology=True)

        async def closing() -> Row:
            await asyncio.sleep(STAGGER_S)
            return await self.call_row(self.b, Row("llm fails twice, no desk", "HTTP 500 on two turns in a row, "
                                                   "no transfer number"), fault="llm:500", turns=2,
                                       until_end=True, apology=True)

        rows = [make() for name, make in (("llm fails twice", transfer), ("llm fails twice, no desk", closing))
                if self._wanted(name)]
        return list(await asyncio.gather(*rows))

    async def stage_rows(self) -> list[Row]:
        """The STT or the TTS raising inside one call while another call goes on beside it."""
        async def one(delay: float, name: str, injected: str, fault: str) -> Row:
            await asyncio.sleep(delay)
            wall0 = time.time()
            bystander = Row(f"{name}: other call", "none (a normal call at the same time)")
            fault_row, other = await asyncio.gather(
                self.call_row(self.a, Row(name, injected), fault=fault),
                self._later(STAGGER_S, self.call_row(self.a, bystander, fault=None)))
            fault_row.others.append(other)
            fault_row.outcome += f"; other call: {other.heard}, silence {_s(other.longest_silence_s)} s"
            fault_row.lag_p99_ms = (await self.a.loop_lag(wall0)).get("p99_ms")
            return fault_row

        return list(await asyncio.gather(
            one(0.0, "stt raises", "every transcription of the call raises", "stt_error"),
            one(2 * STAGGER_S, "tts raises", "every synthesis of the call raises (canned audio still plays)",
                "tts_error")))

    @staticmethod
    async def _later(secs: float, coro):
        await asyncio.sleep(secs)
        return await coro

    async def idle_row(self) -> Row:
        """The caller says nothing: a prompt after call.idle_prompt_secs, then goodbye and hang-up."""
        row = Row("idle caller", "caller silent after the greeting (call.idle_prompt_secs = 6)")
        t0, wall0 = time.monotonic(), time.time()
        call = await self.a.open_call()
        async with call:
            await self.greeted(call)
            greeting_end = call.heard_intervals()[-1][1]
            await call.wait_closed(timeout=30)
        records = await self.a.records(call.call_sid)
        names = [n for r in records for n in r.get("heard") or []]
        ivs = [iv for iv in call.heard_intervals() if iv[0] > greeting_end + 0.05]
        row.names = names
        row.heard = describe_heard([n for n in names[1:] if n != "ai_notice"], records)  # what came after the greeting and its notice
        row.first_audio_s = round(ivs[0][0] - greeting_end, 2) if ivs else None
        row.longest_silence_s = None
        row.lag_p99_ms = (await self.a.loop_lag(wall0)).get("p99_ms")
        row.records_intact = bool(records) and all(r.get("route") not in (None, "pending") for r in records)
        hangups = [h for h in self.twilio.hangups if call.call_sid in h["path"]]
        row.outcome = (f"prompt {_s(row.first_audio_s, 1)} s after the greeting ended; "
                       + ("hung up (Status=completed)" if hangups else "stream closed"))
        row.facts["hung_up"] = bool(hangups)
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def hostile_row(self) -> Row:
        """100 malformed messages on one call (8 kinds) plus bad connections, while two calls talk."""
        row = Row("hostile client", "100 malformed messages on one call (8 kinds), media before start, "
                  "a second stream on a used token")
        t0, wall0 = time.monotonic(), time.time()
        log_from = len(self.a.proc.log())
        hostile = await self.a.open_call()
        normal_rows = [Row("other call 1", "-"), Row("other call 2", "-")]
        async with hostile:
            await self.greeted(hostile)
            used_token = hostile.custom_parameters["token"]

            async def attack() -> dict:
                kinds = hostile_messages(hostile)
                for i in range(100):
                    msg = kinds[i % len(kinds)]
                    await hostile.send_raw(msg)
                    await asyncio.sleep(0.02)
                up = not hostile.closed  # ignored, not closed: Twilio's protocol has no error message
                return {"media_before_start": await media_before_start(self.a.proc.ws_url),
                        "second_stream": await second_stream(self.a.proc.ws_url, hostile.call_sid, used_token),
                        "up_after_flood": up}

            results = await asyncio.gather(
                attack(),
                self.call_row(self.a, normal_rows[0], fault=None),
                self._later(STAGGER_S, self.call_row(self.a, normal_rows[1], fault=None)))
            refused = results[0]
            still_up = refused.pop("up_after_flood")
        log = self.a.proc.log()[log_from:]
        sid = hostile.call_sid[:6]
        lines = [ln for ln in log.splitlines() if "on the media stream (further ones" in ln and sid in ln]
        kinds_logged = len(lines)
        row.lag_p99_ms = (await self.a.loop_lag(wall0)).get("p99_ms")
        row.heard = "; ".join(f"other call {i + 1}: {r.heard}" for i, r in enumerate(normal_rows))
        row.longest_silence_s = max((r.longest_silence_s or 99.0) for r in normal_rows)
        row.first_audio_s = max((r.first_audio_s or 99.0) for r in normal_rows)
        records = await self.a.records(hostile.call_sid)
        row.records_intact = bool(records) and all(r.records_intact for r in normal_rows)
        row.outcome = (f"hostile call {'still up after the flood (ignored)' if still_up else 'closed by the flood'}; "
                       f"{kinds_logged} log lines for {len(HOSTILE_KINDS)} kinds; media before start: close "
                       f"{refused['media_before_start']}; second stream on the token: close {refused['second_stream']}")
        row.others = normal_rows
        row.facts.update(still_up=still_up, kinds_logged=kinds_logged, kinds_sent=len(HOSTILE_KINDS), **refused)
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def webhook_row(self) -> Row:
        """Replayed signature, wrong URL, huge form body, missing CallSid, unsigned: refused, nothing stored."""
        row = Row("webhook abuse", "replayed signed request, signature for another URL, 1 MB form body, "
                  "no CallSid, no signature")
        t0 = time.monotonic()
        bot = self.a
        before = (await bot.healthz()).json()
        metrics_before = await bot.metrics()
        base, url = bot.proc.base_url, bot.public_url
        codes: dict[str, int] = {}
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            params = voice_webhook_params(new_sid("CA"), account_sid=ACCOUNT_SID)
            sig = sign_twilio_request(url, params, AUTH_TOKEN)
            headers = {"X-Twilio-Signature": sig}
            first = await client.post(f"{base}/twilio/voice", data=params, headers=headers)
            codes["replayed"] = (await client.post(f"{base}/twilio/voice", data=params, headers=headers)).status_code
            other = voice_webhook_params(new_sid("CA"), account_sid=ACCOUNT_SID)
            codes["wrong URL"] = (await post_voice_webhook(base, "https://evil.example/twilio/voice", other, AUTH_TOKEN,
                                                           client=client)).status_code
            huge = {**voice_webhook_params(new_sid("CA"), account_sid=ACCOUNT_SID), "Junk": "x" * 1_000_000}
            codes["huge body"] = (await post_voice_webhook(base, url, huge, AUTH_TOKEN, client=client)).status_code
            no_sid = {k: v for k, v in voice_webhook_params(account_sid=ACCOUNT_SID).items() if k != "CallSid"}
            codes["no CallSid"] = (await client.post(f"{base}/twilio/voice", data=no_sid, headers={
                "X-Twilio-Signature": sign_twilio_request(url, no_sid, AUTH_TOKEN)})).status_code
            codes["unsigned"] = (await post_voice_webhook(base, url, voice_webhook_params(account_sid=ACCOUNT_SID),
                                                          None, client=client)).status_code
        after = (await bot.healthz()).json()
        reserved = after["reserved_calls"] - before["reserved_calls"]
        row.outcome = ", ".join(f"{k} → {v}" for k, v in codes.items()) + f"; slots reserved by the refused: " \
                      f"{reserved - (1 if first.status_code == 200 else 0)}"
        row.heard = "-"
        row.records_intact = reserved == (1 if first.status_code == 200 else 0)
        rejected = _counter(await bot.metrics(), "voice_calls_rejected_total") - _counter(metrics_before,
                                                                                          "voice_calls_rejected_total")
        row.facts.update(first_status=first.status_code, codes=codes, slots_reserved=reserved,
                         rejected_counted=rejected)
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def slow_loris_row(self) -> Row:
        """A WebSocket that never sends ``start`` (and one that sends only ``connected``)."""
        row = Row("slow loris", "media WebSockets that never send start (server.start_timeout_secs = 3)")
        t0 = time.monotonic()

        async def hold(first: str | None) -> tuple[float, int | None]:
            t = time.monotonic()
            async with websockets.connect(self.a.proc.ws_url) as ws:
                if first:
                    await ws.send(first)
                try:
                    await asyncio.wait_for(ws.recv(), 30)
                except websockets.ConnectionClosed as e:
                    return time.monotonic() - t, e.rcvd.code if e.rcvd else None
                except TimeoutError:
                    return time.monotonic() - t, None
            return time.monotonic() - t, None

        results = await asyncio.gather(hold(None), hold(json.dumps({"event": "connected", "protocol": "Call",
                                                                      "version": "1.0.0"})))
        row.outcome = "; ".join(f"closed {code} after {secs:.1f} s" for secs, code in results)
        row.heard = "-"
        row.facts["closes"] = [(round(secs, 2), code) for secs, code in results]
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def overload_row(self) -> Row:
        """max_calls + 4 callers dial at the same moment: exactly max_calls served, the rest hear busy."""
        bot, max_calls = self.b, 2
        row = Row("overload", f"{max_calls + 4} callers dial at once (server.max_calls = {max_calls})")
        t0, wall0 = time.monotonic(), time.time()
        metrics_before = _counter(await bot.metrics(), 'voice_calls_rejected_total{reason="max_calls"}')

        async def dial() -> str:
            call_sid = new_sid("CA")
            resp = await bot.webhook(call_sid)
            if resp.status_code != 200:
                return f"HTTP {resp.status_code}"
            if "<Say" in resp.text and "<Hangup" in resp.text:
                return "busy"
            _, params = parse_twiml_stream(resp.text)
            call = TwilioCallSimulator(bot.proc.ws_url, call_sid=call_sid, custom_parameters=params,
                                       account_sid=ACCOUNT_SID)
            async with call:
                await asyncio.wait_for(self.greeted(call), 30)
            return "served"

        try:
            outcomes = await asyncio.wait_for(asyncio.gather(*(dial() for _ in range(max_calls + 4))), 60)
        except TimeoutError:
            outcomes = ["hung"]
        counted = _counter(await bot.metrics(), 'voice_calls_rejected_total{reason="max_calls"}') - metrics_before
        served, busy = outcomes.count("served"), outcomes.count("busy")
        row.heard = f"{served} greeted; {busy} heard Twilio say “{' '.join(CANNED.busy.split()[:3])}…”"
        row.outcome = f"served {served}, busy {busy}, other {len(outcomes) - served - busy}; /metrics busy +{counted:.0f}"
        row.lag_p99_ms = (await bot.loop_lag(wall0)).get("p99_ms")
        row.facts.update(max_calls=max_calls, dialled=len(outcomes), outcomes=outcomes, served=served, busy=busy,
                         busy_counted=counted)
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def soak_row(self) -> Row:
        """The short soak, on bot A after every fault above: what the calls took comes back."""
        bot = self.a
        row = Row("soak (short)", "after all the faults: 3 at once (warm-up), then 1 alone and 3 at once (the "
                  "full soak: run_bot.py bench --soak)")
        t0, wall0 = time.monotonic(), time.time()
        target = Target(bot.proc.base_url, bot.public_url, bot.proc.ws_url, AUTH_TOKEN,
                        records_token=bot.proc.records_token, admin_url=bot.proc.admin_url)
        result = await soak(target, load_turn_set(), rounds=1, sequential=1, concurrent=3, warmup_sequential=0)
        base, last = result.baseline, result.samples[-1]
        row.outcome = (f"RSS {base.rss_mb:.0f} → {last.rss_mb:.0f} MB ({result.rss_growth_pct(last):+.1f} %), "
                       f"asyncio tasks {base.tasks} → {last.tasks}, open fds {base.fds} → {last.fds} "
                       f"(sockets {base.sockets} → {last.sockets}), "
                       f"failed calls {sum(s.failed for s in result.samples)}")
        row.lag_p99_ms = (await bot.loop_lag(wall0)).get("p99_ms")
        # What the soak itself found wrong (bot/tools/soak.py: growth beyond its bounds, failed calls).
        row.facts["soak_problems"] = list(result.problems)
        if result.problems:
            row.outcome += "; the soak reports: " + "; ".join(result.problems)
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    async def shutdown_row(self) -> Row:
        """SIGTERM with a call in progress: busy to new calls, draining, goodbye after drain_secs, exit 0."""
        bot = self.b
        row = Row("shutdown", "SIGTERM with a call in progress (server.drain_secs = 3)")
        t0 = time.monotonic()
        call = await bot.open_call()
        async with call:
            await self.greeted(call)
            heard_before = len(call.heard_intervals())
            sigterm_at = time.monotonic()
            bot.proc.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.5)
            health = await bot.healthz()
            busy = await bot.webhook()
            await call.wait_closed(timeout=40)
            goodbye = [iv for iv in call.heard_intervals()[heard_before:]]
        try:
            code = await asyncio.to_thread(bot.proc.proc.wait, 40)
        except Exception:  # noqa: BLE001
            code = None
        exit_after = time.monotonic() - sigterm_at
        names = _db_heard(bot.records_db, call.call_sid)
        hangups = [h for h in self.twilio.hangups if call.call_sid in h["path"]]
        row.heard = describe_heard([n for n in names if n != "greeting"], [])
        row.first_audio_s = round(goodbye[0][0] - sigterm_at, 2) if goodbye else None
        row.records_intact = "shutdown_goodbye" in names
        row.outcome = (f"/healthz {health.status_code} {health.json().get('status')}; new call: "
                       f"{'busy' if '<Say' in busy.text else busy.status_code}; goodbye "
                       f"{_s(row.first_audio_s, 1)} s after SIGTERM; {'hung up' if hangups else 'stream closed'}; "
                       f"exit {code} after {exit_after:.1f} s")
        row.names = names
        row.facts.update(healthz_status=health.status_code, healthz_state=health.json().get("status"),
                         new_call_told_busy="<Say" in busy.text and "<Hangup" in busy.text, hung_up=bool(hangups),
                         exit_code=code)
        row.seconds = round(time.monotonic() - t0, 1)
        return row

    # Scenarios in waves: the scenarios of a wave run at the same time (their callers take turns
    # to speak); the hostile client has the server to itself apart from its two witnesses, and
    # bot B's overload and shutdown come last, one after the other.
    WAVES = (("llm",), ("twice", "idle", "loris"), ("stage",), ("hostile",), ("webhook", "overload"),
             ("soak", "shutdown"))

    def _wanted(self, row: str) -> bool:
        return self._rows is None or row in self._rows

    async def run(self, only: list[str] | None = None, *, rows: set[str] | None = None) -> list[Row]:
        """Every scenario (or only those named: llm, twice, stage, idle, loris, hostile, webhook,
        overload, soak, shutdown), rows in report order. ``rows``: of the scenarios with a row per
        fault (llm, twice), only the rows so named."""
        self._rows = rows
        scenarios = {"llm": self.llm_rows, "twice": self.repeated_failure_rows, "stage": self.stage_rows,
                     "idle": self.idle_row, "loris": self.slow_loris_row, "hostile": self.hostile_row,
                     "webhook": self.webhook_row, "overload": self.overload_row, "soak": self.soak_row,
                     "shutdown": self.shutdown_row}
        unknown = set(only or ()) - set(scenarios)
        if unknown:
            raise ValueError(f"unknown scenarios {sorted(unknown)} (known: {', '.join(scenarios)})")
        rows: list[Row] = []
        for batch in self.WAVES:
            names = [n for n in batch if not only or n in only]
            if not names:
                continue
            t = time.monotonic()
            results = await asyncio.gather(*(scenarios[n]() for n in names))
            for got in results:
                rows += got if isinstance(got, list) else [got]
            logger.info("faults: {} done in {:.1f} s", "+".join(names), time.monotonic() - t)
        return rows


# --------------------------------------------------------------------------------- measuring


def silence_after(call: TwilioCallSimulator, speech_end: float, end: float) -> tuple[float | None, float]:
    """(first audible audio after ``speech_end``, longest silence from then until the bot finished).

    The silence before the first audio counts; the quiet after the last audio does not (the bot
    had finished). Nothing heard: the whole window is silence.
    """
    ivs = [iv for iv in call.heard_intervals() if iv[1] > speech_end and iv[0] < end]
    if not ivs:
        return None, round(end - speech_end, 3)
    first = max(ivs[0][0], speech_end)
    gaps = [first - speech_end] + [b[0] - a[1] for a, b in zip(ivs, ivs[1:])]
    return round(first - speech_end, 3), round(max(gaps), 3)


def _read_clip(path: Path) -> tuple[bytes, int]:
    """The clip up to the end of its speech (the line sends silence after it, as a phone does)."""
    pcm, rate = read_wav(path)
    _, end = speech_bounds(pcm, rate)
    frame = round(0.02 * rate)
    samples = min(len(pcm) // 2, math.ceil(end / 0.02) * frame)
    return pcm[: samples * 2], rate


def _counter(metrics_text: str, name: str) -> float:
    """Sum of a Prometheus counter's samples whose line starts with ``name`` (labels included or not)."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                pass
    return total


def _db_heard(db: Path, call_sid: str) -> list[str]:
    """Sentence names in the call's turn records, read from the SQLite records database directly."""
    try:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT record FROM turns WHERE call_sid = ? ORDER BY idx", (call_sid,)).fetchall()
    except sqlite3.Error as e:
        logger.warning("faults: cannot read {}: {}", db, e)
        return []
    return [n for (rec,) in rows for n in (json.loads(rec).get("heard") or [])]


HOSTILE_KINDS = ("invalid JSON", "unknown event", "media payload is not base64", "oversized message",
                 "out-of-order sequenceNumber", "duplicate start", "JSON that is not an object", "binary frame")


def hostile_messages(call: TwilioCallSimulator) -> list[str | bytes]:
    """One message of each kind in ``HOSTILE_KINDS`` (the server should log each kind once)."""
    sid = call.stream_sid
    media = {"track": "inbound", "chunk": "1", "timestamp": "0", "payload": "/////w=="}
    return [
        '{"event": "media", "streamSid": ',
        json.dumps({"event": "surprise", "streamSid": sid}),
        json.dumps({"event": "media", "streamSid": sid, "media": {**media, "payload": "***not base64***"}}),
        json.dumps({"event": "media", "streamSid": sid, "media": {**media, "payload": "A" * 70_000}}),
        json.dumps({"event": "media", "sequenceNumber": "1", "streamSid": sid, "media": media}),
        json.dumps({"event": "start", "streamSid": sid, "start": {"callSid": call.call_sid, "streamSid": sid}}),
        "[1, 2, 3]",
        b"\x00\x01binary",
    ]


async def media_before_start(ws_url: str) -> int | None:
    async with websockets.connect(ws_url) as ws:
        for _ in range(3):
            await ws.send(json.dumps({"event": "media", "media": {"payload": "/////w=="}}))
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as e:
            return e.rcvd.code if e.rcvd else None
    return None


async def second_stream(ws_url: str, call_sid: str, token: str) -> int | None:
    call = TwilioCallSimulator(ws_url, call_sid=call_sid, custom_parameters={"token": token}, account_sid=ACCOUNT_SID)
    async with call:
        return await call.wait_closed(timeout=10)


# --------------------------------------------------------------------------------- command


def run_faults(config: Config, args) -> int:
    """``run_bot.py faults``: run the lab on this config with real Whisper and write the report."""
    out = Path(args.out)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "config": args.config or "config.toml",
            "overrides": " ".join(args.overrides) or "-",
            "lab settings": " ".join(LAB_OVERRIDES) + "; bot B: " + " ".join(BOT_B_OVERRIDES),
            "LLM": "fake vLLM (bot/testing/fake_llm.py), faults per request",
            "caller clip": str(CLIP.relative_to(ROOT)), "machine": f"{os.cpu_count()} CPUs"}
    meta["STT"] = "real Whisper (the configured model): its time on this machine is in every silence"
    t0, load0 = time.monotonic(), os.getloadavg()[0]
    from bot.tools.line_faults import LINE_SCENARIOS, LineLab

    line_only = [n for n in args.only if n in LINE_SCENARIOS]
    lab_only = [n for n in args.only if n not in LINE_SCENARIOS]
    rows: list[Row] = []
    if lab_only or not args.only:
        with FaultLab(args.config, args.overrides, work_dir=out.parent / (out.stem + "-work"),
                      verbose=args.verbose) as lab:
            rows += asyncio.run(lab.run(lab_only or None))
    if line_only or not args.only:  # issue 46: two workers behind nginx, one killed, both restarted
        with LineLab(args.config, args.overrides, work_dir=out.parent / (out.stem + "-line-work"),
                     verbose=args.verbose) as line:
            rows += asyncio.run(line.run(line_only or None))
    meta["wall time"] = f"{time.monotonic() - t0:.0f} s"
    meta["machine"] += f", 1-minute load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
    out.write_text(render_report(rows, meta), encoding="utf-8")
    print(out.read_text(encoding="utf-8"))
    return 0  # figures, not a gate: tests/call/test_faults.py asserts the rows with a fixed-delay STT


__all__ = ["FaultLab", "Row", "render_report", "run_faults", "silence_after"]
