"""NAVER Cloud SENS's SMS API v2: the domestic relay a Korean city's texts can go through.

A text from SENS comes from the city's own number, registered with the relay beforehand
(발신번호 사전등록), not from an international sender that Korean carriers mark (국제발신).
Documented at https://api.ncloud-docs.com/docs/sens-sms-send (and ``sens-sms-list``,
``sens-sms-get``); the public sector's cloud is the same API at ``sens.apigw.gov-ntruss.com``
(api-gov.ncloud-docs.com). What this client uses:

- ``POST /sms/v2/services/{serviceId}/messages`` with ``{"type": "SMS"|"LMS", "from", "content",
  "messages": [{"to"}]}``; 202 ``{"requestId", "requestTime", "statusCode": "202", "statusName"}``.
- ``GET .../messages?requestId=``: the request's ``messages[].messageId``.
- ``GET .../messages/{messageId}``: the carrier's result, ``messages[0].status`` READY, PROCESSING
  or COMPLETED, then ``statusCode`` "0" (``statusName`` success) or a failure with ``statusMessage``.

Every request is signed (common-ncpapi): ``x-ncp-apigw-signature-v2`` is the base64 HMAC-SHA256,
with the secret key, of ``"{METHOD} {path?query}\\n{timestamp}\\n{access key}"``; the timestamp
(``x-ncp-apigw-timestamp``, milliseconds) must be within 5 minutes of the gateway's clock. Errors
come from the API gateway as ``{"error": {"errorCode", "message", "details"}}`` (401 code 200:
authentication failed; 429 codes 400-420: quota and rate; 5xx) or from SENS as
``{"status", "errorMessage", "errors"}``; a 4xx other than 429 is not retried. Requests are
async (httpx): the event loop never waits on the relay. Phone numbers are logged masked only.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

import httpx

from bot.aftercall.api_error import CarrierAPIError
from bot.privacy import mask

SENS_TZ = ZoneInfo("Asia/Seoul")  # the relay's requestTime and completeTime are Seoul wall times
SMS_MAX_BYTES = 90  # one SMS: 90 bytes of EUC-KR (45 Hangul); longer is an LMS
LMS_MAX_BYTES = 2000
# EUC-KR has no Vietnamese letters: these are written without their marks (as Vietnamese SMS often are).
_FOLD = str.maketrans({"đ": "d", "Đ": "D", "«": "\"", "»": "\"", "–": "-", "—": "-", "’": "'", "‘": "'",
                       "“": "\"", "”": "\""})


class SensAPIError(CarrierAPIError):
    """A request SENS refused or that never reached it; retryable: 429, 5xx, no answer."""

    code: str | None  # the gateway's errorCode ("200" authentication failed, "900" unexpected)


@dataclass(frozen=True)
class SensResult:
    """One message's result (``GET .../messages/{messageId}``, ``messages[0]``)."""

    message_id: str
    status: str  # READY | PROCESSING | COMPLETED
    status_code: str | None  # the carrier's result once COMPLETED: "0" delivered, else a failure code
    status_name: str | None  # success | fail
    status_message: str | None
    request_time: dt.datetime | None  # when the relay took it (aware)
    telco: str | None = None  # SKT | KT | LGT

    @property
    def delivered(self) -> bool | None:
        """True or False once the carrier answered; None while it is under way."""
        if self.status != "COMPLETED":
            return None
        return self.status_code == "0" or self.status_name == "success"


def signature(method: str, path: str, timestamp: str, access_key: str, secret_key: str) -> str:
    """``x-ncp-apigw-signature-v2`` for one request (``path`` with its query string, no host)."""
    message = f"{method} {path}\n{timestamp}\n{access_key}".encode()
    return base64.b64encode(hmac.new(secret_key.encode(), message, hashlib.sha256).digest()).decode()


def domestic_number(e164: str) -> str:
    """A caller's E.164 number as SENS wants it: the Korean national number, digits only."""
    if not e164.startswith("+82") or not e164[3:].isdigit():
        raise ValueError(f"{mask(e164)} is not a Korean number: the domestic relay texts +82 numbers only")
    return "0" + e164[3:].lstrip("0")


def sms_content(body: str) -> tuple[str, str]:
    """The message type (SMS up to 90 bytes of EUC-KR, else LMS) and the content SENS can carry.

    SENS sends EUC-KR: characters it lacks are written without their marks (Vietnamese), and a text
    still not EUC-KR, or over an LMS's 2,000 bytes, is a ValueError naming why.
    """
    text = body.translate(_FOLD)
    try:
        size = len(text.encode("euc-kr"))
    except UnicodeEncodeError:
        text = "".join(_fold(ch) for ch in text)
        try:
            size = len(text.encode("euc-kr"))
        except UnicodeEncodeError as e:
            raise ValueError(f"the text has {text[e.start]!r}, which EUC-KR (and so SENS) cannot carry") from e
    if size > LMS_MAX_BYTES:
        raise ValueError(f"the text is {size} bytes of EUC-KR; an LMS carries {LMS_MAX_BYTES}")
    return ("SMS" if size <= SMS_MAX_BYTES else "LMS"), text


