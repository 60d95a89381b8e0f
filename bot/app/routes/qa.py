"""The QA page's routes: ``GET /``, ``POST /api/offer``, ``PATCH /api/offer`` (trickle ICE); they only admit.

With ``secrets.qa_access_token`` set (env ``QA_ACCESS_TOKEN``), signalling needs it in a header
(``qa_token_ok``): the page sits on the same public host as the Twilio webhook, and a QA call
takes a call slot on the GPU. The page itself is served without it; the tester types it in.

Capacity (the phone line's ``CallGate`` and this worker's ``CallRegistry``): an offer that would
start a call (no ``pc_id``, or one that is not a QA call in progress here) takes a slot before any
await, as a reservation of kind QA the phone webhook counts too; the call then holds it until it
ends. QA calls are capped by ``server.qa_max_calls`` (always below ``server.max_calls``); with a
line limit (``server.line_max_calls``) the line's count is checked as well. A call whose browser has
not connected within ``server.qa_connect_timeout_secs`` is ended, and its slot freed. Each admitted
offer runs one ``BrowserCall`` through ``CallHost.run``, like a phone call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from loguru import logger
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import SmallWebRTCRequest, SmallWebRTCRequestHandler

from bot.app.browser import BrowserCall, browser_call_id
from bot.app.context import AppContext
from bot.app.host import CallHost
from bot.line.calls import CallKind
from bot.transports.webrtc import (
    QA_HEADERS,
    STATIC_DIR,
    SecureStaticFiles,
    json_object,
    offer_request,
    patch_request,
    qa_token_ok,
)


@dataclass
class _Offer:
    """One offer's slot as it passes from the route to ``QAAdmission.start_call`` (the handler's callback)."""

    hold: str | None = None  # the slot reserved for it; None once a call took it over
    refused: str | None = None  # why the call could not start after all
    connection: SmallWebRTCConnection | None = None  # the refused call's peer, to close


class QAAdmission:
    """Who may start a QA call: the token, the QA cap, the line; then the call runs in the host."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx, self.host = ctx, CallHost(ctx)
        # Host candidates only (no STUN/TURN): the QA browser must reach the server's address directly.
        self.handler = SmallWebRTCRequestHandler()
        sc = ctx.config.server
        self.qa_limit = ctx.gate.qa_limit(sc.max_calls, sc.qa_max_calls)
        if self.qa_limit < sc.qa_max_calls:
            logger.warning("QA page: {} call(s) at once, not server.qa_max_calls {}: QA always leaves one of "
                           "server.max_calls {} to the phone line", self.qa_limit, sc.qa_max_calls, sc.max_calls)

    def check_token(self, request: Request) -> None:
        if not qa_token_ok(request, self.ctx.secrets.qa_access_token):
            raise HTTPException(status_code=401, detail="QA token required (Authorization: Bearer)",
                                headers={"WWW-Authenticate": 'Bearer realm="qa"'})

    def busy(self, why: str) -> JSONResponse:
        sc, gate, calls = self.ctx.config.server, self.ctx.gate, self.ctx.calls
        gate.refuse(f"qa:{why.split(' ')[0]}")
        logger.warning("QA call rejected: {} ({} calls active or reserved here, {} of them QA; server.max_calls {}, "
                       "QA limit {})", why, len(calls), gate.qa_calls(), sc.max_calls, self.qa_limit)
        return JSONResponse({"error": "busy", "reason": why.split(" ")[0], "active_calls": len(calls.active)},
                            status_code=503)

    def reserve(self) -> tuple[str | None, str | None]:
        """``(hold, None)``, or ``(None, why busy)``: a QA slot, taken before any await."""
        sc = self.ctx.config.server
        return self.ctx.gate.reserve_qa(sc.qa_max_calls, sc.qa_connect_timeout_secs)

    async def answer(self, webrtc_request: SmallWebRTCRequest) -> dict[str, str] | JSONResponse | None:
        """The SDP answer, or a 503 busy response when the offer would start a call there is no slot for."""
        # A renegotiation of a QA call in progress keeps that call's slot; anything else (no pc_id, or
        # an unknown one, which Pipecat answers with a new connection) is a new call and takes one now.
        offer, gate, line = _Offer(), self.ctx.gate, self.ctx.line
        pc_id = webrtc_request.pc_id
        if pc_id is None or browser_call_id(pc_id) not in self.ctx.calls:
            offer.hold, why = self.reserve()
            if why is None and line is not None:
                why = await line.full()
                if why:
                    gate.release(offer.hold)
            if why:
                return self.busy(why)

        async def new_connection(connection: SmallWebRTCConnection) -> None:
            self.start_call(connection, offer)

        try:
            answer = await self.handler.handle_web_request(webrtc_request, new_connection)
        except HTTPException:
            raise
        except Exception as e:  # aiortc rejects a malformed SDP with ValueError and friends
            raise HTTPException(status_code=400, detail=f"offer refused: {type(e).__name__}") from e
        finally:
            gate.release(offer.hold)  # start_call took it over, or the offer failed
        if offer.refused:
            with suppress(Exception):
                if offer.connection is not None:
                    await offer.connection.disconnect()
            return self.busy(offer.refused)
        return answer

    def start_call(self, connection: SmallWebRTCConnection, offer: _Offer) -> None:
        """Called by the handler for a new connection, before it answers the offer.

        No await before the slot is the call's, so concurrent offers see it. The call runs in the background.
        """
        hold, offer.hold = offer.hold, None
        if hold is None:  # its pc_id looked like a call in progress, which ended meanwhile: a new call after all
            hold, why = self.reserve()
            if hold is None:  # no slot: ``why`` says why
                offer.refused, offer.connection = why or "busy", connection
                return
        timeout = self.ctx.config.server.qa_connect_timeout_secs
        entry = BrowserCall(connection=connection, connect_timeout_secs=timeout)
        self.ctx.calls.release(hold)  # the slot passes to the call's own id, which the call takes over
        self.ctx.calls.reserve(entry.call_id, CallKind.QA, timeout)
        self.host.spawn(entry)

    @asynccontextmanager
    async def lifespan(self, _app: FastAPI) -> AsyncIterator[None]:
        yield
        # Server shutdown: end the QA calls so their records are written, then close the peers.
        await self.host.close()
        await self.handler.close()


