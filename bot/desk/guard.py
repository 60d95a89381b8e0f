"""What every desk screen asks first: who is asking (a session cookie or a bearer token), is the form's CSRF token
right, may this login see that ticket; and how the desk refuses (a page, a JSON error, the login redirect).

Every route but the login page and the stylesheet needs a login: a page without one redirects to the login page,
an API call answers 401. The session cookie is HttpOnly, SameSite=Strict, signed again as it is used (a sliding
idle timeout). The security headers are ``DeskHeaders``' (bot/desk/headers.py), on every answer under /desk.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from loguru import logger

from bot.desk import queries
from bot.desk.auth import Principal, api_token_hash
from bot.desk.context import PREFIX, DeskContext
from bot.store.schema import STAFF_ROLES

SESSION_COOKIE = "desk_session"
RENEW_AFTER_SECS = 60.0  # the sliding idle timeout: a cookie older than this is signed again
RECEPTION_NO = re.compile(r"^\d{4,16}$")
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])

CODES = {"login": 401, "forbidden": 403, "csrf": 403, "not_found": 404, "bad_request": 400, "too_many": 429}
MESSAGES = {"login": "로그인이 필요합니다.", "forbidden": "이 화면을 볼 권한이 없습니다.",
            "csrf": "보안 토큰이 없거나 맞지 않습니다. 화면을 새로 고친 뒤 다시 시도해 주세요.",
            "not_found": "찾는 항목이 없습니다.", "bad_request": "요청이 올바르지 않습니다.",
            "too_many": "시도가 너무 많습니다. 잠시 후 다시 시도해 주세요."}


class Refused(Exception):
    """A request the desk refuses: ``kind`` is login (no session), forbidden, not_found, csrf, bad_request."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(message or kind)
        self.kind = kind
        self.message = message


def address(request: Request) -> str:
    return request.client.host if request.client else "?"


def is_api(request: Request) -> bool:
    return request.url.path.startswith(f"{PREFIX}/api/")


