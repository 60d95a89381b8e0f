"""The desk's call recordings: a call's page with its player, the audio (seekable), legal holds.

Added to the desk's router by ``build_router`` (so every answer gets the desk's security headers and
``Cache-Control: no-store``), never to a public route. Who may hear a call is who may read it:
agents and admins any call; a department's clerk only a call with a ticket of that department, and
anything else answers 404, as a missing call does (call ids cannot be probed). Every playback and
download goes into the recording's access audit (``recording_access``): a player's range requests
(seeking) within ten minutes of its first are that one playback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, RedirectResponse
from loguru import logger

from bot.desk.context import PREFIX, DeskContext
from bot.desk.queries import ticket_detail
from bot.privacy import mask
from bot.recording import files
from bot.store import recordings
from bot.store.db import StoreError

NOTE_MAX_CHARS = 500


def add_recording_routes(router: APIRouter, ctx: DeskContext, *, login_required: Callable, page: Callable,
                         check_csrf: Callable, visible_ticket: Callable, refused: type[Exception]) -> None:
    """The recording routes, on the desk's router, with its login, page and CSRF helpers."""
    store, routing = ctx.store, ctx.routing
    directory = ctx.config.path(ctx.config.recording.dir)

    def visible_call(request: Request, call_sid: str) -> tuple[Any, dict[str, Any]]:
        """(who, the call's recording facts) if ``who`` may read this call; 404 alike otherwise."""
        who = login_required(request)
        rec = recordings.find_recording(store, call_sid) if 0 < len(call_sid) <= 64 else None
        if rec is not None and who.role == "department":
            mine = [t for t in rec["tickets"] if routing.department_of(t["category"]) == who.department]
            if not mine:
                logger.warning("desk: {} (department {}) asked for call {}, no ticket of theirs: answered as missing",
                               who.username, who.department, mask(call_sid))
                rec = None
        if rec is None:
            raise refused("not_found")
        return who, rec

    @router.get("/calls/{call_sid}")
    def call_page(request: Request, call_sid: str):
        who, rec = visible_call(request, call_sid)
        detail = ticket_detail(store, {"call_sid": call_sid, "reception_no": ""})
        return page(request, "call.html", who, call=detail["call"], turns=detail["turns"], rec=rec,
                    access=recordings.access_log(store, call_sid),
                    tickets=[t for t in rec["tickets"] if who.sees_department(routing.department_of(t["category"]))])

    @router.get("/calls/{call_sid}/recording")
    def recording_audio(request: Request, call_sid: str, download: int = 0):
        who, rec = visible_call(request, call_sid)
        try:
            path = files.resolve(directory, rec["path"])
        except files.RecordingMissing as e:
            raise refused("not_found") from e
        action = "download" if download else "play"
        # A download is audited each time; a playback once, not once per range its player asks for.
        recordings.note_access(store, call_sid, actor=who.username, action=action)
        disposition = "attachment" if download else "inline"
        return FileResponse(path, media_type=files.media_type(path), filename=path.name,
                            content_disposition_type=disposition)

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
