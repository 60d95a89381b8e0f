"""The one way the bot talks to Twilio's REST API: SMS, outbound calls, hang-ups and redirects.

Built on the ``twilio`` library (pinned), whose client is synchronous: every request runs in a
thread (``asyncio.to_thread``) so the event loop never waits on Twilio. Errors come back as
``TwilioAPIError`` saying whether a retry can help (5xx, 429, 408, no connection) or not (a bad
number, an unsubscribed recipient, wrong credentials). ``twilio.api_base_url`` points the client
elsewhere (the tests' fake, ``bot/testing/process.py``). Phone numbers are logged masked only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from twilio.base.exceptions import TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client

from bot.aftercall.api_error import CarrierAPIError
from bot.config import Config, Secrets
from bot.privacy import mask

# The library logs whole requests (numbers, bodies) at INFO through std logging: keep that quiet.
logging.getLogger("twilio.http_client").setLevel(logging.WARNING)

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
ALREADY_ENDED = 20404  # Twilio's "resource not found": the call is over


class TwilioAPIError(CarrierAPIError):
    """A request Twilio refused or that never reached it."""

    code: int | None  # Twilio's error code (e.g. 21211 invalid number)


@dataclass(frozen=True)
class PlacedCall:
    sid: str
    status: str | None


class TwilioAPI:
    """Twilio's REST API for one account (keyword-only; one per process is enough)."""

    def __init__(self, *, account_sid: str, auth_token: str, api_base_url: str = "", timeout_secs: float = 10.0):
        if not account_sid or not auth_token:
            raise ValueError("TwilioAPI needs TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN")
        self.account_sid = account_sid
        self._client = Client(account_sid, auth_token, http_client=TwilioHttpClient(timeout=timeout_secs))
        if api_base_url:
            self._client.api.base_url = api_base_url.rstrip("/")

    @classmethod
    def from_config(cls, config: Config, secrets: Secrets) -> TwilioAPI | None:
        """The client for this config, or None without Twilio credentials in the environment."""
        if not (secrets.twilio_account_sid and secrets.twilio_auth_token):
            return None
        return cls(account_sid=secrets.twilio_account_sid, auth_token=secrets.twilio_auth_token,
                   api_base_url=config.twilio.api_base_url)

    # --- messages -----------------------------------------------------------------------------

    async def send_sms(self, *, to: str, from_: str, body: str, status_callback: str | None = None) -> str:
        """Send one SMS; returns its Message SID."""
        kwargs: dict[str, Any] = {"to": to, "from_": from_, "body": body}
        if status_callback:
            kwargs["status_callback"] = status_callback
        message = await self._run(f"SMS to {mask(to)}", self._client.messages.create, **kwargs)
        return message.sid

    # --- calls --------------------------------------------------------------------------------

    async def place_call(self, *, to: str, from_: str, url: str, machine_detection: str = "",
                         amd_callback: str | None = None, status_callback: str | None = None,
                         timeout_secs: int = 30) -> PlacedCall:
        """An outbound call whose TwiML comes from ``url`` (with ``AnsweredBy`` when AMD is on).

        ``amd_callback``: AMD runs asynchronously (``AsyncAmd``): the call starts at once and
        Twilio posts ``AnsweredBy`` there when it knows. ``status_callback``: the call's end
        (``CallStatus`` completed, no-answer, busy, failed)."""
        kwargs: dict[str, Any] = {"to": to, "from_": from_, "url": url, "timeout": timeout_secs}
        if machine_detection:
            kwargs["machine_detection"] = machine_detection
        if machine_detection and amd_callback:
            kwargs.update(async_amd="true", async_amd_status_callback=amd_callback,
                          async_amd_status_callback_method="POST")
        if status_callback:
            kwargs["status_callback"] = status_callback
        call = await self._run(f"call to {mask(to)}", self._client.calls.create, **kwargs)
        return PlacedCall(call.sid, call.status)

    async def hang_up(self, call_sid: str) -> bool:
        """End a call (``Status=completed``); False when it had already ended."""
        return await self._update_call(call_sid, status="completed")

    async def redirect(self, call_sid: str, twiml: str) -> bool:
        """Hand a call to new TwiML (a ``<Dial>`` to a person); False when it had already ended."""
        return await self._update_call(call_sid, twiml=twiml)

    async def _update_call(self, call_sid: str, **fields: str) -> bool:
        try:
            await self._run(f"call {mask(call_sid)} update", lambda: self._client.calls(call_sid).update(**fields))
        except TwilioAPIError as e:
            if e.code == ALREADY_ENDED or e.status == 404:
                return False
            raise
        return True

    # --- the thread ---------------------------------------------------------------------------

    async def _run(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except TwilioRestException as e:
            retryable = e.status in RETRYABLE_STATUSES or e.status >= 500
            raise TwilioAPIError(f"{what}: HTTP {e.status} (code {e.code}): {str(e.msg)[:200]}", status=e.status,
                                 code=e.code, retryable=retryable) from e
        except requests.RequestException as e:
            raise TwilioAPIError(f"{what}: no answer from Twilio ({type(e).__name__})", status=None, code=None,
                                 retryable=True) from e
