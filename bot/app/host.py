"""The one life of a call, for every way a call comes in: ``CallHost.run(entry)``.

As Pipecat's runner has one bot function for every transport and a small arguments dataclass per
transport, a call here is one ``run`` and its entry says where it came from: a phone stream
(``bot.app.phone.PhoneStream``), a phone stream resumed after its action URL (``ResumedStream``,
issue 46) or the QA page's browser (``bot.app.browser.BrowserCall``). The routes only admit.

``run`` builds the call through ``ctx.call_builder``, registers it in this worker's ``CallRegistry``
(``bot/line/calls.py``: the limits, the QA cap and the drain read it), greets once the caller is
connected, cancels when they leave, runs the pipeline and finishes the call's records. The entry
brings only its wire (transport, request fields, opening words, hand-over) and what it closes after.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import TYPE_CHECKING, Protocol

from loguru import logger
from pipecat.frames.frames import EndFrame, TTSSpeakFrame
from pipecat.transports.base_transport import BaseTransport
from pipecat.workers.runner import WorkerRunner

from bot.call.request import CallRequest
from bot.call.session import CallSession
from bot.line.calls import CallKind
from bot.privacy import mask

if TYPE_CHECKING:
    from bot.app.context import AppContext


class Entry(Protocol):
    """How one call came in: its arguments, and the few steps of its life that depend on its wire."""

    @property
    def kind(self) -> CallKind: ...

    @property
    def caller(self) -> str | None:
        """The caller's number (a phone call's, when the line knows it)."""
        ...

    def closed(self) -> str | None:
        """The caller's side closed (logged): the call's end reason (None: "hangup")."""
        ...

    @property
    def connect_timeout_secs(self) -> float | None:
        """The caller must connect within this (None: connected already)."""
        ...

    @property
    def call_id(self) -> str: ...

    @property
    def hold(self) -> str | None:
        """The reservation the call takes over when it starts (its slot)."""
        ...

    def transport(self, ctx: AppContext, call: HostedCall) -> BaseTransport: ...

    def request(self, ctx: AppContext, transport: BaseTransport) -> CallRequest: ...

    async def started(self, ctx: AppContext, call: HostedCall) -> None:
        """The call is built and registered; before the caller hears anything."""
        ...

    async def greet(self, ctx: AppContext, call: HostedCall) -> None:
        """The caller is connected: the first words."""
        ...

    async def hand_over(self, ctx: AppContext, call: HostedCall) -> bool:
        """A drain hands the call to another worker; False: it has nowhere to go."""
        ...

    async def finished(self, ctx: AppContext, call: HostedCall) -> None:
        """The pipeline ended (or never ran): close the wire, the entry's own records."""
        ...


class HostedCall:
    """One call in progress here, as the registry and the drain see it (``bot.line.calls.LiveCall``)."""

    def __init__(self, ctx: AppContext, entry: Entry) -> None:
        self.ctx, self.entry = ctx, entry
        self.session: CallSession | None = None  # once built
        self.connected = asyncio.Event()

    @property
    def call_id(self) -> str:
        return self.entry.call_id

    @property
    def kind(self) -> CallKind:
        return self.entry.kind

    @property
    def built(self) -> CallSession:
        if self.session is None:
            raise RuntimeError(f"call {mask(self.call_id)}: not built")
        return self.session

    async def cancel(self) -> None:
        await self.built.worker.cancel()

    async def goodbye(self, sentence: str) -> None:
        session = self.built
        session.end_reason = session.end_reason or "server_shutdown"
        await session.worker.queue_frames([TTSSpeakFrame(sentence), EndFrame(reason="server shutdown")])

    async def hand_over(self) -> bool:
        return await self.entry.hand_over(self.ctx, self)


class CallHost:
    """Runs this worker's calls, one ``run`` each; ``spawn`` runs one in the background (a QA call)."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.running: set[asyncio.Task] = set()

    def spawn(self, entry: Entry) -> None:
        task = asyncio.create_task(self.run(entry))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def run(self, entry: Entry) -> None:
        """Build, register, greet once connected, cancel on disconnect, run; count the call out and record it."""
        ctx, call = self.ctx, HostedCall(self.ctx, entry)
        try:
            transport = entry.transport(ctx, call)
            call.session = session = ctx.call_builder(entry.request(ctx, transport))
        except Exception as e:
            logger.exception("call {}: not built: {}", mask(entry.call_id), e)
            ctx.calls.release(entry.hold)
            await entry.finished(ctx, call)
            return
        ctx.calls.start(call, hold=entry.hold)
        ctx.metrics.call_started()
        session.recorder.on_greeting = ctx.metrics.greeting_sent  # observed when it plays, not at the call's end
        ctx.records.call_started(entry.call_id, caller=entry.caller, qa=entry.kind is CallKind.QA)
        deadline = None
        try:
            await entry.started(ctx, call)

            @transport.event_handler("on_client_connected")
            async def _connected(_t, _client):
                call.connected.set()
                await entry.greet(ctx, call)

            @transport.event_handler("on_client_disconnected")
            async def _disconnected(_t, _client):
                session.end_reason = session.end_reason or entry.closed()
                await session.worker.cancel()

            if entry.connect_timeout_secs is not None:
                deadline = asyncio.create_task(self._connect_deadline(call, entry.connect_timeout_secs))
            logger.info("call {}: pipeline starting ({}; {} here)", mask(entry.call_id), entry.kind, len(ctx.calls))
            runner = WorkerRunner(handle_sigint=False)
            await runner.add_workers(session.worker)
            await runner.run()
        except Exception as e:
            logger.exception("call {} failed: {}", mask(entry.call_id), e)
        finally:
            if deadline is not None:
                deadline.cancel()
            ctx.calls.end(entry.call_id)
            await entry.finished(ctx, call)
            ctx.finish_call(session)

    async def _connect_deadline(self, call: HostedCall, timeout: float) -> None:
        # Pipecat waits about 60 s for a peer that never connects; the slot is freed sooner.
        await asyncio.sleep(timeout)
        if not call.connected.is_set():
            logger.warning("call {}: the caller did not connect within {:.0f} s; ending it", mask(call.call_id),
                           timeout)
            call.built.end_reason = "qa_not_connected" if call.kind is CallKind.QA else "not_connected"
            await call.cancel()

    async def close(self) -> None:
        """Server shutdown: end the background calls so their records are written."""
        for call in [c for c in self.ctx.calls.active.values() if c.kind is CallKind.QA]:
            with suppress(Exception):
                await call.cancel()
        if self.running:
            await asyncio.wait(list(self.running), timeout=10)