def _fold(ch: str) -> str:
    try:
        ch.encode("euc-kr")
        return ch
    except UnicodeEncodeError:
        return "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))


def _relay_time(text: Any) -> dt.datetime | None:
    """The relay's "2026-12-05T18:00:00.123" or "2026-12-05 18:00:00" (Seoul time), aware."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace(" ", "T")).replace(tzinfo=SENS_TZ)
    except ValueError:
        return None


class SensAPI:
    """SENS's SMS API for one service id (keyword-only; one per process is enough).

    ``transport``: an httpx transport (the tests' in-process fake, ``bot/testing/fake_sens.py``).
    """

    def __init__(self, *, access_key: str, secret_key: str, service_id: str,
                 base_url: str = "https://sens.apigw.ntruss.com", timeout_secs: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None, clock: Callable[[], float] = time.time):
        if not access_key or not secret_key:
            raise ValueError("SensAPI needs NCLOUD_ACCESS_KEY and NCLOUD_SECRET_KEY")
        if not service_id:
            raise ValueError("SensAPI needs sms.sens_service_id")
        self._access_key = access_key
        self._secret_key = secret_key
        self._base = base_url.rstrip("/")
        self._service = f"/sms/v2/services/{quote(service_id, safe=':')}"
        self._timeout = timeout_secs
        self._transport = transport
        self._clock = clock

    async def send_sms(self, *, to: str, from_: str, body: str) -> str:
        """Hand one text to the relay (SMS or LMS by its length); returns the request id."""
        what = f"SMS to {mask(to)}"
        try:
            kind, content = sms_content(body)
            number = domestic_number(to)
        except ValueError as e:
            raise SensAPIError(f"{what}: {e}", status=None, code=None, retryable=False) from e
        answer = await self._request("POST", f"{self._service}/messages", what,
                                     json={"type": kind, "contentType": "COMM", "countryCode": "82", "from": from_,
                                           "content": content, "messages": [{"to": number}]})
        request_id = answer.get("requestId")
        if answer.get("statusCode") != "202" or not isinstance(request_id, str):
            raise SensAPIError(f"{what}: not accepted ({answer.get('statusCode')} {answer.get('statusName')})",
                               status=202, code=None, retryable=False)
        return request_id

    async def message_ids(self, request_id: str) -> list[str]:
        """The messages of one send request (none yet while the relay is still taking it)."""
        answer = await self._request("GET", f"{self._service}/messages", f"request {request_id}",
                                     params={"requestId": request_id})
        return [m["messageId"] for m in answer.get("messages") or [] if isinstance(m.get("messageId"), str)]

    async def result(self, message_id: str) -> SensResult:
        """The carrier's result for one message (READY and PROCESSING while it is under way)."""
        answer = await self._request("GET", f"{self._service}/messages/{quote(message_id, safe='')}",
                                     f"message {message_id}")
        m = (answer.get("messages") or [{}])[0]  # one message per request: the outbox sends one text at a time
        return SensResult(message_id=message_id, status=str(m.get("status") or "READY"),
                          status_code=m.get("statusCode"), status_name=m.get("statusName"),
                          status_message=m.get("statusMessage"), request_time=_relay_time(m.get("requestTime")),
                          telco=m.get("telcoCode"))

    async def _request(self, method: str, path: str, what: str, *, json: dict[str, Any] | None = None,
                       params: dict[str, str] | None = None) -> dict[str, Any]:
        # The signature covers the path and query exactly as sent: build them once, send that URL.
        target = f"{path}?{urlencode(params)}" if params else path
        timestamp = str(int(self._clock() * 1000))
        headers = {"x-ncp-apigw-timestamp": timestamp, "x-ncp-iam-access-key": self._access_key,
                   "x-ncp-apigw-signature-v2": signature(method, target, timestamp, self._access_key, self._secret_key)}
        if json is not None:
            headers["Content-Type"] = "application/json; charset=utf-8"
        try:
            async with httpx.AsyncClient(transport=self._transport, timeout=self._timeout) as client:
                response = await client.request(method, self._base + target, headers=headers, json=json)
        except httpx.HTTPError as e:  # no connection, a timeout: the relay may take it later
            raise SensAPIError(f"{what}: no answer from SENS ({type(e).__name__})", status=None, code=None,
                               retryable=True) from e
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if response.status_code >= 400:
            code, message = _error_of(answer, response.text)
            retryable = response.status_code == 429 or response.status_code >= 500
            raise SensAPIError(f"{what}: HTTP {response.status_code} (code {code}): {message[:200]}",
                               status=response.status_code, code=code, retryable=retryable)
        return answer if isinstance(answer, dict) else {}


def _error_of(answer: Any, text: str) -> tuple[str | None, str]:
    """(code, message) from the gateway's or SENS's error body."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        err = answer["error"]
        message = " - ".join(str(err[k]) for k in ("message", "details") if err.get(k))
        return (str(err["errorCode"]) if err.get("errorCode") is not None else None), message
    if isinstance(answer, dict) and ("errorMessage" in answer or "errors" in answer):
        errors = answer.get("errors") or []
        return None, "; ".join([str(answer.get("errorMessage") or ""), *map(str, errors)]).strip("; ")
    return None, text.strip()
