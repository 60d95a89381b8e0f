"""``run_bot.py abuse``: the public surface under abuse, measured on the real server (issue 35).

Starts ``run_bot.py`` (the product server on the configured models, with a fake vLLM, a fake
Twilio REST API, a temporary records database, the staff desk with one account and the QA page
behind a token) and attacks it as an outsider would, through real sockets:

* **login burst**: N wrong passwords for one desk account at the same moment. Figures: the wrong
  passwords that were checked beyond ``desk.login_attempts`` (limit 0), the 429 answers, and the
  server's resident memory during the burst (each argon2 check holds 64 MiB; limit: growth under
  ``--rss-growth-mb``).
* **pre-start sockets**: N media WebSockets from one address that never send ``start``, while a
  simulated Twilio call (``TwilioCallSimulator``, from another address) dials. Figures: accepted
  (limit ``server.media_prestart_per_client``), closed by the server and how long the longest was
  held (limit ``server.start_timeout_secs`` + 2 s), the call's first bot audio against the same
  call before the flood (limit +1 s), and sockets whose first frame is ~1 MiB (closed at once).
* **QA offer flood**: N offers with invented ``pc_id``s. Figures: offers answered and calls active
  against the QA page's cap, whether a citizen's webhook meanwhile still gets a stream, and how
  soon the never-connected offers freed their slots (limit ``server.qa_connect_timeout_secs`` + 5 s).
* **malformed starts**: N media sockets, each with one ``start`` of a bad shape (``MALFORMED_STARTS``).
  Figures: closed with 1008 (limit: all), tracebacks in the server's log (limit 0), and log lines
  per socket (limit 1).

It prints one row per figure with its limit and exits 1 when a figure is over its limit or could
not be measured (the desk or the QA page off, the server not starting), else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import secrets as pysecrets
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.testing.lab import Lab

# The parser is built for every command: the lab's modules (pipecat, httpx, websockets) load only when it runs.
if TYPE_CHECKING:
    from bot.config import Config
    from bot.testing.twilio_sim import TwilioCallSimulator

ACCOUNT_SID = "AC" + "5" * 32
AUTH_TOKEN = "abuse-bench-" + pysecrets.token_hex(8)
QA_TOKEN = "abuse_qa_" + pysecrets.token_hex(8)
DESK_KEY = pysecrets.token_urlsafe(40)
STAFF_NAME = "abuse.admin"
STAFF_PASSWORD = "abuse-" + pysecrets.token_urlsafe(12)
PUBLIC_HOST = "voice-abuse.example.org"
FLOOD_ADDRESS = "127.0.0.2"  # the attacker's sockets; the simulated Twilio call comes from 127.0.0.1
PLANTED_NUMBER = "010-1234-5678"  # in the malformed starts: must never reach the log in full
LIMIT_CALL_SLOWER_S = 1.0  # the call's first bot audio during the socket flood, beyond the same call before it
LIMIT_HELD_EXTRA_S = 2.0  # a socket that never starts is closed within start_timeout_secs + this
LIMIT_QA_FREED_EXTRA_S = 5.0  # an offer that never connects frees its slot within qa_connect_timeout_secs + this
BIG_FRAME_BYTES = 1024 * 1024 - 1024  # just under uvicorn's frame cap (bot.line.callgate.WS_MAX_BYTES)


# --------------------------------------------------------------------------------- what is sent


def new_sid(prefix: str) -> str:
    return prefix + uuid.uuid4().hex


def _start(call_sid: Any = None, stream_sid: Any = None, **body: Any) -> str:
    start = {"accountSid": ACCOUNT_SID, "streamSid": stream_sid or new_sid("MZ"), "callSid": call_sid or new_sid("CA"),
             "tracks": ["inbound"], "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
             "customParameters": {"token": "x"}}
    start.update(body)
    return json.dumps({"event": "start", "sequenceNumber": "1", "streamSid": start["streamSid"], "start": start})


_CONNECTED = json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})

# Every shape of bad ``start`` the bench and the tests send (each closes its socket with 1008).
MALFORMED_STARTS: dict[str, Any] = {
    "customParameters a string": lambda: [_CONNECTED, _start(customParameters=f"token=x&from={PLANTED_NUMBER}")],
    "customParameters a list": lambda: [_CONNECTED, _start(customParameters=["token", PLANTED_NUMBER])],
    "customParameters not strings": lambda: [_CONNECTED, _start(customParameters={"token": 5, "from": [PLANTED_NUMBER]})],
    "integer callSid": lambda: [_CONNECTED, _start(call_sid=1012345678)],
    "callSid with a line break": lambda: [_CONNECTED, _start(call_sid=f"CA1\nINFO forged line {PLANTED_NUMBER}")],
    "streamSid an object": lambda: [_CONNECTED, _start(stream_sid={"sid": PLANTED_NUMBER})],
    "mediaFormat a string": lambda: [_CONNECTED, _start(mediaFormat="audio/x-mulaw")],
    "deeply nested JSON": lambda: [_CONNECTED, '{"event": "start", "start": ' + "[" * 3000 + "]" * 3000 + "}"],
    "start not an object": lambda: [_CONNECTED, json.dumps({"event": "start", "start": PLANTED_NUMBER})],
    "not a JSON object": lambda: [json.dumps(["start", PLANTED_NUMBER])],
    "invalid JSON": lambda: [_CONNECTED, '{"event": "start", "start": {"callSid": "' + PLANTED_NUMBER],
    "no start": lambda: [_CONNECTED, json.dumps({"event": "media", "media": {"payload": "/////w=="}})],
    "oversized before start": lambda: [json.dumps({"event": "connected", "junk": "x" * 9000})],
    "binary frame": lambda: [b"\x00\x01" + PLANTED_NUMBER.encode()],
}


def malformed_start_messages(kind: str) -> list[str | bytes]:
    """The messages of one malformed start of ``kind`` (a key of ``MALFORMED_STARTS``), with fresh SIDs."""
    return MALFORMED_STARTS[kind]()


async def qa_offer_sdp() -> str:
    """An SDP offer with audio, as the QA page makes it, from an aiortc peer that never connects."""
    from aiortc import RTCConfiguration, RTCPeerConnection

    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    try:
        pc.addTransceiver("audio", direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())
        return pc.localDescription.sdp
    finally:
        await pc.close()


# --------------------------------------------------------------------------------- figures


@dataclass
class Figure:
    """One measured figure beside its limit; ``ok`` None: it could not be measured."""

    attack: str
    name: str
    value: Any
    limit: str
    ok: bool | None


def render(figures: list[Figure], meta: dict[str, str]) -> str:
    def shown(v: Any) -> str:
        if v is None:
            return "not measured"
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.2f}"
        return str(v)

    lines = ["# Abuse bench", "", *[f"- {k}: {v}" for k, v in meta.items()], "",
             "| attack | figure | value | limit | within |", "|---|---|---|---|---|"]
    for f in figures:
        within = "NOT MEASURED" if f.ok is None else "yes" if f.ok else "**NO**"
        lines.append(f"| {f.attack} | {f.name} | {shown(f.value)} | {f.limit} | {within} |")
    bad = [f for f in figures if not f.ok]
    lines += ["", f"{len(figures)} figures; {len(bad)} over their limit or not measured.", ""]
    return "\n".join(lines)


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class _RssSampler:
    """The peak resident memory of a process, sampled every 20 ms in a thread while in the block."""

    def __init__(self, pid: int):
        self.pid = pid
        self.before = _rss_mb(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            mb = _rss_mb(self.pid)
            if mb is not None:
                self.peak = max(self.peak or 0.0, mb)
            self._stop.wait(0.02)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(2)


def _can_bind(address: str) -> bool:
    try:
        with socket.socket() as s:
            s.bind((address, 0))
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------------- the lab


class AbuseLab(Lab):
    """The fakes and the server; ``with AbuseLab(config, ...) as lab:`` then ``await lab.run(...)``."""

    def __init__(self, config: Config, config_path: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                 work_dir: Path | None = None, verbose: bool = False):
        self.config = config
        self.config_path = config_path
        self.overrides = list(overrides)
        self.verbose = verbose
        super().__init__(work_dir)
        self.records_db = self.work / "records" / "calls.db"
        self.records_db.parent.mkdir(parents=True, exist_ok=True)
        for old in self.records_db.parent.glob("calls.db*"):  # a previous run's, in a kept --work directory
            old.unlink()
        self.flood_address = FLOOD_ADDRESS if _can_bind(FLOOD_ADDRESS) else None

    def _start_parts(self) -> None:
        from bot.testing.fake_llm import FakeLLM
        from bot.testing.process import BotProcess, FakeTwilioAPI

        llm = self._stack.enter_context(FakeLLM(model=self.config.llm.model, first_token_delay=0.05, token_delay=0.0))
        twilio = self._stack.enter_context(FakeTwilioAPI())
        sets = [*self.overrides, f"llm.base_url='{llm.base_url}'", f"twilio.api_base_url='{twilio.base_url}'",
                f"server.public_host='{PUBLIC_HOST}'", f"records.url='sqlite:///{self.records_db}'",
                "desk.cookie_secure=false"]
        self.bot = BotProcess(sets, {"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
                                     "QA_ACCESS_TOKEN": QA_TOKEN, "DESK_SECRET_KEY": DESK_KEY},
                              self.work / "bot.log", config_path=self.config_path,
                              extra_args=("-v",) if self.verbose else ())
        self._stack.callback(self.bot.stop)
        self.bot.wait_ready(300)
        self.desk_on = self._add_staff()

    def _add_staff(self) -> bool:
        if not self.config.desk.enabled:
            return False
        from bot.desk.auth import hash_password
        from bot.store.db import Store

        store = Store(f"sqlite:///{self.records_db}")
        try:
            store.add_staff(STAFF_NAME, role="admin", department=None, password_hash=hash_password(STAFF_PASSWORD))
        finally:
            store.engine.dispose()
        return True

    @property
    def public_url(self) -> str:
        return f"https://{PUBLIC_HOST}/twilio/voice"

    async def healthz(self) -> dict:
        import httpx

        async with httpx.AsyncClient(timeout=10) as client:
            return (await client.get(f"{self.bot.admin_url}/healthz")).json()

    async def dial(self) -> tuple[str, TwilioCallSimulator | None]:
        """The signed webhook: ("stream", a simulator for the call) or ("busy" / "HTTP n", None)."""
        from bot.testing.twilio_sim import (
            TwilioCallSimulator,
            parse_twiml_stream,
            post_voice_webhook,
            voice_webhook_params,
        )

        call_sid = new_sid("CA")
        resp = await post_voice_webhook(self.bot.base_url, self.public_url,
                                        voice_webhook_params(call_sid, account_sid=ACCOUNT_SID), AUTH_TOKEN)
        if resp.status_code != 200:
            return f"HTTP {resp.status_code}", None
        if "<Stream" not in resp.text:
            return "busy", None
        _, params = parse_twiml_stream(resp.text)
        return "stream", TwilioCallSimulator(self.bot.ws_url, call_sid=call_sid, custom_parameters=params,
                                             account_sid=ACCOUNT_SID)

    async def first_audio_s(self) -> float | None:
        """A whole simulated call: seconds from its ``start`` to the greeting's first audible audio."""
        from loguru import logger

        answer, call = await self.dial()
        if call is None:
            logger.warning("abuse: the measuring call was answered {}", answer)
            return None
        async with call:
            try:
                heard = await call.wait_for_media(timeout=30)
            except (TimeoutError, ConnectionError) as e:
                logger.warning("abuse: the measuring call heard nothing: {}", e)
                return None
            return heard - call.started_at

    async def run(self, *, logins: int, sockets: int, offers: int, starts: int,
                  rss_growth_mb: float) -> list[Figure]:
        from loguru import logger

        figures: list[Figure] = []
        for name, scenario in (("pre-start sockets", lambda: self.prestart_sockets(sockets)),
                               ("QA offer flood", lambda: self.qa_flood(offers)),
                               ("malformed starts", lambda: self.malformed_starts(starts)),
                               ("login burst", lambda: self.login_burst(logins, rss_growth_mb))):
            t = time.monotonic()
            try:
                figures += await scenario()
            except Exception as e:  # noqa: BLE001 - a scenario that could not run is a figure not measured
                logger.exception("abuse: {} could not be measured", name)
                figures.append(Figure(name, f"could not run ({type(e).__name__}: {e})", "-", "-", None))
            logger.info("abuse: {} done in {:.1f} s", name, time.monotonic() - t)
        return figures

    # --- the attacks --------------------------------------------------------------------------

    async def prestart_sockets(self, n: int) -> list[Figure]:
        import websockets

        sc = self.config.server
        attack = "pre-start sockets"
        cap = min(sc.media_prestart_per_client, sc.media_prestart_max)
        baseline = await self.first_audio_s()
        connect_kw = {"local_addr": (self.flood_address, 0)} if self.flood_address else {}
        attempted = asyncio.Event()
        tried = 0

        async def hold() -> tuple[str, float, int | None]:
            nonlocal tried
            t = time.monotonic()
            try:
                ws = await websockets.connect(self.bot.ws_url, open_timeout=10, max_size=None, **connect_kw)
            except websockets.InvalidStatus:
                return "refused", 0.0, None
            except (OSError, TimeoutError, websockets.InvalidHandshake):
                return "error", 0.0, None
            finally:
                tried += 1
                if tried == n:
                    attempted.set()
            try:
                await ws.send(_CONNECTED)  # and then nothing: a slow loris
                await asyncio.wait_for(ws.recv(), sc.start_timeout_secs + 30)
            except websockets.ConnectionClosed as e:
                return "closed", time.monotonic() - t, e.rcvd.code if e.rcvd else None
            except TimeoutError:
                return "held", time.monotonic() - t, None
            finally:
                await ws.close()
            return "answered", time.monotonic() - t, None

        with _RssSampler(self.bot.proc.pid) as rss:
            flood = [asyncio.create_task(hold()) for _ in range(n)]
            await asyncio.wait_for(attempted.wait(), 60)
            during = await self.first_audio_s() if self.flood_address else None
            results = await asyncio.gather(*flood)
        accepted = [r for r in results if r[0] not in ("refused", "error")]
        refused = sum(r[0] == "refused" for r in results)
        closed = [r for r in accepted if r[0] == "closed" and r[2] == 1008]
        longest = max((r[1] for r in accepted), default=0.0)
        figures = [
            Figure(attack, f"accepted / refused of {n} from one address", f"{len(accepted)} / {refused}",
                   f"accepted <= {cap} (media_prestart_per_client)", len(accepted) <= cap and len(accepted) + refused == n),
            Figure(attack, "accepted ones closed by the server (1008)", f"{len(closed)} / {len(accepted)}",
                   "all", len(closed) == len(accepted)),
            Figure(attack, "longest held (s)", round(longest, 2),
                   f"<= {sc.start_timeout_secs + LIMIT_HELD_EXTRA_S:.1f} (start_timeout_secs + {LIMIT_HELD_EXTRA_S:.0f})",
                   longest <= sc.start_timeout_secs + LIMIT_HELD_EXTRA_S),
            Figure(attack, "server RSS growth during the flood (MB)",
                   None if rss.peak is None or rss.before is None else round(rss.peak - rss.before, 1), "-", True),
        ]
        if baseline is None or during is None:
            why = "no flood address to bind (127.0.0.2)" if not self.flood_address else "the call heard nothing"
            figures.append(Figure(attack, f"a call's first bot audio during the flood (s) ({why})", None,
                                  f"before + {LIMIT_CALL_SLOWER_S}", None))
        else:
            figures.append(Figure(attack, f"a call's first bot audio during the flood (s; {baseline:.2f} before)",
                                  round(during, 2), f"<= {baseline + LIMIT_CALL_SLOWER_S:.2f} (before + "
                                  f"{LIMIT_CALL_SLOWER_S:.0f})", during <= baseline + LIMIT_CALL_SLOWER_S))
        figures.append(await self._big_first_frames(connect_kw, n=min(5, cap)))  # at once, all within the cap
        return figures

    async def _big_first_frames(self, connect_kw: dict, n: int = 5) -> Figure:
        import websockets

        async def one() -> tuple[int | None, float]:
            t = time.monotonic()
            try:
                async with websockets.connect(self.bot.ws_url, open_timeout=10, max_size=None, **connect_kw) as ws:
                    await ws.send(json.dumps({"event": "connected", "junk": "x" * BIG_FRAME_BYTES}))
                    await asyncio.wait_for(ws.recv(), self.config.server.start_timeout_secs + 10)
            except websockets.ConnectionClosed as e:
                return (e.rcvd.code if e.rcvd else None), time.monotonic() - t
            except (OSError, TimeoutError, websockets.InvalidHandshake):
                return None, time.monotonic() - t
            return None, time.monotonic() - t

        results = await asyncio.gather(*(one() for _ in range(n)))
        at_once = sum(code == 1008 and secs < 3.0 for code, secs in results)
        return Figure("pre-start sockets", "~1 MiB first frames closed at once (1008, < 3 s)", f"{at_once} / {n}",
                      "all", at_once == n)

    async def qa_flood(self, n: int) -> list[Figure]:
        import httpx

        sc = self.config.server
        attack = "QA offer flood"
        if not sc.qa_page:
            return [Figure(attack, "offers answered (server.qa_page is off)", None, "-", None)]
        from bot.line.callgate import CallGate

        qa_limit = CallGate.qa_limit(sc.max_calls, sc.qa_max_calls)
        sdp = await qa_offer_sdp()
        before = (await self.healthz())["active_calls"]
        # The page's header, and the scripts' one (all a server from before issue 35 reads).
        headers = {"Authorization": f"Bearer {QA_TOKEN}", "X-QA-Token": QA_TOKEN}
        t0 = time.monotonic()
        async with httpx.AsyncClient(base_url=self.bot.base_url, timeout=30) as client:
            codes = await asyncio.gather(*(client.post("/api/offer", headers=headers, json={
                "sdp": sdp, "type": "offer", "pc_id": f"bogus-{i}"}) for i in range(n)))
        answered = sum(r.status_code == 200 for r in codes)
        active = (await self.healthz())["active_calls"] - before
        phone, call = await self.dial()
        if call is not None:
            async with call:
                await call.wait_for_media(timeout=30)
        freed_after = None
        deadline = time.monotonic() + sc.qa_connect_timeout_secs + 60
        while time.monotonic() < deadline:
            if (await self.healthz())["active_calls"] <= before:
                freed_after = time.monotonic() - t0
                break
            await asyncio.sleep(0.2)
        others = sorted({r.status_code for r in codes} - {200, 503})
        return [
            Figure(attack, f"offers answered (of {n} with invented pc_ids)", answered,
                   f"<= {qa_limit} (QA cap; server.max_calls {sc.max_calls})", answered <= qa_limit and not others),
            Figure(attack, "calls active after the flood", active, f"<= {qa_limit}", active <= qa_limit),
            Figure(attack, "a citizen's webhook during the flood", phone, "stream", phone == "stream"),
            Figure(attack, "slots freed after (s)", None if freed_after is None else round(freed_after, 1),
                   f"<= {sc.qa_connect_timeout_secs + LIMIT_QA_FREED_EXTRA_S:.0f} (qa_connect_timeout_secs + "
                   f"{LIMIT_QA_FREED_EXTRA_S:.0f})",
                   None if freed_after is None else freed_after <= sc.qa_connect_timeout_secs + LIMIT_QA_FREED_EXTRA_S),
        ]

    async def malformed_starts(self, n: int) -> list[Figure]:
        import websockets

        attack = "malformed starts"
        kinds = list(MALFORMED_STARTS)
        log_from = len(self.bot.log())
        at_once = asyncio.Semaphore(max(1, min(8, self.config.server.media_prestart_per_client - 1)))

        async def one(i: int) -> int | None:
            async with at_once:
                try:
                    async with websockets.connect(self.bot.ws_url, open_timeout=10, max_size=None) as ws:
                        for message in malformed_start_messages(kinds[i % len(kinds)]):
                            await ws.send(message)
                        await asyncio.wait_for(ws.recv(), self.config.server.start_timeout_secs + 10)
                except websockets.ConnectionClosed as e:
                    return e.rcvd.code if e.rcvd else None
                except (OSError, TimeoutError, websockets.InvalidHandshake):
                    return None
                return None

        codes = await asyncio.gather(*(one(i) for i in range(n)))
        await asyncio.sleep(0.5)  # the last lines reach the log file
        log = self.bot.log()[log_from:]
        tracebacks = log.count("Traceback")
        refused_lines = sum("media stream refused" in line for line in log.splitlines())
        digits = re.sub(r"\D", "", PLANTED_NUMBER)
        leaked = sum(PLANTED_NUMBER in line or digits in re.sub(r"\D", "", line) for line in log.splitlines())
        closed = sum(code == 1008 for code in codes)
        return [
            Figure(attack, f"closed with 1008 (of {n}, {len(kinds)} shapes)", closed, f"{n}", closed == n),
            Figure(attack, "tracebacks in the server's log", tracebacks, "0", tracebacks == 0),
            Figure(attack, "log lines per malformed start", round(refused_lines / n, 2) if n else None, "1",
                   refused_lines == n),
            Figure(attack, "log lines with the planted phone number in full", leaked, "0", leaked == 0),
        ]

    async def login_burst(self, n: int, rss_growth_mb: float) -> list[Figure]:
        import httpx

        attack = "login burst"
        if not self.desk_on:
            return [Figure(attack, "wrong passwords checked beyond the limit (desk.enabled is off)", None, "0", None)]
        attempts = self.config.desk.login_attempts
        clients = [httpx.AsyncClient(base_url=self.bot.base_url, timeout=120) for _ in range(n)]
        try:
            tokens = []
            for client in clients:  # each attacker has the login form's CSRF token and cookie
                page = await client.get("/desk/login")
                found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
                if page.status_code != 200 or not found:
                    return [Figure(attack, f"wrong passwords checked beyond the limit (login page {page.status_code})",
                                   None, "0", None)]
                tokens.append(found.group(1))
            with _RssSampler(self.bot.proc.pid) as rss:
                answers = await asyncio.gather(*(client.post("/desk/login", data={
                    "username": STAFF_NAME, "password": f"wrong-password-{i}", "csrf_token": token})
                    for i, (client, token) in enumerate(zip(clients, tokens))))
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))
        checked = sum(a.status_code == 401 for a in answers)
        too_many = sum(a.status_code == 429 for a in answers)
        other = sorted({a.status_code for a in answers} - {401, 429})
        growth = None if rss.peak is None or rss.before is None else rss.peak - rss.before
        return [
            Figure(attack, f"wrong passwords checked beyond the limit ({n} at once, desk.login_attempts {attempts})",
                   max(0, checked - attempts), "0", checked <= attempts and not other),
            Figure(attack, "429 answers", too_many, f">= {n - attempts}", too_many >= n - attempts),
            Figure(attack, f"server peak RSS (MB; {rss.before or 0:.0f} before)",
                   None if rss.peak is None else round(rss.peak, 1), f"growth <= {rss_growth_mb:.0f}",
                   None if growth is None else growth <= rss_growth_mb),
        ]