class Desk:
    """The guard and the page every screen shares, over the desk's context (``ctx``)."""

    def __init__(self, ctx: DeskContext) -> None:
        self.ctx = ctx
        self.store, self.routing, self.signer = ctx.store, ctx.routing, ctx.signer
        self.settings = ctx.config.desk

    def router(self) -> APIRouter:
        """A router whose routes answer a ``Refused`` as the desk does and renew the session cookie."""
        desk = self

        class DeskRoute(APIRoute):
            def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
                handler = super().get_route_handler()

                async def run(request: Request) -> Response:
                    try:
                        response = await handler(request)
                    except Refused as e:
                        response = desk.refusal(request, e.kind, e.message)
                    except RequestValidationError:
                        response = desk.refusal(request, "bad_request")
                    except HTTPException as e:
                        kind = {404: "not_found", 403: "forbidden"}.get(e.status_code, "bad_request")
                        response = desk.refusal(request, kind)
                    return desk.renew(response, request)

                return run

        return APIRouter(route_class=DeskRoute)

    def refusal(self, request: Request, kind: str, message: str = "") -> Response:
        code = CODES.get(kind, 400)
        if is_api(request):
            headers = {"WWW-Authenticate": 'Bearer realm="desk"'} if kind == "login" else None
            return JSONResponse({"error": kind, "message": message or MESSAGES.get(kind, "")}, status_code=code,
                                headers=headers)
        if kind == "login":
            response = RedirectResponse(f"{PREFIX}/login", status_code=303)
            response.delete_cookie(SESSION_COOKIE, path=PREFIX)
            return response
        return self.ctx.templates.TemplateResponse(request, "error.html", {
            "who": getattr(request.state, "who", None), "code": code,
            "message": message or MESSAGES.get(kind, "")}, status_code=code)

    def renew(self, response: Response, request: Request) -> Response:
        renewed = getattr(request.state, "renew_session", None)
        if renewed and response.status_code < 400:
            self.set_cookie(response, SESSION_COOKIE, renewed, max_age=int(self.settings.session_hours * 3600))
        return response

    def set_cookie(self, response: Response, name: str, value: str, *, max_age: int) -> None:
        response.set_cookie(name, value, max_age=max_age, path=PREFIX, secure=self.settings.cookie_secure,
                            httponly=True, samesite="strict")

    # --- who is asking ---------------------------------------------------------------------------

    def session_principal(self, request: Request) -> Principal | None:
        dc = self.settings
        data = self.signer.read_session(request.cookies.get(SESSION_COOKIE), idle_secs=dc.idle_minutes * 60,
                                        max_secs=dc.session_hours * 3600)
        if data is None:
            return None
        account = self.store.find_staff(staff_id=int(data["id"]))
        if account is None or not account["active"] or account["session_epoch"] != data.get("epoch"):
            return None  # disabled, logged out or new password since: every such session ends
        if time.time() - data["signed_at"] > RENEW_AFTER_SECS:
            request.state.renew_session = self.signer.session_cookie(account["id"], account["session_epoch"],
                                                                     data["nonce"], data["login"])
        return Principal(account["id"], account["username"], account["role"], account["department"], data["nonce"])

    def token_principal(self, request: Request) -> Principal | None:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None
        account = self.store.find_staff(api_token_hash=api_token_hash(auth[7:].strip()))
        if account is None or not account["active"]:
            logger.warning("desk API: refused a bearer token that is unknown or disabled (from {})", address(request))
            return None
        return Principal(account["id"], account["username"], account["role"], account["department"])

    def login_required(self, request: Request, *, roles: tuple[str, ...] = STAFF_ROLES,
                       api: bool = False) -> Principal:
        who = (self.token_principal(request) if api else None) or self.session_principal(request)
        if who is None:
            raise Refused("login")
        request.state.who = who
        if who.role not in roles:
            logger.warning("desk: {} ({}) refused {} (needs {})", who.username, who.role, request.url.path,
                           "/".join(roles))
            raise Refused("forbidden")
        return who

    def check_csrf(self, who: Principal, token: str) -> None:
        if not who.nonce or not self.signer.csrf_ok(who.nonce, token):
            logger.warning("desk: {} posted without a valid CSRF token", who.username)
            raise Refused("csrf")

    def page(self, request: Request, name: str, who: Principal | None, status_code: int = 200,
             **context: Any) -> Response:
        csrf = self.signer.csrf(who.nonce) if who and who.nonce else ""
        return self.ctx.templates.TemplateResponse(request, name, {"who": who, "csrf": csrf, **context},
                                                   status_code=status_code)

    def visible_ticket(self, who: Principal, reception_no: str) -> dict[str, Any]:
        """The ticket if ``who`` may see it; 404 alike for a missing one and another department's, so that
        ticket numbers cannot be probed."""
        found = queries.find_ticket(self.store, self.routing, reception_no) if RECEPTION_NO.match(reception_no) else None
        if found is not None and not who.sees_department(found["department"]):
            logger.warning("desk: {} (department {}) asked for ticket {} of {}: answered as missing", who.username,
                           who.department, reception_no, found["department"])
            found = None
        if found is None:
            raise Refused("not_found")
        return found


def screen(method: str, path: str) -> Callable[[Endpoint], Endpoint]:
    """Marks a method of ``Screens`` as the endpoint of ``method path`` (under /desk); one may carry several."""

    def mark(endpoint: Endpoint) -> Endpoint:
        endpoint.__dict__.setdefault("desk_routes", []).append((method, path))
        return endpoint

    return mark


class Screens:
    """The screens of one concern: its ``@screen`` methods, as a router of the desk's."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def router(self) -> APIRouter:
        router = self.desk.router()
        for name, endpoint in vars(type(self)).items():
            for method, path in getattr(endpoint, "desk_routes", ()):
                router.add_api_route(path, getattr(self, name), methods=[method])
        return router
