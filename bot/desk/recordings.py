"""The desk's call recordings: a call's page with its player, the audio (seekable), downloads, legal holds,
and the access audit's monthly review (/desk/audit).

Added to the desk's router by ``build_router`` (every answer under /desk gets the security headers and
``Cache-Control: no-store`` from ``DeskHeaders``), never to a public route. Who may hear a call is who may
read it: agents and admins any call; a department's clerk only a call with a ticket of that department,
and anything else answers 404, as a missing call does (call ids cannot be probed). What is served goes
into the access audit (``recording_access``) once its bytes are on their way: every whole file is a row
(a copy; through the download form, with its reason, a download); a player's range requests (seeking)
within ten minutes of its first are one playback; opening the call's page is a view. A refused attempt
is a row too: who (``-`` when not logged in), from where, which call, why.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, RedirectResponse
from loguru import logger
from starlette.concurrency import run_in_threadpool
from starlette.types import Message, Receive, Scope, Send

from bot.desk.context import PREFIX, DeskContext
from bot.desk.queries import ticket_detail
from bot.dialog.calendar import Hours, LineCalendar
from bot.privacy import mask
from bot.recording import files
from bot.store import recordings
from bot.store.audit import ACTION_LABELS, REFUSAL_LABELS, monthly_review
from bot.store.db import StoreError

NOTE_MAX_CHARS = 500


class AuditedFileResponse(FileResponse):
    """A file whose bytes are audited when, and only when, they are served: ``on_serve(status)`` (blocking: run in
    the thread pool) before the answer starts, for a 200 or a 206; a range Starlette refuses (400, 416) is none."""

    def __init__(self, path: Path, *, on_serve: Callable[[int], None], **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.on_serve = on_serve

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def audited(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (200, 206):
                await run_in_threadpool(self.on_serve, message["status"])  # no audit row, no bytes
            await send(message)

        await super().__call__(scope, receive, audited)


def address(request: Request) -> str:
    return request.client.host if request.client else "?"


def add_recording_routes(router: APIRouter, ctx: DeskContext, *, login_required: Callable, page: Callable,
                         check_csrf: Callable, visible_ticket: Callable, refused: type[Exception]) -> None:
    """The recording routes, on the desk's router, with its login, page and CSRF helpers."""
    store, routing = ctx.store, ctx.routing
    directory = ctx.config.path(ctx.config.recording.dir)
    line = ctx.config.line  # the monthly review's working hours: the line's, breaks and all holidays as closed
    ctx.templates.env.globals.update(access_labels=ACTION_LABELS, refusal_labels=REFUSAL_LABELS)
    working_hours = LineCalendar(Hours.parse(line.hours, key="line.hours"), tz=line.timezone,
                                 extra_closed=line.extra_closed_days)

    def visible_call(request: Request, call_sid: str, attempt: str | None = None) -> tuple[Any, dict[str, Any]]:
        """(who, the call's recording facts) if ``who`` may read this call; 404 alike otherwise. ``attempt``:
        the recording's action asked for; a refusal of it is audited (who, from where, which call, why)."""
        def refuse(actor: str, why: str, kind: str = "not_found") -> Exception:
            if attempt is not None:
                recordings.note_access(store, call_sid, actor=actor, action=attempt, address=address(request),
                                       refused=why)
            return refused(kind)

        try:
            who = login_required(request)
        except refused as e:
            if e.kind == "login":
                raise refuse("-", "anonymous", "login") from e
            raise
        rec = recordings.find_recording(store, call_sid) if 0 < len(call_sid) <= 64 else None
        if rec is None:
            raise refuse(who.username, "no_such_call")
        if who.role == "department":
            mine = [t for t in rec["tickets"] if routing.department_of(t["category"]) == who.department]
            if not mine:
                logger.warning("desk: {} (department {}) asked for call {}, no ticket of theirs: answered as missing",
                               who.username, who.department, mask(call_sid))
                raise refuse(who.username, "other_department")
        return who, rec

    @router.get("/calls/{call_sid}")
    def call_page(request: Request, call_sid: str):
        who, rec = visible_call(request, call_sid, "view")
        recordings.note_access(store, call_sid, actor=who.username, action="view", address=address(request))
        detail = ticket_detail(store, {"call_sid": call_sid, "reception_no": ""})
        return page(request, "call.html", who, call=detail["call"], turns=detail["turns"], rec=rec,
                    access=recordings.access_log(store, call_sid),
                    tickets=[t for t in rec["tickets"] if who.sees_department(routing.department_of(t["category"]))])

    def audio(request: Request, who: Any, rec: dict[str, Any], call_sid: str, action: str,
              reason: str | None = None) -> AuditedFileResponse:
        try:
            path = files.resolve(directory, rec["path"])
        except files.RecordingMissing as e:
            recordings.note_access(store, call_sid, actor=who.username, address=address(request), refused="deleted",
                                   action=action)
            raise refused("not_found") from e

        def served(status: int) -> None:
            # 200: the whole file (no range, or one that no longer matches: If-Range), a copy every time;
            # 206: ranges, one playback (or one download) however many a player asks within the window.
            whole = status == 200
            recordings.note_access(store, call_sid, actor=who.username, address=address(request), fold=not whole,
                                   action=action if action == "download" else "copy" if whole else "play",
                                   reason=reason)

        return AuditedFileResponse(path, on_serve=served, media_type=files.media_type(path), filename=path.name,
                                   content_disposition_type="attachment" if action == "download" else "inline")

    @router.get("/calls/{call_sid}/recording")
    def recording_audio(request: Request, call_sid: str, download: int = 0):
        action = "download" if download else "play" if "range" in request.headers else "copy"
        who, rec = visible_call(request, call_sid, action)
        if download:  # a download states its reason: the call page's form (POST, below)
            recordings.note_access(store, call_sid, actor=who.username, action="download", address=address(request),
                                   refused="no_reason")
            raise refused("bad_request", "내려받기는 통화 화면의 양식에서 사유를 적어 요청해 주세요.")
        return audio(request, who, rec, call_sid, action)

    @router.post("/calls/{call_sid}/recording/download")
    def recording_download(request: Request, call_sid: str, reason: str = Form(""), csrf_token: str = Form("")):
        who, rec = visible_call(request, call_sid, "download")
        check_csrf(who, csrf_token)
        reason = reason.strip()
        if not reason or len(reason) > NOTE_MAX_CHARS:
            recordings.note_access(store, call_sid, actor=who.username, action="download", address=address(request),
                                   refused="no_reason")
            raise refused("bad_request", f"내려받는 사유를 {NOTE_MAX_CHARS}자 안에서 적어 주세요.")
        return audio(request, who, rec, call_sid, "download", reason)

    @router.get("/audit")
    def audit_page(request: Request, month: str = ""):
        who = login_required(request, roles=("admin",))
        month = month.strip() or dt.datetime.now(ctx.tz).strftime("%Y-%m")
        try:
            review = monthly_review(store, month, tz=ctx.tz, is_open=working_hours.is_open,
                                    many_calls=ctx.config.desk.review_many_calls)
        except StoreError as e:
            raise refused("bad_request", "월은 YYYY-MM 형식으로 적어 주세요 (예: 2026-11).") from e
        return page(request, "audit.html", who, review=review)

    @router.post("/tickets/{reception_no}/hold")
    def ticket_hold(request: Request, reception_no: str, hold: str = Form(""), note: str = Form(""),
                    csrf_token: str = Form("")):
        who = login_required(request, roles=("admin",))
        check_csrf(who, csrf_token)
        visible_ticket(who, reception_no)
        if hold not in ("1", "0") or len(note) > NOTE_MAX_CHARS:
            raise refused("bad_request", f"보존 설정(1) 또는 해제(0), 사유는 {NOTE_MAX_CHARS}자까지입니다.")
        try:
            recordings.set_legal_hold(store, reception_no, hold == "1", actor=who.username, note=note)
        except StoreError as e:
            raise refused("not_found") from e
        return RedirectResponse(f"{PREFIX}/tickets/{reception_no}", status_code=303)
