"""The staff desk's routes under /desk: login, the ticket queue, one ticket, calls, health, accounts, JSON API.

Every route but the login page and the stylesheet needs a login: a page without one redirects to
the login page, an API call answers 401. Forms carry a CSRF token; the session cookie is HttpOnly,
SameSite=Strict. Endpoints are plain ``def``: FastAPI runs them (database, argon2) in its thread pool;
the login post is ``async`` so that a login waiting for its delay or a free password check holds no thread.
Every answer gets the security headers (``DeskHeaders``); the URL carries no ticket data but the
reception number (searching by location is a POST).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import re
import secrets
import time
from typing import Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from loguru import logger
from starlette.concurrency import run_in_threadpool

from bot.desk import queries
from bot.desk.auth import (
    DEVICE_DAYS,
    AccountError,
    Principal,
    api_token_hash,
    check_account,
    check_password,
    hash_password,
    needs_rehash,
    verify_password,
)
from bot.desk.charts import line_chart
from bot.desk.context import HERE, PREFIX, DeskContext
from bot.desk.headers import CSP  # noqa: F401  (the desk's policy; the QA page adds to it)
from bot.desk.recordings import add_recording_routes
from bot.desk.service import add_service_routes
from bot.privacy import mask
from bot.store import recordings
from bot.store.db import StoreError
from bot.store.schema import STAFF_ROLES, TICKET_STATUSES

SESSION_COOKIE = "desk_session"
LOGIN_COOKIE = "desk_login"
DEVICE_COOKIE = "desk_device"  # a browser that logged in as an account: its own login budget (docs/desk.md)
RENEW_AFTER_SECS = 60.0  # the sliding idle timeout: a cookie older than this is signed again
NOTE_MAX_CHARS = 2000
RECEPTION_NO = re.compile(r"^\d{4,16}$")


class Refused(Exception):
    """A request the desk refuses: ``kind`` is login (no session), forbidden, not_found, csrf, bad_request."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(message or kind)
        self.kind = kind
        self.message = message


_CODES = {"login": 401, "forbidden": 403, "csrf": 403, "not_found": 404, "bad_request": 400, "too_many": 429}
_MESSAGES = {"login": "로그인이 필요합니다.", "forbidden": "이 화면을 볼 권한이 없습니다.",
             "csrf": "보안 토큰이 없거나 맞지 않습니다. 화면을 새로 고친 뒤 다시 시도해 주세요.",
             "not_found": "찾는 항목이 없습니다.", "bad_request": "요청이 올바르지 않습니다.",
             "too_many": "시도가 너무 많습니다. 잠시 후 다시 시도해 주세요."}


def _is_api(request: Request) -> bool:
    return request.url.path.startswith(f"{PREFIX}/api/")


