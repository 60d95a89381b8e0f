"""The desk's call recordings: a call's page with its player, the audio (seekable), downloads, legal holds.

A router of the desk's (every answer under /desk gets the security headers and ``Cache-Control: no-store``
from ``DeskHeaders``), never a public route. Who may hear a call is who may read it: agents and admins any call; a department's clerk only a call with a ticket of that department,
and anything else answers 404, as a missing call does (call ids cannot be probed). What is served goes
into the access audit (``recording_access``) once its bytes are on their way: every whole file is a row
(a copy; through the download form, with its reason, a download); a player's range requests (seeking)
within ten minutes of its first are one playback; opening the call's page is a view. A refused attempt
is a row too: who (``-`` when not logged in), from where, which call, why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from loguru import logger
from starlette.concurrency import run_in_threadpool
from starlette.types import Message, Receive, Scope, Send

from bot.desk.auth import Principal
from bot.desk.context import PREFIX
from bot.desk.guard import Desk, Refused, Screens, address, screen
from bot.desk.queries import ticket_detail
from bot.privacy import mask
from bot.recording import files
from bot.store import recordings
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


class RecordingScreens(Screens):
    """A call's page and recording, whoever may read the call: agents and admins any, a department its own."""

    def __init__(self, desk: Desk) -> None:
        super().__init__(desk)
        self.directory = desk.ctx.config.path(desk.ctx.config.recording.dir)

    def visible_call(self, request: Request, call_sid: str,
                     attempt: str | None = None) -> tuple[Principal, dict[str, Any]]:
        """(who, the call's recording facts) if ``who`` may read this call; 404 alike otherwise. ``attempt``:
        the recording's action asked for; a refusal of it is audited (who, from where, which call, why)."""
        store = self.desk.store

        def refuse(actor: str, why: str, kind: str = "not_found") -> Refused:
            if attempt is not None:
                recordings.note_access(store, call_sid, actor=actor, action=attempt, address=address(request),
                                       refused=why)
            return Refused(kind)

        try:
            who = self.desk.login_required(request)
        except Refused as e:
            if e.kind == "login":
                raise refuse("-", "anonymous", "login") from e
            raise
        rec = recordings.find_recording(store, call_sid) if 0 < len(call_sid) <= 64 else None
        if rec is None:
            raise refuse(who.username, "no_such_call")
        if who.role == "department":
            mine = [t for t in rec["tickets"] if self.desk.routing.department_of(t["category"]) == who.department]
            if not mine:
                logger.warning("desk: {} (department {}) asked for call {}, no ticket of theirs: answered as missing",
                               who.username, who.department, mask(call_sid))
                raise refuse(who.username, "other_department")
        return who, rec

    @screen("GET", "/calls/{call_sid}")
    def call_page(self, request: Request, call_sid: str) -> Response:
        desk = self.desk
        who, rec = self.visible_call(request, call_sid, "view")
        recordings.note_access(desk.store, call_sid, actor=who.username, action="view", address=address(request))
        detail = ticket_detail(desk.store, {"call_sid": call_sid, "reception_no": ""})
        visible = [t for t in rec["tickets"] if who.sees_department(desk.routing.department_of(t["category"]))]
        return desk.page(request, "call.html", who, call=detail["call"], turns=detail["turns"], rec=rec,
                         access=recordings.access_log(desk.store, call_sid), tickets=visible)

    def audio(self, request: Request, who: Principal, rec: dict[str, Any], call_sid: str, action: str,
              reason: str | None = None) -> AuditedFileResponse:
        store = self.desk.store
        try:
            path = files.resolve(self.directory, rec["path"])
        except files.RecordingMissing as e:
            recordings.note_access(store, call_sid, actor=who.username, address=address(request), refused="deleted",
                                   action=action)
            raise Refused("not_found") from e

        def served(status: int) -> None:
            # 200: the whole file (no range, or one that no longer matches: If-Range), a copy every time;
            # 206: ranges, one playback (or one download) however many a player asks within the window.
            whole = status == 200
            recordings.note_access(store, call_sid, actor=who.username, address=address(request), fold=not whole,
                                   action=action if action == "download" else "copy" if whole else "play",
                                   reason=reason)

        return AuditedFileResponse(path, on_serve=served, media_type=files.media_type(path), filename=path.name,
                                   content_disposition_type="attachment" if action == "download" else "inline")

    @screen("GET", "/calls/{call_sid}/recording")
    def recording_audio(self, request: Request, call_sid: str, download: int = 0, seg: int = 0) -> Response:
        """``seg``: a resumed call's later stream (issue 46), recorded to a file of its own."""
        action = "download" if download else "play" if "range" in request.headers else "copy"
        who, rec = self.visible_call(request, call_sid, action)
        if download:  # a download states its reason: the call page's form (POST, below)
            recordings.note_access(self.desk.store, call_sid, actor=who.username, action="download",
                                   address=address(request), refused="no_reason")
            raise Refused("bad_request", "내려받기는 통화 화면의 양식에서 사유를 적어 요청해 주세요.")
        if seg:
            stream = next((s for s in rec["streams"] if s["idx"] == seg), None)
            if stream is None:
                recordings.note_access(self.desk.store, call_sid, actor=who.username, action=action,
                                       address=address(request), refused="deleted")
                raise Refused("not_found")
            rec = {**rec, "path": stream["path"]}
        return self.audio(request, who, rec, call_sid, action)

    @screen("POST", "/calls/{call_sid}/recording/download")
    def recording_download(self, request: Request, call_sid: str, reason: str = Form(""),
                           csrf_token: str = Form("")) -> Response:
        who, rec = self.visible_call(request, call_sid, "download")
        self.desk.check_csrf(who, csrf_token)
        reason = reason.strip()
        if not reason or len(reason) > NOTE_MAX_CHARS:
            recordings.note_access(self.desk.store, call_sid, actor=who.username, action="download",
                                   address=address(request), refused="no_reason")
            raise Refused("bad_request", f"내려받는 사유를 {NOTE_MAX_CHARS}자 안에서 적어 주세요.")
        return self.audio(request, who, rec, call_sid, "download", reason)

    @screen("POST", "/tickets/{reception_no}/hold")
    def ticket_hold(self, request: Request, reception_no: str, hold: str = Form(""), note: str = Form(""),
                    csrf_token: str = Form("")) -> Response:
        who = self.desk.login_required(request, roles=("admin",))
        self.desk.check_csrf(who, csrf_token)
        self.desk.visible_ticket(who, reception_no)
        if hold not in ("1", "0") or len(note) > NOTE_MAX_CHARS:
            raise Refused("bad_request", f"보존 설정(1) 또는 해제(0), 사유는 {NOTE_MAX_CHARS}자까지입니다.")
        try:
            recordings.set_legal_hold(self.desk.store, reception_no, hold == "1", actor=who.username, note=note)
        except StoreError as e:
            raise Refused("not_found") from e
        return RedirectResponse(f"{PREFIX}/tickets/{reception_no}", status_code=303)
