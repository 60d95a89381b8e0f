"""Staff accounts' secrets: password hashes, session cookies, CSRF tokens, API tokens, login limits.

Passwords: argon2id (argon2-cffi's defaults). Sessions: a cookie signed with DESK_SECRET_KEY
(itsdangerous) carrying the account id, its session epoch and a random nonce; the account is read
again on every request, so a disabled account or a raised epoch (logout, new password) ends every
session at once. CSRF tokens are HMACs of the session's nonce (of a login nonce before login).
Logins: ``LoginLimiter`` (counted before the check; per account and source, per address a delay),
``PasswordChecks`` (a bounded number of argon2 checks at once), device cookies (``Signer``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeTimedSerializer

from bot.store.schema import STAFF_ROLES

USERNAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,63}$")
MIN_PASSWORD_CHARS = 10
MIN_SECRET_KEY_CHARS = 32
DEVICE_DAYS = 30  # a browser's device cookie (after a successful login) lasts this long
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
        self._device = URLSafeTimedSerializer(secret_key, salt="desk-device")

    def session_cookie(self, staff_id: int, epoch: int, nonce: str, login_at: float) -> str:
        return self._session.dumps({"id": staff_id, "epoch": epoch, "nonce": nonce, "login": login_at})

    def read_session(self, value: str | None, *, idle_secs: float, max_secs: float) -> dict | None:
        """The cookie's fields, or None when it is forged, idle too long or past the session's lifetime."""
        if not value:
            return None
        try:
            data, signed_at = self._session.loads(value, max_age=_whole(idle_secs), return_timestamp=True)
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
            return self._login.loads(value, max_age=_whole(max_secs)) if value else None
        except BadSignature:
            return None

    def device_cookie(self, username: str) -> str:
        """A browser that logged in as ``username``: its own login budget (``LoginLimiter``), never a key."""
        return self._device.dumps({"u": username, "d": secrets.token_urlsafe(12)})

    def read_device(self, value: str | None, username: str, max_secs: float = DEVICE_DAYS * 86400) -> str | None:
        """The device id of a browser's device cookie for this username; None for none, another name or forged."""
        try:
            data = self._device.loads(value, max_age=_whole(max_secs)) if value else None
        except BadSignature:
            return None
        if not isinstance(data, dict) or data.get("u") != username or not isinstance(data.get("d"), str):
            return None
        return data["d"]

    def csrf(self, nonce: str, purpose: str = "session") -> str:
        return hmac.new(self._key, f"csrf|{purpose}|{nonce}".encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, nonce: str | None, token: str | None, purpose: str = "session") -> bool:
        return bool(nonce and token) and hmac.compare_digest(self.csrf(nonce or "", purpose), token or "")


def _whole(secs: float) -> int:
    # itsdangerous counts ages in whole seconds: ``age > floor(secs)`` is ``age > secs``.
    return math.floor(secs)


@dataclass(eq=False)
class _Failure:
    at: float
    source: str  # the client address, or "device:<id>" for a browser's device cookie of the account


@dataclass(frozen=True)
class Admission:
    """The limiter's answer to one login attempt: refused (with when to try again), or admitted after ``delay``.

    An admitted attempt is already counted as a failure; ``LoginLimiter.succeeded`` takes it back
    (the right password), ``LoginLimiter.withdraw`` too (the password was never checked).
    """

    refused: bool
    retry_after: float = 0.0
    delay: float = 0.0
    why: str = ""
    failures: tuple[_Failure, ...] = ()
    username: str = ""
    source: str = ""


