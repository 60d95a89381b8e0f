"""The one seam the SMS outbox sends through, and its two carriers (``sms.provider``).

``TwilioSender`` sends through Twilio's Messages API from ``sms.from_number`` (an international
sender to Korean phones), as the line always did; ``SensSender`` through NAVER Cloud's SENS relay
from ``sms.sender_number``, the city's registered domestic number (``bot/aftercall/sens_api.py``).
Both raise ``SmsSendError`` saying whether a retry may help. A relay that reports delivery
(``reports``) answers ``report(sid)`` with the carrier's result, which the outbox maps onto its
statuses (``bot/aftercall/notify.py``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from loguru import logger

from bot.aftercall.api_error import CarrierAPIError
from bot.aftercall.sens_api import SensAPI, SensAPIError
from bot.aftercall.twilio_api import TwilioAPI
from bot.config import Config, Secrets


class SmsSendError(RuntimeError):
    """A text the carrier refused or that never reached it (``retryable``: it may go later)."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


@dataclass(frozen=True)
class DeliveryReport:
    """What the carrier said of one sent text.

    Attributes:
        state: "waiting" (not known yet), "delivered" or "undelivered".
        detail: the carrier's words for an undelivered text ("statusCode 3015: ...").
        accepted_at: when the relay took the text (aware), when it says.
    """

    state: Literal["waiting", "delivered", "undelivered"]
    detail: str = ""
    accepted_at: dt.datetime | None = None


class SmsSender(Protocol):
    """Sends one text; ``send`` returns the carrier's id for it (stored as ``outbox.message_sid``)."""

    name: str
    reports: bool  # True: ``report`` looks the delivery up; False: a text handed over counts as sent

    async def send(self, *, to: str, body: str) -> str: ...

    async def report(self, sid: str) -> DeliveryReport: ...


API = TypeVar("API", TwilioAPI, SensAPI)


class _Carrier(Generic[API]):
    """A carrier's API client and the number its texts come from; its errors become ``SmsSendError``."""

    def __init__(self, api: API, *, from_number: str):
        self._api: API = api
        self._from = from_number

    async def send(self, *, to: str, body: str) -> str:
        try:
            return await self._api.send_sms(to=to, from_=self._from, body=body)
        except CarrierAPIError as e:
            raise SmsSendError(str(e), retryable=e.retryable, status=e.status) from e


class TwilioSender(_Carrier[TwilioAPI]):
    """Texts through Twilio's Messages API from ``from_number`` (E.164)."""

    name = "twilio"
    reports = False

    async def report(self, sid: str) -> DeliveryReport:
        raise NotImplementedError("Twilio's delivery status is not looked up")


class SensSender(_Carrier[SensAPI]):
    """Texts through SENS from the city's registered ``sender_number`` (digits only)."""

    name = "sens"
    reports = True

    def __init__(self, api: SensAPI, *, sender_number: str):
        super().__init__(api, from_number=sender_number)

    @classmethod
    def from_config(cls, config: Config, secrets: Secrets) -> SensSender | None:
        """The sender for this config, or None without NCLOUD_* keys in the environment."""
        if not (secrets.ncloud_access_key and secrets.ncloud_secret_key):
            return None
        api = SensAPI(access_key=secrets.ncloud_access_key, secret_key=secrets.ncloud_secret_key,
                      service_id=config.sms.sens_service_id, base_url=config.sms.sens_api_url)
        return cls(api, sender_number=config.sms.sender_number)

    async def report(self, sid: str) -> DeliveryReport:
        """The carrier's result for request ``sid`` (its one message)."""
        try:
            ids = await self._api.message_ids(sid)
            if not ids:
                return DeliveryReport("waiting")
            result = await self._api.result(ids[0])
        except SensAPIError as e:
            raise SmsSendError(str(e), retryable=e.retryable, status=e.status) from e
        if result.delivered is None:
            return DeliveryReport("waiting", accepted_at=result.request_time)
        if result.delivered:
            return DeliveryReport("delivered", accepted_at=result.request_time)
        detail = f"SENS: not delivered (statusCode {result.status_code}: {result.status_message or result.status_name})"
        return DeliveryReport("undelivered", detail=detail, accepted_at=result.request_time)


def sms_sender(config: Config, secrets: Secrets, twilio_api: TwilioAPI | None) -> SmsSender | None:
    """The sender ``sms.provider`` names, or None (logged) when its credentials are not set."""
    if config.sms.provider == "sens":
        sender = SensSender.from_config(config, secrets)
        if sender is None:
            logger.error("SMS NOT SENT: sms.provider is sens but NCLOUD_ACCESS_KEY / NCLOUD_SECRET_KEY are not set; "
                         "messages wait in the records database")
        return sender
    if twilio_api is None:
        logger.error("SMS NOT SENT: sms.enabled but TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN are not set; "
                     "messages wait in the records database")
        return None
    return TwilioSender(twilio_api, from_number=config.sms.from_number)