def build_router(ctx: DeskContext) -> APIRouter:
    dc = ctx.config.desk
    store, routing, signer = ctx.store, ctx.routing, ctx.signer

    def renew(response: Response, request: Request) -> Response:
        # The security headers: DeskHeaders (bot/desk/headers.py), on every answer under /desk.
        renewed = getattr(request.state, "renew_session", None)
        if renewed and response.status_code < 400:
            set_cookie(response, SESSION_COOKIE, renewed, max_age=int(dc.session_hours * 3600))
        return response

    def refusal(request: Request, kind: str, message: str = "") -> Response:
        code = _CODES.get(kind, 400)
        if _is_api(request):
            headers = {"WWW-Authenticate": 'Bearer realm="desk"'} if kind == "login" else None
            return JSONResponse({"error": kind, "message": message or _MESSAGES.get(kind, "")}, status_code=code,
                                headers=headers)
        if kind == "login":
            response = RedirectResponse(f"{PREFIX}/login", status_code=303)
            response.delete_cookie(SESSION_COOKIE, path=PREFIX)
            return response
        return ctx.templates.TemplateResponse(request, "error.html", {
            "who": getattr(request.state, "who", None), "code": code,
            "message": message or _MESSAGES.get(kind, "")}, status_code=code)

    class DeskRoute(APIRoute):
        """A refusal as the desk's answer (a page, a JSON error, the login redirect); a renewed session cookie."""

        def get_route_handler(self):
            handler = super().get_route_handler()

            async def run(request: Request) -> Response:
                try:
                    response = await handler(request)
                except Refused as e:
                    response = refusal(request, e.kind, e.message)
                except RequestValidationError:
                    response = refusal(request, "bad_request")
                except HTTPException as e:
                    response = refusal(request, {404: "not_found", 403: "forbidden"}.get(e.status_code, "bad_request"))
                return renew(response, request)

            return run

    router = APIRouter(prefix=PREFIX, route_class=DeskRoute)

    def set_cookie(response: Response, name: str, value: str, *, max_age: int) -> None:
        response.set_cookie(name, value, max_age=max_age, path=PREFIX, secure=dc.cookie_secure, httponly=True,
                            samesite="strict")

    def address(request: Request) -> str:
        return request.client.host if request.client else "?"

    # --- who is asking ---------------------------------------------------------------------------

    def session_principal(request: Request) -> Principal | None:
        data = signer.read_session(request.cookies.get(SESSION_COOKIE), idle_secs=dc.idle_minutes * 60,
                                   max_secs=dc.session_hours * 3600)
        if data is None:
            return None
        account = store.find_staff(staff_id=int(data["id"]))
        if account is None or not account["active"] or account["session_epoch"] != data.get("epoch"):
            return None  # disabled, logged out or new password since: every such session ends
        if time.time() - data["signed_at"] > RENEW_AFTER_SECS:
            request.state.renew_session = signer.session_cookie(account["id"], account["session_epoch"],
                                                                data["nonce"], data["login"])
        return Principal(account["id"], account["username"], account["role"], account["department"], data["nonce"])

    def token_principal(request: Request) -> Principal | None:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None
        account = store.find_staff(api_token_hash=api_token_hash(auth[7:].strip()))
        if account is None or not account["active"]:
            logger.warning("desk API: refused a bearer token that is unknown or disabled (from {})", address(request))
            return None
        return Principal(account["id"], account["username"], account["role"], account["department"])

    def login_required(request: Request, *, roles: tuple[str, ...] = STAFF_ROLES, api: bool = False) -> Principal:
        who = (token_principal(request) if api else None) or session_principal(request)
        if who is None:
            raise Refused("login")
        request.state.who = who
        if who.role not in roles:
            logger.warning("desk: {} ({}) refused {} (needs {})", who.username, who.role, request.url.path,
                           "/".join(roles))
            raise Refused("forbidden")
        return who

    def check_csrf(who: Principal, token: str) -> None:
        if not who.nonce or not signer.csrf_ok(who.nonce, token):
            logger.warning("desk: {} posted without a valid CSRF token", who.username)
            raise Refused("csrf")

    def page(request: Request, name: str, who: Principal | None, status_code: int = 200, **context) -> Response:
        csrf = signer.csrf(who.nonce) if who and who.nonce else ""
        return ctx.templates.TemplateResponse(request, name, {"who": who, "csrf": csrf, **context},
                                              status_code=status_code)

    def visible_ticket(who: Principal, reception_no: str) -> dict[str, Any]:
        """The ticket if ``who`` may see it; 404 alike for a missing one and another department's, so that
        ticket numbers cannot be probed."""
        ticket = queries.find_ticket(store, routing, reception_no) if RECEPTION_NO.match(reception_no) else None
        if ticket is not None and not who.sees_department(ticket["department"]):
            logger.warning("desk: {} (department {}) asked for ticket {} of {}: answered as missing", who.username,
                           who.department, reception_no, ticket["department"])
            ticket = None
        if ticket is None:
            raise Refused("not_found")
        return ticket

    # --- login ---------------------------------------------------------------------------------

    def login_page(request: Request, *, error: str = "", status_code: int = 200, username: str = "") -> Response:
        nonce = secrets.token_urlsafe(18)
        response = ctx.templates.TemplateResponse(request, "login.html", {
            "who": None, "csrf": signer.csrf(nonce, "login"), "error": error, "username": username},
            status_code=status_code)
        set_cookie(response, LOGIN_COOKIE, signer.login_cookie(nonce), max_age=3600)
        return response

    @router.get("/login")
    def login_form(request: Request):
        if session_principal(request):
            return RedirectResponse(f"{PREFIX}/tickets", status_code=303)
        return login_page(request)

    def authenticate(username: str, password: str) -> dict[str, Any] | None:
        """The account when the password is right, its login recorded (blocking: the database and argon2)."""
        account = store.find_staff(username=username) if username else None
        usable = account is not None and account["active"]
        if not verify_password(account["password_hash"] if usable else None, password):
            return None
        extra = {"password_hash": hash_password(password)} if needs_rehash(account["password_hash"]) else {}
        store.update_staff(username, last_login_at=dt.datetime.now(dt.UTC), **extra)
        return account

    def too_many(request: Request, username: str, retry_after: float, why: str) -> Response:
        where = address(request)
        logger.warning("desk: login for {!r} from {} refused: {}", username, where, why)
        response = login_page(request, error=_MESSAGES["too_many"], status_code=429, username=username)
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
        return response

    @router.post("/login")
    async def login(request: Request, username: str = Form(""), password: str = Form(""),
                    csrf_token: str = Form("")):
        nonce = signer.read_login(request.cookies.get(LOGIN_COOKIE))
        if not signer.csrf_ok(nonce, csrf_token, "login"):
            logger.warning("desk: login form posted without a valid CSRF token (from {})", address(request))
            return login_page(request, error=_MESSAGES["csrf"], status_code=403)
        username = username.strip().lower()[:64]
        where = address(request)
        device = signer.read_device(request.cookies.get(DEVICE_COOKIE), username)
        # Counted as a failure before the password is checked; the right password takes it back.
        attempt = ctx.limiter.admit(username, where, device)
        if attempt.refused:
            return too_many(request, username, attempt.retry_after, attempt.why)
        if attempt.delay:
            logger.info("desk: login for {!r} from {} waits {:.1f} s (failures from that address)", username, where,
                        attempt.delay)
            await asyncio.sleep(attempt.delay)
        if not await ctx.checks.acquire(where, dc.login_queue_secs):
            ctx.limiter.withdraw(attempt)  # never checked: it does not count
            return too_many(request, username, 1.0, f"{ctx.checks.limit} password checks busy")
        try:
            account = await run_in_threadpool(authenticate, username, password)
        finally:
            ctx.checks.release(where)
        if account is None:
            logger.warning("desk: login failed for {!r} from {}", username, where)
            return login_page(request, error="아이디 또는 비밀번호가 맞지 않습니다.", status_code=401,
                              username=username)
        ctx.limiter.succeeded(attempt)
        logger.info("desk: {} ({}) logged in from {}", username, account["role"], where)
        response = RedirectResponse(f"{PREFIX}/tickets", status_code=303)
        set_cookie(response, SESSION_COOKIE, signer.session_cookie(
            account["id"], account["session_epoch"], secrets.token_urlsafe(18), time.time()),
            max_age=int(dc.session_hours * 3600))
        if device is None:
            set_cookie(response, DEVICE_COOKIE, signer.device_cookie(username), max_age=DEVICE_DAYS * 86400)
        response.delete_cookie(LOGIN_COOKIE, path=PREFIX)
        return response

    @router.post("/logout")
    def logout(request: Request, csrf_token: str = Form("")):
        who = login_required(request)
        check_csrf(who, csrf_token)
        store.update_staff(who.username, end_sessions=True)  # this cookie, and any copy of it, ends here
        logger.info("desk: {} logged out", who.username)
        request.state.renew_session = None
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=PREFIX)
        return response

    @router.get("/static/desk.css")
    def stylesheet():
        return FileResponse(HERE / "static" / "desk.css", media_type="text/css",
                            headers={"Cache-Control": "public, max-age=3600"})

    @router.get("")
    @router.get("/")
    def home(request: Request):
        login_required(request)
        return RedirectResponse(f"{PREFIX}/tickets", status_code=303)

    # --- the queue -------------------------------------------------------------------------------

    def ticket_filter(who: Principal, status: str, category: str, department: str, date_from: str, date_to: str,
                      q: str) -> queries.TicketFilter:
        return queries.TicketFilter(
            status=status if status in TICKET_STATUSES else None,
            category=category if category in routing.category_labels else None,
            department=department if department in routing.department_names and who.role != "department" else None,
            date_from=_date(date_from), date_to=_date(date_to), q=q.strip()[:100] or None)

    def queue(request: Request, who: Principal, f: queries.TicketFilter, page_no: int) -> Response:
        page_no = max(1, min(page_no, 1000))
        rows, more = queries.list_tickets(store, routing, who, f, tz=ctx.tz, limit=100, offset=(page_no - 1) * 100)
        return page(request, "tickets.html", who, tickets=rows, more=more, page_no=page_no, f=f)

    @router.get("/tickets")
    def tickets_page(request: Request, status: str = "", category: str = "", department: str = "",
                     date_from: str = "", date_to: str = "", q: str = "", page_no: int = 1):
        who = login_required(request)
        # Only a reception number may come in the URL; words of a location come by POST.
        f = ticket_filter(who, status, category, department, date_from, date_to, q if q.strip().isdigit() else "")
        return queue(request, who, f, page_no)

    @router.post("/tickets")
    def tickets_search(request: Request, status: str = Form(""), category: str = Form(""),
                       department: str = Form(""), date_from: str = Form(""), date_to: str = Form(""),
                       q: str = Form(""), page_no: int = Form(1), csrf_token: str = Form("")):
        who = login_required(request)
        check_csrf(who, csrf_token)
        return queue(request, who, ticket_filter(who, status, category, department, date_from, date_to, q), page_no)

    @router.get("/tickets/{reception_no}")
    def ticket_page(request: Request, reception_no: str):
        who = login_required(request)
        ticket = visible_ticket(who, reception_no)
        if ticket.get("call_sid"):  # the call's words and player: a reading of that call (the access audit)
            recordings.note_access(store, ticket["call_sid"], actor=who.username, action="view",
                                   reception_no=reception_no, address=address(request))
        return page(request, "ticket.html", who, t=ticket, **queries.ticket_detail(store, ticket))

    @router.post("/tickets/{reception_no}/status")
    def ticket_status(request: Request, reception_no: str, status: str = Form(""), note: str = Form(""),
                      csrf_token: str = Form("")):
        who = login_required(request)
        check_csrf(who, csrf_token)
        ticket = visible_ticket(who, reception_no)
        if status not in TICKET_STATUSES or len(note) > NOTE_MAX_CHARS:
            raise Refused("bad_request", f"상태는 {', '.join(TICKET_STATUSES)} 중 하나, 메모는 {NOTE_MAX_CHARS}자까지입니다.")
        store.change_ticket_status(reception_no, status, actor=who.username, note=note)
        logger.info("desk: {} set ticket {} {} -> {}", who.username, reception_no, ticket["status"], status)
        return RedirectResponse(f"{PREFIX}/tickets/{reception_no}", status_code=303)

    # --- calls and health ------------------------------------------------------------------------

    @router.get("/calls")
    def calls_page(request: Request):
        # Every caller's words: not for a department's clerk, who sees its own tickets' calls only.
        who = login_required(request, roles=("agent", "admin"))
        rows = queries.recent_calls(store, limit=100, lease_secs=ctx.config.server.worker_lease_secs)
        return page(request, "calls.html", who, calls=rows)

    @router.get("/health")
    def health_page(request: Request):
        who = login_required(request)
        now = dt.datetime.now(dt.UTC)
        day = queries.turn_records(store, now - dt.timedelta(days=1))
        hour = [r for r in day if r["created_at"] >= now - dt.timedelta(hours=1)]
        budgets = ctx.config.latency
        hourly = queries.hourly_v2v(day, now=now)
        chart = line_chart([h["hour"].astimezone(ctx.tz).strftime("%H시") for h in hourly],
                           {"p50": [h["p50"] for h in hourly], "p90": [h["p90"] for h in hourly]},
                           title="음성→음성 지연 (시간별, 최근 24시간)", budget=budgets.total_ms)
        return page(request, "health.html", who, windows=[("최근 1시간", queries.health(hour, budgets)),
                                                           ("최근 24시간", queries.health(day, budgets))], chart=chart)

    # --- accounts (admin) ------------------------------------------------------------------------

    @router.get("/staff")
    def staff_page(request: Request):
        who = login_required(request, roles=("admin",))
        return page(request, "staff.html", who, accounts=store.list_staff(), error="")

    @router.post("/staff")
    def staff_add(request: Request, username: str = Form(""), role: str = Form(""), department: str = Form(""),
                  password: str = Form(""), csrf_token: str = Form("")):
        who = login_required(request, roles=("admin",))
        check_csrf(who, csrf_token)
        username = username.strip().lower()
        try:
            check_account(username, role, department or None, routing.department_names)
            check_password(username, password)
            store.add_staff(username, role=role, department=department or None, password_hash=hash_password(password))
        except (AccountError, StoreError) as e:
            return page(request, "staff.html", who, status_code=400, accounts=store.list_staff(), error=str(e))
        logger.info("desk: {} added staff account {} ({} {})", who.username, username, role, department or "")
        return RedirectResponse(f"{PREFIX}/staff", status_code=303)

    @router.post("/staff/{username}/active")
    def staff_active(request: Request, username: str, active: str = Form(""), csrf_token: str = Form("")):
        who = login_required(request, roles=("admin",))
        check_csrf(who, csrf_token)
        if username == who.username:
            raise Refused("bad_request", "자신의 계정은 여기서 사용 중지할 수 없습니다.")
        try:
            store.update_staff(username, active=active == "1", end_sessions=True)
        except StoreError as e:
            raise Refused("not_found") from e
        logger.info("desk: {} set staff account {} active={}", who.username, username, active == "1")
        return RedirectResponse(f"{PREFIX}/staff", status_code=303)

    # --- JSON for the city's systems ---------------------------------------------------------------

    @router.get("/api/tickets")
    def api_tickets(request: Request, status: str = "", category: str = "", department: str = "",
                    date_from: str = "", date_to: str = "", q: str = "", limit: int = 100, offset: int = 0):
        who = login_required(request, api=True)
        f = ticket_filter(who, status, category, department, date_from, date_to, q if q.strip().isdigit() else "")
        rows, more = queries.list_tickets(store, routing, who, f, tz=ctx.tz, limit=max(1, min(limit, 500)),
                                          offset=max(0, offset))
        return JSONResponse({"tickets": [ticket_json(t) for t in rows], "more": more})

    @router.get("/api/tickets/{reception_no}")
    def api_ticket(request: Request, reception_no: str):
        who = login_required(request, api=True)
        ticket = visible_ticket(who, reception_no)
        detail = queries.ticket_detail(store, ticket)
        return JSONResponse({
            **ticket_json(ticket),
            "audit": [{"at": _iso(a["at"]), "actor": a["actor"], "from": a["from_status"], "to": a["to_status"],
                       "note": mask(a["note"] or "") or None} for a in detail["audit"]],
            "turns": [{"index": t["idx"], "route": t["route"], "caller": mask(t["transcript"] or "") or None,
                       "bot": mask(t["reply"] or "") or None} for t in detail["turns"]],
            "callbacks": [{"status": c["status"], "call_after": _iso(c["call_after"]), "reason": c["reason"]}
                          for c in detail["callbacks"]],
        })

    # Call recordings: a call's page and player, the audio behind this login, legal holds (bot/desk/recordings.py).
    add_recording_routes(router, ctx, login_required=login_required, page=page, check_csrf=check_csrf,
                         visible_ticket=visible_ticket, refused=Refused)
    return router


def ticket_json(t: dict[str, Any]) -> dict[str, Any]:
    # How the line serves, per day, and its CSV (bot/desk/service.py).
    add_service_routes(router, ctx, login_required=login_required, page=page, refused=Refused)
    """A ticket for the API: free text masked, no caller number, the call SID shortened."""
    return {"reception_no": t["reception_no"], "status": t["status"], "category": t["category"],
            "category_label": t["category_label"], "department": t["department"],
            "department_name": t["department_name"], "location": mask(t["location"] or "") or None,
            "time": mask(t["time"] or "") or None, "excerpt": mask(t["excerpt"] or "") or None,
            "call": mask(t["call_sid"]) if t.get("call_sid") else None,
            "created_at": _iso(t["created_at"]), "updated_at": _iso(t["updated_at"])}


def _iso(v):
    return v.isoformat() if isinstance(v, dt.datetime) else v


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text.strip()) if text.strip() else None
    except ValueError:
        return None
