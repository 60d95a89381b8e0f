"""The staff accounts (admins only): the list, a new account, an account turned off or on (its sessions end)."""

from __future__ import annotations

from fastapi import Form, Request
from fastapi.responses import RedirectResponse, Response
from loguru import logger

from bot.desk.auth import AccountError, check_account, check_password, hash_password
from bot.desk.context import PREFIX
from bot.desk.guard import Refused, Screens, screen
from bot.store.db import StoreError

ADMIN = ("admin",)


class StaffScreens(Screens):
    @screen("GET", "/staff")
    def staff_page(self, request: Request) -> Response:
        who = self.desk.login_required(request, roles=ADMIN)
        return self.desk.page(request, "staff.html", who, accounts=self.desk.store.list_staff(), error="")

    @screen("POST", "/staff")
    def staff_add(self, request: Request, username: str = Form(""), role: str = Form(""),
                  department: str = Form(""), password: str = Form(""), csrf_token: str = Form("")) -> Response:
        desk = self.desk
        who = desk.login_required(request, roles=ADMIN)
        desk.check_csrf(who, csrf_token)
        username = username.strip().lower()
        try:
            check_account(username, role, department or None, desk.routing.department_names)
            check_password(username, password)
            desk.store.add_staff(username, role=role, department=department or None,
                                 password_hash=hash_password(password))
        except (AccountError, StoreError) as e:
            return desk.page(request, "staff.html", who, status_code=400, accounts=desk.store.list_staff(),
                             error=str(e))
        logger.info("desk: {} added staff account {} ({} {})", who.username, username, role, department or "")
        return RedirectResponse(f"{PREFIX}/staff", status_code=303)

    @screen("POST", "/staff/{username}/active")
    def staff_active(self, request: Request, username: str, active: str = Form(""),
                     csrf_token: str = Form("")) -> Response:
        who = self.desk.login_required(request, roles=ADMIN)
        self.desk.check_csrf(who, csrf_token)
        if username == who.username:
            raise Refused("bad_request", "자신의 계정은 여기서 사용 중지할 수 없습니다.")
        try:
            self.desk.store.update_staff(username, active=active == "1", end_sessions=True)
        except StoreError as e:
            raise Refused("not_found") from e
        logger.info("desk: {} set staff account {} active={}", who.username, username, active == "1")
        return RedirectResponse(f"{PREFIX}/staff", status_code=303)
