"""Staff accounts' secrets: password hashes, session cookies, CSRF tokens, API tokens, login limits.

Passwords: argon2id (argon2-cffi's defaults). Sessions: a cookie signed with DESK_SECRET_KEY
(itsdangerous) carrying the account id, its session epoch and a random nonce; the account is read
again on every request, so a disabled account or a raised epoch (logout, new password) ends every
session at once. CSRF tokens are HMACs of the session's nonce (of a login nonce before login).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeTimedSerializer

from bot.store.schema import STAFF_ROLES

USERNAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,63}$")
MIN_PASSWORD_CHARS = 10
MIN_SECRET_KEY_CHARS = 32
_hasher = PasswordHasher()


@cache
def _dummy_hash() -> str:
    # Verified when the username is unknown, so a wrong name takes as long as a wrong password.
    return _hasher.hash(secrets.token_urlsafe(16))


class AccountError(ValueError):
    """A username, role, department or password that cannot be used; the message says why."""


def check_account(username: str, role: str, department: str | None, departments: dict[str, str]) -> None:
    if not USERNAME_RE.match(username):
        raise AccountError(f"username {username!r}: 2-64 characters, lowercase letters, digits, '.', '_' or '-'")
    if role not in STAFF_ROLES:
        raise AccountError(f"role {role!r}: one of {', '.join(STAFF_ROLES)}")
    if role == "department" and department not in departments:
        raise AccountError(f"role department needs --department, one of: {', '.join(departments)}")
    if role != "department" and department:
        raise AccountError(f"--department is for role department only (role {role} sees every department)")


def check_password(username: str, password: str) -> None:
    if len(password) < MIN_PASSWORD_CHARS:
        raise AccountError(f"password: at least {MIN_PASSWORD_CHARS} characters")
    if username.lower() in password.lower():
        raise AccountError("password: must not contain the username")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True for the right password; a missing account (None) is checked against a dummy hash."""
    try:
        return _hasher.verify(password_hash or _dummy_hash(), password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)


def new_api_token() -> tuple[str, str]:
    """A new API token (shown once) and the sha256 kept of it."""
    token = "desk_" + secrets.token_urlsafe(32)
    return token, api_token_hash(token)


def api_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a request is: a staff account, by session cookie or by API token."""

    staff_id: int
    username: str
    role: str
    department: str | None
    nonce: str = ""  # the session's; empty for an API token (no forms)

    def sees_department(self, department: str | None) -> bool:
        return self.role != "department" or (department is not None and department == self.department)


class Signer:
    """Session cookies and CSRF tokens under one secret key."""

    def __init__(self, secret_key: str):
        if len(secret_key) < MIN_SECRET_KEY_CHARS:
            raise ValueError(f"DESK_SECRET_KEY is {len(secret_key)} characters; use at least {MIN_SECRET_KEY_CHARS} "
                             "random ones (python -c 'import secrets; print(secrets.token_urlsafe(48))')")
        self._key = secret_key.encode()
        self._session = URLSafeTimedSerializer(secret_key, salt="desk-session")
        self._login = URLSafeTimedSerializer(secret_key, salt="desk-login")

    def session_cookie(self, staff_id: int, epoch: int, nonce: str, login_at: float) -> str:
        return self._session.dumps({"id": staff_id, "epoch": epoch, "nonce": nonce, "login": login_at})

    def read_session(self, value: str | None, *, idle_secs: float, max_secs: float) -> dict | None:
        """The cookie's fields, or None when it is forged, idle too long or past the session's lifetime."""
        if not value:
            return None
        try:
            data, signed_at = self._session.loads(value, max_age=idle_secs, return_timestamp=True)
        except BadSignature:  # SignatureExpired is one: idle too long
            return None
        if not isinstance(data, dict) or time.time() - float(data.get("login", 0)) > max_secs:
            return None
        data["signed_at"] = signed_at.timestamp()
        return data

    def login_cookie(self, nonce: str) -> str:
        return self._login.dumps(nonce)

    def read_login(self, value: str | None, max_secs: float = 3600.0) -> str | None:
        try:
            return self._login.loads(value, max_age=max_secs) if value else None
        except BadSignature:
            return None

    def csrf(self, nonce: str, purpose: str = "session") -> str:
        return hmac.new(self._key, f"csrf|{purpose}|{nonce}".encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, nonce: str | None, token: str | None, purpose: str = "session") -> bool:
        return bool(nonce and token) and hmac.compare_digest(self.csrf(nonce, purpose), token)


class LoginLimiter:
    """Failed logins in a sliding window: per username and address, and per address over all names.

    In this process's memory: with several desk processes an attacker gets each one's allowance;
    run one desk (docs/desk.md), or put the proxy's own limit in front.
    """

    def __init__(self, attempts: int, window_secs: float, per_address_factor: int = 4):
        self.attempts = attempts
        self.window = window_secs
        self.per_address = attempts * per_address_factor
        self._failures: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], t: float) -> deque[float]:
        q = self._failures.setdefault(key, deque())
        while q and q[0] < t - self.window:
            q.popleft()
        return q

    def blocked(self, username: str, address: str) -> bool:
        t = time.monotonic()
        with self._lock:
            return (len(self._recent((username.lower(), address), t)) >= self.attempts
                    or len(self._recent(("", address), t)) >= self.per_address)

    def failed(self, username: str, address: str) -> None:
        t = time.monotonic()
        with self._lock:
            self._recent((username.lower(), address), t).append(t)
            self._recent(("", address), t).append(t)
            if len(self._failures) > 10000:  # forget quiet keys so a spray cannot fill memory
                for k in [k for k, q in self._failures.items() if not q or q[-1] < t - self.window]:
                    del self._failures[k]

    def succeeded(self, username: str, address: str) -> None:
        with self._lock:
            self._failures.pop((username.lower(), address), None)
