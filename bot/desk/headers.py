"""The desk's security headers on every answer under /desk: an ASGI middleware, not a route's wrapper.

A route's wrapper never sees the answers made outside it: the router's 405 (HEAD on a GET route) and 404
(no such page), Starlette's 400 and 416 for a range a ``FileResponse`` cannot serve, a 500. This sets the
headers on the answer's start message, whoever made it.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; media-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


class DeskHeaders:
    """Every answer under ``prefix``: the security headers, ``Cache-Control: no-store`` (but the stylesheet's
    own, under ``prefix/static/``), HSTS when the desk's cookies are secure-only."""

    def __init__(self, app: ASGIApp, *, prefix: str, hsts: bool) -> None:
        self.app = app
        self.prefix = prefix
        self.headers = {**SECURITY_HEADERS, **({"Strict-Transport-Security": "max-age=31536000"} if hsts else {})}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            await self.app(scope, receive, send)
            return
        static = path.startswith(self.prefix + "/static/")
        started = False

        async def send_secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in self.headers.items():
                    headers[name] = value
                if not static or "cache-control" not in headers:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        try:
            await self.app(scope, receive, send_secured)
        except Exception:
            # Starlette's error middleware (outside this one) would answer 500 without the headers: answer it
            # here, and let the error go on to be logged.
            if not started:
                await send_secured({"type": "http.response.start", "status": 500,
                                    "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await send_secured({"type": "http.response.body", "body": b"Internal Server Error"})
            raise
