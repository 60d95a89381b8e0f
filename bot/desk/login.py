"""The desk's door: the login page and its post (CSRF token of the form, login limits), logout, the stylesheet,
and /desk itself (to the queue).

The login post is ``async`` so that a login waiting for its delay or a free password check holds no thread;
the password check itself (the database and argon2) runs in the thread pool.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import secrets
import time
from typing import Any

from fastapi import Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from loguru import logger
from starlette.concurrency import run_in_threadpool

from bot.desk.auth import DEVICE_DAYS, hash_password, needs_rehash, verify_password
from bot.desk.context import HERE, PREFIX
from bot.desk.guard import MESSAGES, SESSION_COOKIE, Screens, address, screen

LOGIN_COOKIE = "desk_login"
DEVICE_COOKIE = "desk_device"  # a browser that logged in as an account: its own login budget (docs/desk.md)


class LoginScreens(Screens):
    def login_page(self, request: Request, *, error: str = "", status_code: int = 200, username: str = "") -> Response:
        nonce = secrets.token_urlsafe(18)
        response = self.desk.ctx.templates.TemplateResponse(request, "login.html", {
            "who": None, "csrf": self.desk.signer.csrf(nonce, "login"), "error": error, "username": username},
            status_code=status_code)
        self.desk.set_cookie(response, LOGIN_COOKIE, self.desk.signer.login_cookie(nonce), max_age=3600)
        return response

    @screen("GET", "/login")
    def login_form(self, request: Request) -> Response:
        if self.desk.session_principal(request):
            return RedirectResponse(f"{PREFIX}/tickets", status_code=303)
        return self.login_page(request)

    def authenticate(self, username: str, password: str) -> dict[str, Any] | None:
        """The account when the password is right, its login recorded (blocking: the database and argon2)."""
        store = self.desk.store
        account = store.find_staff(username=username) if username else None
        if account is not None and not account["active"]:
            account = None  # checked against the dummy hash, as a missing one is
        if not verify_password(account["password_hash"] if account else None, password) or account is None:
            return None
        extra: dict[str, Any] = {}
        if needs_rehash(account["password_hash"]):
            extra["password_hash"] = hash_password(password)
        store.update_staff(username, last_login_at=dt.datetime.now(dt.UTC), **extra)
        return account

    def too_many(self, request: Request, username: str, retry_after: float, why: str) -> Response:
        logger.warning("desk: login for {!r} from {} refused: {}", username, address(request), why)
        response = self.login_page(request, error=MESSAGES["too_many"], status_code=429, username=username)
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
        return response

    @screen("POST", "/login")
    async def login(self, request: Request, username: str = Form(""), password: str = Form(""),
                    csrf_token: str = Form("")) -> Response:
        desk, ctx = self.desk, self.desk.ctx
        nonce = desk.signer.read_login(request.cookies.get(LOGIN_COOKIE))
        if not desk.signer.csrf_ok(nonce, csrf_token, "login"):
            logger.warning("desk: login form posted without a valid CSRF token (from {})", address(request))
            return self.login_page(request, error=MESSAGES["csrf"], status_code=403)
        username = username.strip().lower()[:64]
        where = address(request)
        device = desk.signer.read_device(request.cookies.get(DEVICE_COOKIE), username)
        # Counted as a failure before the password is checked; the right password takes it back.
        attempt = ctx.limiter.admit(username, where, device)
        if attempt.refused:
            return self.too_many(request, username, attempt.retry_after, attempt.why)
        if attempt.delay:
            logger.info("desk: login for {!r} from {} waits {:.1f} s (failures from that address)", username, where,
                        attempt.delay)
            await asyncio.sleep(attempt.delay)
        if not await ctx.checks.acquire(where, desk.settings.login_queue_secs):
            ctx.limiter.withdraw(attempt)  # never checked: it does not count
            return self.too_many(request, username, 1.0, f"{ctx.checks.limit} password checks busy")
        try:
            account = await run_in_threadpool(self.authenticate, username, password)
        finally:
            ctx.checks.release(where)
        if account is None:
            logger.warning("desk: login failed for {!r} from {}", username, where)
            return self.login_page(request, error="아이디 또는 비밀번호가 맞지 않습니다.", status_code=401,
                                   username=username)
        ctx.limiter.succeeded(attempt)
        logger.info("desk: {} ({}) logged in from {}", username, account["role"], where)
        return self.logged_in(account, username, device is None)

    def logged_in(self, account: dict[str, Any], username: str, new_device: bool) -> Response:
        """To the queue, with a new session (and this browser's device cookie when it had none)."""
        desk = self.desk
        response = RedirectResponse(f"{PREFIX}/tickets", status_code=303)
        desk.set_cookie(response, SESSION_COOKIE, desk.signer.session_cookie(
            account["id"], account["session_epoch"], secrets.token_urlsafe(18), time.time()),
            max_age=int(desk.settings.session_hours * 3600))
        if new_device:
            desk.set_cookie(response, DEVICE_COOKIE, desk.signer.device_cookie(username), max_age=DEVICE_DAYS * 86400)
        response.delete_cookie(LOGIN_COOKIE, path=PREFIX)
        return response

    @screen("POST", "/logout")
    def logout(self, request: Request, csrf_token: str = Form("")) -> Response:
        who = self.desk.login_required(request)
        self.desk.check_csrf(who, csrf_token)
        self.desk.store.update_staff(who.username, end_sessions=True)  # this cookie, and any copy of it, ends here
        logger.info("desk: {} logged out", who.username)
        request.state.renew_session = None
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=PREFIX)
        return response

    @screen("GET", "/static/desk.css")
    def stylesheet(self) -> Response:
        return FileResponse(HERE / "static" / "desk.css", media_type="text/css",
                            headers={"Cache-Control": "public, max-age=3600"})

    @screen("GET", "")
    @screen("GET", "/")
    def home(self, request: Request) -> Response:
        self.desk.login_required(request)
        return RedirectResponse(f"{PREFIX}/tickets", status_code=303)