def router(qa: QAAdmission) -> APIRouter:
    """The page and its signalling."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def qa_page(request: Request) -> Response:
        if "token" in request.query_params:  # an old bookmark: take the token out of the address bar
            return RedirectResponse("/", status_code=303, headers=QA_HEADERS)
        return FileResponse(STATIC_DIR / "qa.html", media_type="text/html", headers=QA_HEADERS)

    @router.post("/api/offer", response_model=None)  # an SDP answer, or a busy JSONResponse
    async def offer(request: Request) -> dict[str, str] | JSONResponse | None:
        qa.check_token(request)
        return await qa.answer(offer_request(await json_object(request)))

    @router.patch("/api/offer", response_model=None)
    async def ice_candidate(request: Request) -> dict[str, str]:
        qa.check_token(request)
        await qa.handler.handle_patch_request(patch_request(await json_object(request)))
        return {"status": "success"}

    return router


def mount_qa(app: FastAPI, ctx: AppContext) -> None:
    """Add the QA page, its assets and its signalling to ``app``; its calls end with the app's lifespan."""
    qa = QAAdmission(ctx)
    app.mount("/qa/static", SecureStaticFiles(directory=STATIC_DIR), name="qa_static")
    app.include_router(router(qa))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def combined(a: FastAPI) -> AsyncIterator[None]:  # inside the app's lifespan, as Pipecat's runner does
        async with outer(a), qa.lifespan(a):
            yield

    app.router.lifespan_context = combined