# --------------------------------------------------------------------------------- command


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logins", type=int, default=30, help="wrong passwords at once for one desk account (30)")
    p.add_argument("--sockets", type=int, default=50, help="media sockets that never send start, one address (50)")
    p.add_argument("--offers", type=int, default=10, help="QA offers with invented pc_ids (10)")
    p.add_argument("--starts", type=int, default=200, help="media sockets with a malformed start (200)")
    p.add_argument("--rss-growth-mb", type=float, default=512.0,
                   help="limit: the server's memory growth during the login burst (MB, default 512)")
    p.add_argument("--work", default=None, help="keep the server's log and records here (default: a temporary dir)")


def run_abuse(config: Config, args) -> int:
    """``run_bot.py abuse``: attack a real server, print the figures; 1 when one is over its limit or unmeasured."""
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "config": args.config or "config.toml",
            "overrides": " ".join(args.overrides) or "-",
            "limits from the config": (f"server.max_calls {config.server.max_calls}, qa_max_calls "
                                       f"{config.server.qa_max_calls}, media_prestart_per_client "
                                       f"{config.server.media_prestart_per_client}, start_timeout_secs "
                                       f"{config.server.start_timeout_secs}, desk.login_attempts "
                                       f"{config.desk.login_attempts}")}
    t0 = time.monotonic()
    try:
        with AbuseLab(config, args.config, args.overrides, work_dir=Path(args.work) if args.work else None,
                      verbose=args.verbose) as lab:
            figures = asyncio.run(lab.run(logins=args.logins, sockets=args.sockets, offers=args.offers,
                                          starts=args.starts, rss_growth_mb=args.rss_growth_mb))
    except (RuntimeError, TimeoutError) as e:  # the server did not start
        print(f"abuse: the server could not be started: {e}")
        return 1
    meta["wall time"] = f"{time.monotonic() - t0:.0f} s"
    print(render(figures, meta))
    return 0 if figures and all(f.ok for f in figures) else 1


__all__ = ["MALFORMED_STARTS", "AbuseLab", "Figure", "malformed_start_messages", "qa_offer_sdp", "render",
           "run_abuse"]
