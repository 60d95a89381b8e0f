"""WebRTC QA page, the wire: the page and its headers, the QA token, the offer, the browser's transport.

QA staff talk in a browser to exactly the bot that answers the phone. The routes that admit a QA
call are ``bot/app/routes/qa.py``; the call itself runs in ``bot.app.host.CallHost`` like a phone
call, its live view is ``bot/call/qa_live.py``. Here only what the browser speaks:

* ``GET /``: the QA page (``bot/transports/static/qa.html``, ``qa.js``, ``qa.css``; no CDN assets), with
  the staff desk's security headers (CSP, X-Frame-Options, Referrer-Policy, ...). It holds no token:
  the tester types the QA token into the page, which sends it as ``Authorization: Bearer``.
* ``POST /api/offer`` and ``PATCH /api/offer`` (trickle ICE): Pipecat's SmallWebRTC signalling,
  parsed and checked here (``offer_request``, ``patch_request``).

The browser sends 48 kHz Opus, which the transport resamples to 16 kHz (Whisper and Silero need
16 kHz); the bot speaks at 24 kHz, Pipecat's default output rate: full-band for speech, half the
bytes of 48 kHz through the pipeline, and aiortc's Opus encoder resamples to 48 kHz whatever we
give it. (The phone path speaks at 8 kHz because Twilio is 8 kHz mu-law; a QA caller hears the
wideband voice.)
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from pipecat.audio.filters.base_audio_filter import BaseAudioFilter
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import IceCandidate, SmallWebRTCPatchRequest, SmallWebRTCRequest
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport
from starlette.types import Scope

from bot.desk.headers import CSP as DESK_CSP

STATIC_DIR = Path(__file__).resolve().parent / "static"
QA_IN_RATE = 16000  # Whisper and Silero
QA_OUT_RATE = 24000  # see the module docstring
# The staff desk's security headers (bot/desk/headers.py), with what the page needs on top: its script,
# its signalling requests and the microphone (the desk forbids all three).
QA_CSP = f"{DESK_CSP}; script-src 'self'; connect-src 'self'; media-src 'self' blob: mediastream:"
QA_HEADERS = {
    "Content-Security-Policy": QA_CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(self), geolocation=()",
    "Cache-Control": "no-store",
}


class SecureStaticFiles(StaticFiles):
    """The page's assets, with the page's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(QA_HEADERS)
        return response


def qa_token_ok(request: Request, want: str | None) -> bool:
    """True without a QA token configured, else when the request carries it in a header:
    ``Authorization: Bearer TOKEN`` (the page) or ``X-QA-Token: TOKEN`` (scripts). Never in the URL."""
    if not want:
        return True
    auth = request.headers.get("Authorization", "")
    got = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("X-QA-Token", "")
    return hmac.compare_digest(got.encode(), want.encode())


def browser_transport(connection: SmallWebRTCConnection, audio_in_filter: BaseAudioFilter | None) -> SmallWebRTCTransport:
    """The browser call's transport: audio both ways over the peer connection."""
    return SmallWebRTCTransport(connection, TransportParams(audio_in_enabled=True, audio_out_enabled=True,
                                                            audio_in_filter=audio_in_filter))


async def json_object(request: Request) -> dict[str, Any]:
    """The request's JSON body, which must be an object (HTTP 400 otherwise)."""
    try:
        body = await request.json()
    except ValueError as e:
        raise HTTPException(status_code=400, detail="body is not JSON") from e
    if not isinstance(body, dict):
        raise HTTPException(status_code=400, detail="body is not a JSON object")
    return body


def offer_request(body: dict[str, Any]) -> SmallWebRTCRequest:
    """The offer in ``body``, checked: HTTP 400 for anything but an audio SDP offer Pipecat can take."""
    try:
        webrtc_request = SmallWebRTCRequest.from_dict(
            {k: body.get(k) for k in ("sdp", "type", "pc_id", "restart_pc")}
            | {"request_data": body.get("request_data", body.get("requestData"))}
        )
    except TypeError as e:
        raise HTTPException(status_code=400, detail=f"bad offer: {e}") from e
    if not isinstance(webrtc_request.sdp, str) or not webrtc_request.sdp or webrtc_request.type != "offer":
        raise HTTPException(status_code=400, detail="an SDP offer is required")
    if "m=audio" not in webrtc_request.sdp:
        raise HTTPException(status_code=400, detail="the offer has no audio (the page sends its microphone)")
    if webrtc_request.pc_id is not None and not isinstance(webrtc_request.pc_id, str):
        raise HTTPException(status_code=400, detail="pc_id must be a string")
    if webrtc_request.restart_pc:  # Pipecat would end the call and keep a peer without one: call again
        raise HTTPException(status_code=400, detail="restart_pc is not supported: hang up and call again")
    return webrtc_request


def patch_request(body: dict[str, Any]) -> SmallWebRTCPatchRequest:
    """Trickle ICE candidates for a peer (HTTP 400 when malformed)."""
    try:
        return SmallWebRTCPatchRequest(
            pc_id=str(body["pc_id"]),
            candidates=[IceCandidate(**c) for c in body.get("candidates") or []],
        )
    except (KeyError, TypeError) as e:
        raise HTTPException(status_code=400, detail=f"bad ICE candidate patch: {e}") from e
