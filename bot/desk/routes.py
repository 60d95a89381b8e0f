"""The staff desk's routes under /desk: one router, the screens' routers included, one per concern.

    login.py       the login page and its post, logout, the stylesheet, /desk itself
    tickets.py     the ticket queue, one ticket and its status, the JSON API for the city's systems
    calls.py       the latest calls, the line's health
    recordings.py  a call's page, its recording (played, copied, downloaded with a reason), legal holds
    audit.py       the access audit's monthly review (admins)
    staff.py       the staff accounts (admins)
    service.py     how the line serves, per day, and its CSV

Who is asking, the CSRF check and the desk's refusals are bot/desk/guard.py's. Endpoints are plain ``def``:
FastAPI runs them (database, argon2) in its thread pool. Every answer gets the security headers
(``DeskHeaders``); the URL carries no ticket data but the reception number (searching by location is a POST).
"""

from __future__ import annotations

from fastapi import APIRouter

from bot.desk.audit import AuditScreens
from bot.desk.calls import CallScreens
from bot.desk.context import PREFIX, DeskContext
from bot.desk.guard import Desk, Refused
from bot.desk.login import LoginScreens
from bot.desk.recordings import RecordingScreens
from bot.desk.service import add_service_routes
from bot.desk.staff import StaffScreens
from bot.desk.tickets import TicketScreens


def build_router(ctx: DeskContext) -> APIRouter:
    """Every desk route, under /desk."""
    desk = Desk(ctx)
    router = APIRouter()
    for screens in (LoginScreens, TicketScreens, CallScreens, RecordingScreens, AuditScreens, StaffScreens):
        router.include_router(screens(desk).router(), prefix=PREFIX)
    service = desk.router()  # how the line serves, per day, and its CSV (bot/desk/service.py)
    add_service_routes(service, ctx, login_required=desk.login_required, page=desk.page, refused=Refused)
    router.include_router(service, prefix=PREFIX)
    return router
