"""Stream tokens that any worker can check: HMAC-SHA256 over the token id, CallSid and expiry.

The signed webhook answers with ``<Connect><Stream>`` carrying one token; Twilio presents it in the
media stream's ``customParameters``. The webhook and the media stream may land on different
workers (a round-robin proxy, several pods), so nothing about the token lives in one process:

* ``<id>.<expiry>.<CallSid, base64url>.<mac, base64url>`` where ``mac`` = HMAC-SHA256(key,
  ``v1|id|CallSid|expiry``). The CallSid travels in the token (it is not a secret: Twilio sends it
  in ``start`` anyway) so a token presented by another call is told apart from a forged one.
* The key comes from env ``STREAM_TOKEN_KEY`` and must be the same on every worker of the line.
  Without it each process makes a random key and says loudly that a second worker cannot check its
  tokens (``run_bot.py serve --workers N`` makes one key for its N children).
* Single use is not decided here: the records database keeps one row per token (``stream_tokens``,
  see ``bot/line/admission.py``); the first worker to mark it used wins.

Nothing else is in the token: the caller's number stays in the database, never in the TwiML.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from loguru import logger

KEY_ENV = "STREAM_TOKEN_KEY"
MIN_KEY_CHARS = 16
VERSION = "v1"


class TokenRefused(ValueError):
    """A stream token that cannot be used; the message is the reason (logged, sent as close reason)."""


@dataclass(frozen=True)
class IssuedToken:
    token: str
    token_id: str
    call_sid: str
    expires_at: float  # epoch seconds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_key(environ: dict[str, str] | None = None) -> tuple[bytes, bool]:
    """The signing key from ``STREAM_TOKEN_KEY``, or a random one (then ``False``: not shared)."""
    env = os.environ if environ is None else environ
    text = env.get(KEY_ENV) or ""
    if text:
        if len(text) < MIN_KEY_CHARS:
            raise ValueError(f"{KEY_ENV} is too short ({len(text)} characters; use at least {MIN_KEY_CHARS}, "
                             f"e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
        return text.encode("utf-8"), True
    return secrets.token_bytes(32), False


class StreamTokens:
    """Issues and checks signed, expiring stream tokens (no state: any worker with the key checks them)."""

    def __init__(self, ttl_secs: float, key: bytes | None = None, *, clock: Callable[[], float] = time.time) -> None:
        if key is None:
            key, shared = load_key()
            if not shared:
                logger.warning("!" * 78)
                logger.warning("{} is not set: stream tokens are signed with a random key of THIS process. A media stream that lands on another worker will be refused: give every worker of the line the same {} (run_bot.py serve --workers N does for its children)", KEY_ENV, KEY_ENV)
                logger.warning("!" * 78)
        self._key = key
        self._ttl = ttl_secs
        self._clock = clock

    def _mac(self, token_id: str, call_sid: str, expires: int) -> bytes:
        msg = f"{VERSION}|{token_id}|{call_sid}|{expires}".encode()
        return hmac.new(self._key, msg, hashlib.sha256).digest()

    def issue(self, call_sid: str) -> IssuedToken:
        token_id = secrets.token_hex(12)
        expires = int(self._clock() + self._ttl) + 1
        mac = self._mac(token_id, call_sid, expires)
        token = ".".join([token_id, str(expires), _b64(call_sid.encode("utf-8")), _b64(mac)])
        return IssuedToken(token, token_id, call_sid, float(expires))

    def verify(self, token: str | None, call_sid: str | None) -> IssuedToken:
        """The token's id and expiry when it is genuine, unexpired and this call's; else ``TokenRefused``."""
        if not token:
            raise TokenRefused("no token in customParameters")
        parts = token.split(".")
        if len(parts) != 4:
            raise TokenRefused("unknown, used or expired token (not a signed stream token)")
        token_id, expires_text, sid_b64, mac_b64 = parts
        try:
            expires = int(expires_text)
            issued_sid = _unb64(sid_b64).decode("utf-8")
            mac = _unb64(mac_b64)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise TokenRefused("unknown, used or expired token (malformed)") from None
        if not hmac.compare_digest(mac, self._mac(token_id, issued_sid, expires)):
            raise TokenRefused(f"forged token, or signed with another key (every worker needs the same {KEY_ENV})")
        if issued_sid != call_sid:
            raise TokenRefused("token was issued for another call")
        if expires < self._clock():
            raise TokenRefused("expired token (the media stream came after server.token_ttl_secs)")
        return IssuedToken(token, token_id, issued_sid, float(expires))

    # --- the <Connect>'s action URL -------------------------------------------------------------

    def sign_action(self, call_sid: str, segment: int) -> str:
        """The mark of a ``<Connect>``'s action URL for this call's segment (``bot/store/segments.py``):
        a request about another call or segment, or made up, does not carry it."""
        msg = f"{VERSION}|action|{call_sid}|{segment}".encode()
        return _b64(hmac.new(self._key, msg, hashlib.sha256).digest()[:18])

    def action_is_signed(self, call_sid: str, segment: int, mark: str) -> bool:
        return hmac.compare_digest(mark.encode(), self.sign_action(call_sid, segment).encode())
