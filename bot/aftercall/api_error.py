"""The error both carriers' API clients raise (``twilio_api.py``, ``sens_api.py``), saying whether a retry can help."""

from __future__ import annotations


class CarrierAPIError(RuntimeError):
    """A request the carrier refused or that never reached it.

    Attributes:
        status: HTTP status (None: no answer at all).
        code: the carrier's own error code, when it gave one.
        retryable: True when the same request may succeed later.
    """

    def __init__(self, message: str, *, status: int | None, code: int | str | None, retryable: bool):
        super().__init__(message)
        self.status = status
        self.code = code
        self.retryable = retryable
