"""What every route of the app shares: the records, the line, the call gate, tokens, metrics, the senders.

``AppContext.build`` makes it once per app (``bot.app.server.create_app``); each router of
``bot.app.routes`` gets it. It also finishes a call's records (``finish_call``, from
``bot.app.host.CallHost``) and drains the process on SIGTERM (``drain``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from bot import DATA_DIR
from bot.aftercall.callbacks import CallbackPlacer
from bot.aftercall.notify import Outbox
from bot.aftercall.sms_sender import sms_sender
from bot.aftercall.twilio_api import TwilioAPI
from bot.call.models import SharedModels
from bot.call.request import CallRequest
from bot.call.session import CallSession
from bot.config import Config, Secrets
from bot.dialog.state import CannedReplies
from bot.line.admission import Line
from bot.line.callgate import CallGate, PrestartSockets
from bot.line.calls import CallKind, CallRegistry, LiveCall
from bot.line.tokens import IssuedToken, StreamTokens
from bot.ops.hatches import escape_hatches
from bot.ops.readiness import LLMProbe
from bot.privacy import mask
from bot.stages.supertonic import PROVIDER_NAMES
from bot.store.calls import CallLog
from bot.telemetry.latency import call_report
from bot.telemetry.looplag import LoopLagMonitor
from bot.telemetry.metrics import ProcessMetrics
from bot.telemetry.tracing import trace_call
from bot.transports.busy import BusyAudio

# After a drain's hand-overs: how long this worker keeps answering (Twilio requests each stream's action
# within a few hundred ms of its close; a proxy may route it here).
HANDOVER_LINGER_SECS = 3.0


@dataclass
class AppContext:
    """The app's shared state. ``call_builder`` builds each call's pipeline from a ``CallRequest``."""

    config: Config
    secrets: Secrets
    models: SharedModels
    call_builder: Callable[[CallRequest], CallSession]
    records: CallLog
    twilio_api: TwilioAPI | None  # every REST request: hang-ups, transfers, SMS
    outbox: Outbox | None
    placer: CallbackPlacer | None
    lag: LoopLagMonitor
    tokens: StreamTokens
    calls: CallRegistry
    metrics: ProcessMetrics
    self_timing: Any  # serve times each start (bot/ops/selftime.py); None in tests
    gate: CallGate
    line: Line
    canned: CannedReplies
    busy_audio: BusyAudio
    llm_probe: LLMProbe
    hatches: list[str]
    prestart: PrestartSockets
    background: set[asyncio.Task] = field(default_factory=set)

    @classmethod
    def build(cls, config: Config, secrets: Secrets, models: SharedModels,
              call_builder: Callable[[CallRequest], CallSession],
              records: CallLog | None) -> AppContext:
        """Open the records (unless given) and build every shared part, in the order their logs read best."""
        lag = LoopLagMonitor()
        records = records or CallLog.open(config, secrets)
        twilio_api = TwilioAPI.from_config(config, secrets)
        outbox, placer = _after_call_senders(config, secrets, records, twilio_api)
        tokens = StreamTokens(config.server.token_ttl_secs)  # signed: any worker of the line checks them
        calls = CallRegistry(config.server.token_ttl_secs)
        metrics = ProcessMetrics(config.latency)
        self_timing = getattr(models, "self_timing", None)
        if self_timing is not None:
            self_timing.export(metrics.registry)
        gate = CallGate(calls, max_calls=config.server.max_calls, token_ttl_secs=config.server.token_ttl_secs,
                        registry=metrics.registry)
        # Shared with the other workers through the records database: token single use, the caller's
        # number, the line-wide call limit, worker leases (bot/line/admission.py).
        line = Line(records.store, worker=records.worker, line_max_calls=config.server.line_max_calls,
                    lease_secs=config.server.worker_lease_secs, records_enabled=config.records.enabled,
                    is_draining=lambda: gate.draining)
        canned = CannedReplies.load(DATA_DIR / "replies.toml")
        busy_audio = BusyAudio(models, config.tts.voice, canned.busy)
        llm_probe = LLMProbe(config, secrets)
        hatches = escape_hatches(config, tts_engine=models.tts, whisper_engine=models.whisper, secrets=secrets)
        metrics.set_escape_hatches(hatches)
        metrics.set_onnx_providers(getattr(models.tts, "session_providers", {}),
                                   PROVIDER_NAMES.get(config.tts.require_provider, config.tts.require_provider))
        # Sockets before their start: capped per client and in all, a few KiB each, start_timeout_secs.
        prestart = PrestartSockets(per_client=config.server.media_prestart_per_client,
                                   total=config.server.media_prestart_max)
        return cls(config=config, secrets=secrets, models=models, call_builder=call_builder, records=records,
                   twilio_api=twilio_api, outbox=outbox, placer=placer, lag=lag, tokens=tokens, calls=calls,
                   metrics=metrics, self_timing=self_timing, gate=gate, line=line, canned=canned,
                   busy_audio=busy_audio, llm_probe=llm_probe, hatches=hatches, prestart=prestart)

    async def admit(self, call_sid: str, caller: str | None) -> tuple[str | None, IssuedToken | None]:
        """``(None, the issued token)``, or ``(why busy, the token or None)`` with the slot given back.

        With a line limit the stream may reach any worker: the line's count (in the database) admits
        the call and each worker checks its own max_calls when the stream arrives. Without one, this
        worker reserves a slot of its own (one worker, or a proxy that keeps both on one worker).
        """
        gate, line = self.gate, self.line
        busy = ("draining" if gate.draining else None) if line.line_max_calls > 0 else gate.busy_reason()
        if not busy and line.line_max_calls <= 0:
            self.calls.reserve(call_sid)  # before any await: webhooks arriving meanwhile see the slot taken
        issued: IssuedToken | None = None
        if not busy:
            issued = self.tokens.issue(call_sid)
            busy = await line.admit(issued, caller)  # the caller's number waits in the database
        if busy:
            self.calls.release(call_sid)
        return busy, issued

    def finish_call(self, session: CallSession) -> None:
        """Close a call's records, count it, and log its end and latency report (phone and QA page)."""
        rec = session.recorder
        rec.close()
        self.metrics.call_finished(rec.records)
        if session.dialog.transfer_requested:
            reason = "emergency_transfer" if session.dialog.transfer_to else "transfer"
            self.metrics.call_transferred("emergency" if session.dialog.transfer_to else "desk")
        elif session.dialog.ended:
            reason = session.dialog.end_reason or "completed"  # "abusive", "max_minutes": the line ended it
        else:
            reason = session.end_reason or "hangup"
        self.records.call_ended(rec.call_id, reason)
        trace_call(rec, reason)  # its trace, when telemetry.otlp_endpoint is set (queued: no wait here)
        logger.info("call {} ended ({}); latency:\n{}", mask(rec.call_id), reason,
                    call_report(rec.records, self.config.latency, self._report_header()))

    def _report_header(self) -> list[str]:
        lines = [f"TTS providers: {self.models.tts.session_providers}"]
        lines += [f"ESCAPE HATCH: {h}" for h in self.hatches] or ["escape hatches: none"]
        return lines

    def liveness(self) -> tuple[str, int]:
        return ("draining", 503) if self.gate.draining else ("ok", 200)

    async def drain(self) -> None:
        """Refuse new calls, then end the calls in progress (DrainingServer, on SIGTERM): each ``leave``s.

        ``server.drain_handover``: no wait; a phone call is handed over at the next moment the bot is not
        speaking (its stream closed: Twilio asks the <Connect>'s action, which resumes it on another
        worker). Else, or for a call with nowhere to go (the QA page's), the goodbye after ``drain_secs``.
        """
        handover = self.config.server.drain_handover
        handed = self.calls.count(CallKind.PHONE) if handover else 0
        await self.gate.drain(drain_secs=0.0 if handover else self.config.server.drain_secs, goodbye=self.leave)
        if handed:  # Twilio asks each stream's action now: the proxy may bring it here
            logger.info("drain: {} call(s) handed over; answering their actions for {:.0f} s", handed,
                        HANDOVER_LINGER_SECS)
            await asyncio.sleep(HANDOVER_LINGER_SECS)

    async def leave(self, call: LiveCall) -> None:
        """The drain's last word to one call, of any kind: handed over where it can be, else the goodbye."""
        if self.config.server.drain_handover and await call.hand_over():
            return
        await call.goodbye(self.canned.shutdown_goodbye)


def _after_call_senders(config: Config, secrets: Secrets, records: CallLog,
                        twilio_api: TwilioAPI | None) -> tuple[Outbox | None, CallbackPlacer | None]:
    """The SMS outbox and the callback placer, each when configured and its carrier's credentials are set."""
    outbox = None
    sender = sms_sender(config, secrets, twilio_api) if config.sms.enabled else None  # logs what is missing
    if sender is not None and config.records.enabled:
        outbox = Outbox(store=records.store, sender=sender, config=config, worker=records.worker)
        records.on_ticket = outbox.wake
    placer = None
    if config.callbacks.place_every_secs <= 0:
        pass
    elif twilio_api is None:
        logger.error("CALLBACKS NOT PLACED: callbacks.place_every_secs is set but TWILIO_ACCOUNT_SID / "
                     "TWILIO_AUTH_TOKEN are not")
    else:
        try:
            placer = CallbackPlacer(store=records.store, api=twilio_api, config=config)
        except ValueError as e:
            logger.error("CALLBACKS NOT PLACED: {}", e)
    return outbox, placer
