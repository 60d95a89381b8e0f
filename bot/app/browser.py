"""The QA page's call as an entry of ``CallHost.run``: the browser's peer connection.

Built through ``ctx.call_builder`` like a phone call (``qa=True``: RTVI on, turn records marked QA),
at the browser's rates, with the page's live view (``bot/call/qa_live.py``) among its observers.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from loguru import logger
from pipecat.transports.base_transport import BaseTransport
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection

from bot.app.host import HostedCall
from bot.call.noise_filter import make_audio_in_filter
from bot.call.openings import speak_greeting
from bot.call.qa_live import QALiveObserver
from bot.call.request import CallRequest
from bot.line.calls import CallKind
from bot.transports.webrtc import QA_IN_RATE, QA_OUT_RATE, browser_transport

if TYPE_CHECKING:
    from bot.app.context import AppContext


def browser_call_id(pc_id: str) -> str:
    """A QA call's id: its kind and its peer connection's id (the page shows it; records keep it)."""
    return f"{CallKind.QA}-{pc_id}"


@dataclass(eq=False, kw_only=True)
class BrowserCall:
    """A QA page's offer, answered (``bot.app.routes.qa``): the call on its peer connection."""

    kind: ClassVar[CallKind] = CallKind.QA
    caller: ClassVar[str | None] = None

    connection: SmallWebRTCConnection
    connect_timeout_secs: float | None  # ``server.qa_connect_timeout_secs``
    live: QALiveObserver = field(default_factory=QALiveObserver, init=False)

    @property
    def call_id(self) -> str:
        return browser_call_id(self.connection.pc_id)

    @property
    def hold(self) -> str:
        return self.call_id  # the offer's slot, reserved under the call's id (``bot.app.routes.qa``)

    def closed(self) -> str | None:
        # The page's 끊기 button closes the peer connection; aiortc sees it within ~0.1 s: a plain hang-up.
        logger.info("QA call {}: browser disconnected", self.call_id)
        return None

    def transport(self, ctx: AppContext, call: HostedCall) -> BaseTransport:
        config = ctx.config
        return browser_transport(self.connection, audio_in_filter=make_audio_in_filter(config))

    def request(self, ctx: AppContext, transport: BaseTransport) -> CallRequest:
        return CallRequest(config=ctx.config, secrets=ctx.secrets, models=ctx.models, transport=transport,
                           call_id=self.call_id, in_rate=QA_IN_RATE, out_rate=QA_OUT_RATE, qa=True,
                           observers=(self.live,), records=ctx.records)

    async def started(self, ctx: AppContext, call: HostedCall) -> None:
        self.live.attach(call.built)

    async def greet(self, ctx: AppContext, call: HostedCall) -> None:
        logger.info("QA call {}: browser connected", self.call_id)
        await self.live.send({"qa": "call", "call_id": self.call_id})
        await speak_greeting(call.built, ctx.config.call.greeting, ctx.config.call.recording_notice)

    async def hand_over(self, ctx: AppContext, call: HostedCall) -> bool:
        return False  # a browser has no action URL to resume it elsewhere: it hears the goodbye

    async def finished(self, ctx: AppContext, call: HostedCall) -> None:
        with suppress(Exception):
            await self.connection.disconnect()