class LoginLimiter:
    """The desk's login rules (docs/desk.md), counted before the password is checked.

    * Every attempt is counted as a failure when it is admitted, before argon2 runs (the right
      password takes it back): logins at once for one account get at most ``attempts`` checks.
    * A source is the client address, or the device cookie a browser got at a successful login of
      this account (``Signer.device_cookie``): someone else on the same address cannot lock it out.
    * Account rule: ``attempts`` failures of one account from one source in the window: that source is
      refused for that account (429). ``attempts * per_address_factor`` failures of the account from
      any addresses: every address that has failed it is refused too (a guess spread over many addresses
      gets one try per address). Other sources are still checked.
    * Address rule: failures from one address (any names), beyond ``attempts``, delay that address's
      next checks: 0.5 s, doubling, at most ``max_delay_secs``. Slowed, never refused, so one person
      on a shared proxy address cannot lock every other out. Device-cookie attempts are not delayed.

    In this process's memory: with several desk processes an attacker gets each one's allowance;
    run one desk (docs/desk.md), or put the proxy's own limit in front.
    """

    MAX_KEYS = 10000
    MAX_PER_KEY = 1000

    def __init__(self, attempts: int, window_secs: float, per_address_factor: int = 4, *,
                 max_delay_secs: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.attempts = attempts
        self.window = window_secs
        self.per_account = attempts * per_address_factor
        self.max_delay = max_delay_secs
        self._clock = clock
        self._pairs: dict[tuple[str, str], deque[_Failure]] = {}  # (account, source)
        self._accounts: dict[str, deque[_Failure]] = {}  # account, from addresses (not device cookies)
        self._addresses: dict[str, deque[_Failure]] = {}  # address, any account, no device cookie
        self._lock = threading.Lock()

    def _recent(self, table: dict[Any, deque[_Failure]], key: Any, t: float) -> deque[_Failure]:
        q = table.get(key)
        if q is None:
            q = table[key] = deque(maxlen=self.MAX_PER_KEY)
        while q and q[0].at < t - self.window:
            q.popleft()
        return q

    def delay_for(self, failures: int) -> float:
        """The wait before a check from an address with this many recent failures."""
        over = failures - self.attempts
        return 0.0 if over < 0 else min(self.max_delay, 0.5 * 2.0 ** min(over, 30))

    def admit(self, username: str, address: str, device: str | None = None) -> Admission:
        """Refuse this attempt, or count it as a failure now and say how long it waits before its check."""
        username = username.lower()
        source = f"device:{device}" if device else address
        t = self._clock()
        with self._lock:
            pair = self._recent(self._pairs, (username, source), t)
            if len(pair) >= self.attempts:
                return Admission(True, retry_after=pair[0].at + self.window - t, why="too many failures here")
            account = self._recent(self._accounts, username, t)
            if not device and len(account) >= self.per_account and any(f.source == address for f in account):
                return Admission(True, retry_after=account[0].at + self.window - t,
                                 why="too many failures of this account")
            at_address = self._recent(self._addresses, address, t)
            delay = 0.0 if device else self.delay_for(len(at_address))
            f = _Failure(t, source)
            pair.append(f)
            if not device:
                account.append(f)
                at_address.append(f)
            self._forget_quiet(t)
            return Admission(False, delay=delay, failures=(f,), username=username, source=source)

    def _remove(self, admission: Admission) -> None:
        for f in admission.failures:
            for q in (self._pairs.get((admission.username, admission.source)), self._accounts.get(admission.username),
                      self._addresses.get(f.source)):
                if q is not None and f in q:
                    q.remove(f)

    def withdraw(self, admission: Admission) -> None:
        """The password was never checked (no free check): the attempt does not count."""
        with self._lock:
            self._remove(admission)

    def succeeded(self, admission: Admission) -> None:
        """The right password: this attempt does not count, and this source's failures of the account end."""
        with self._lock:
            self._remove(admission)
            self._pairs.pop((admission.username, admission.source), None)

    def _forget_quiet(self, t: float) -> None:
        # Forget quiet keys so a spray of names or addresses cannot fill memory.
        tables: tuple[dict[Any, deque[_Failure]], ...] = (self._pairs, self._accounts, self._addresses)
        for table in tables:
            if len(table) > self.MAX_KEYS:
                for k in [k for k, q in table.items() if not q or q[-1].at < t - self.window]:
                    del table[k]


class PasswordChecks:
    """At most ``limit`` password checks at once in all (each argon2id check holds 64 MiB), and at most
    ``per_address`` of them for one client address, so one address cannot take every check."""

    def __init__(self, limit: int, per_address: int | None = None):
        self.limit = max(1, limit)
        self.per_address = max(1, per_address if per_address is not None else (self.limit + 1) // 2)
        self._busy = 0
        self._by_address: dict[str, int] = {}
        self._lock = threading.Lock()

    def try_acquire(self, address: str) -> bool:
        with self._lock:
            if self._busy >= self.limit or self._by_address.get(address, 0) >= self.per_address:
                return False
            self._busy += 1
            self._by_address[address] = self._by_address.get(address, 0) + 1
            return True

    async def acquire(self, address: str, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a free check (polled: no thread is held while waiting)."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire(address):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    def release(self, address: str) -> None:
        with self._lock:
            self._busy -= 1
            left = self._by_address.get(address, 1) - 1
            if left > 0:
                self._by_address[address] = left
            else:
                self._by_address.pop(address, None)
