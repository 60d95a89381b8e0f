"""The ticket queue, one ticket and its status, and the same as JSON for the city's systems (/desk/api/tickets).

The URL carries no ticket data but the reception number: searching by the words of a location is a POST.
The API answers a session or an account's bearer token; its free text is masked and its call SIDs shortened.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import Form, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from loguru import logger

from bot.desk import queries
from bot.desk.auth import Principal
from bot.desk.context import PREFIX
from bot.desk.guard import Refused, Screens, address, screen
from bot.privacy import mask
from bot.store import recordings
from bot.store.schema import TICKET_STATUSES

NOTE_MAX_CHARS = 2000


class TicketScreens(Screens):
    def ticket_filter(self, who: Principal, status: str, category: str, department: str, date_from: str,
                      date_to: str, q: str) -> queries.TicketFilter:
        routing = self.desk.routing
        return queries.TicketFilter(
            status=status if status in TICKET_STATUSES else None,
            category=category if category in routing.category_labels else None,
            department=department if department in routing.department_names and who.role != "department" else None,
            date_from=_date(date_from), date_to=_date(date_to), q=q.strip()[:100] or None)

    def queue(self, request: Request, who: Principal, f: queries.TicketFilter, page_no: int) -> Response:
        page_no = max(1, min(page_no, 1000))
        rows, more = queries.list_tickets(self.desk.store, self.desk.routing, who, f, tz=self.desk.ctx.tz,
                                          limit=100, offset=(page_no - 1) * 100)
        return self.desk.page(request, "tickets.html", who, tickets=rows, more=more, page_no=page_no, f=f)

    @screen("GET", "/tickets")
    def tickets_page(self, request: Request, status: str = "", category: str = "", department: str = "",
                     date_from: str = "", date_to: str = "", q: str = "", page_no: int = 1) -> Response:
        who = self.desk.login_required(request)
        # Only a reception number may come in the URL; words of a location come by POST.
        f = self.ticket_filter(who, status, category, department, date_from, date_to, q if q.strip().isdigit() else "")
        return self.queue(request, who, f, page_no)

    @screen("POST", "/tickets")
    def tickets_search(self, request: Request, status: str = Form(""), category: str = Form(""),
                       department: str = Form(""), date_from: str = Form(""), date_to: str = Form(""),
                       q: str = Form(""), page_no: int = Form(1), csrf_token: str = Form("")) -> Response:
        who = self.desk.login_required(request)
        self.desk.check_csrf(who, csrf_token)
        f = self.ticket_filter(who, status, category, department, date_from, date_to, q)
        return self.queue(request, who, f, page_no)

    @screen("GET", "/tickets/{reception_no}")
    def ticket_page(self, request: Request, reception_no: str) -> Response:
        desk = self.desk
        who = desk.login_required(request)
        ticket = desk.visible_ticket(who, reception_no)
        if ticket.get("call_sid"):  # the call's words and player: a reading of that call (the access audit)
            recordings.note_access(desk.store, ticket["call_sid"], actor=who.username, action="view",
                                   reception_no=reception_no, address=address(request))
        return desk.page(request, "ticket.html", who, t=ticket, **queries.ticket_detail(desk.store, ticket))

    @screen("POST", "/tickets/{reception_no}/status")
    def ticket_status(self, request: Request, reception_no: str, status: str = Form(""), note: str = Form(""),
                      csrf_token: str = Form("")) -> Response:
        who = self.desk.login_required(request)
        self.desk.check_csrf(who, csrf_token)
        ticket = self.desk.visible_ticket(who, reception_no)
        if status not in TICKET_STATUSES or len(note) > NOTE_MAX_CHARS:
            raise Refused("bad_request", f"상태는 {', '.join(TICKET_STATUSES)} 중 하나, 메모는 {NOTE_MAX_CHARS}자까지입니다.")
        self.desk.store.change_ticket_status(reception_no, status, actor=who.username, note=note)
        logger.info("desk: {} set ticket {} {} -> {}", who.username, reception_no, ticket["status"], status)
        return RedirectResponse(f"{PREFIX}/tickets/{reception_no}", status_code=303)

    @screen("GET", "/api/tickets")
    def api_tickets(self, request: Request, status: str = "", category: str = "", department: str = "",
                    date_from: str = "", date_to: str = "", q: str = "", limit: int = 100,
                    offset: int = 0) -> Response:
        who = self.desk.login_required(request, api=True)
        f = self.ticket_filter(who, status, category, department, date_from, date_to, q if q.strip().isdigit() else "")
        rows, more = queries.list_tickets(self.desk.store, self.desk.routing, who, f, tz=self.desk.ctx.tz,
                                          limit=max(1, min(limit, 500)), offset=max(0, offset))
        return JSONResponse({"tickets": [ticket_json(t) for t in rows], "more": more})

    @screen("GET", "/api/tickets/{reception_no}")
    def api_ticket(self, request: Request, reception_no: str) -> Response:
        who = self.desk.login_required(request, api=True)
        ticket = self.desk.visible_ticket(who, reception_no)
        detail = queries.ticket_detail(self.desk.store, ticket)
        return JSONResponse({
            **ticket_json(ticket),
            "audit": [{"at": _iso(a["at"]), "actor": a["actor"], "from": a["from_status"], "to": a["to_status"],
                       "note": mask(a["note"] or "") or None} for a in detail["audit"]],
            "turns": [{"index": t["idx"], "route": t["route"], "caller": mask(t["transcript"] or "") or None,
                       "bot": mask(t["reply"] or "") or None} for t in detail["turns"]],
            "callbacks": [{"status": c["status"], "call_after": _iso(c["call_after"]), "reason": c["reason"]}
                          for c in detail["callbacks"]],
        })


def ticket_json(t: dict[str, Any]) -> dict[str, Any]:
    """A ticket for the API: free text masked, no caller number, the call SID shortened."""
    return {"reception_no": t["reception_no"], "status": t["status"], "category": t["category"],
            "category_label": t["category_label"], "department": t["department"],
            "department_name": t["department_name"], "location": mask(t["location"] or "") or None,
            "time": mask(t["time"] or "") or None, "excerpt": mask(t["excerpt"] or "") or None,
            "call": mask(t["call_sid"]) if t.get("call_sid") else None,
            "created_at": _iso(t["created_at"]), "updated_at": _iso(t["updated_at"])}


def _iso(v: Any) -> Any:
    return v.isoformat() if isinstance(v, dt.datetime) else v


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text.strip()) if text.strip() else None
    except ValueError:
        return None
