"""Masking of personal data in logs: phone numbers and resident registration numbers."""

from __future__ import annotations

import re

# Resident registration number: 6 digits (birth date), hyphen, 7 digits.
_RRN = re.compile(r"(?<![0-9A-Za-z])(\d{6})[- ]?([1-8])\d{6}(?![0-9A-Za-z])")
# Phone numbers: E.164 (+8210...), Korean mobile/landline with or without hyphens.
_E164 = re.compile(r"\+\d{7,15}")
_PHONE = re.compile(r"(?<![0-9A-Za-z])(0\d{1,2})[- .]?(\d{3,4})[- .]?(\d{4})(?![0-9A-Za-z])")
# Twilio SIDs are not personal, but a CallSid ties logs to a caller's phone record.
_SID = re.compile(r"\b(CA|AC)([0-9a-fA-F]{4})[0-9a-fA-F]{28}\b")


def mask(text: str) -> str:
    """Mask phone numbers and resident registration numbers; shorten call SIDs."""
    text = _SID.sub(lambda m: f"{m.group(1)}{m.group(2)}…", text)
    text = _RRN.sub(lambda m: f"{m.group(1)}-{m.group(2)}******", text)
    text = _E164.sub(lambda m: m.group(0)[:4] + "*" * (len(m.group(0)) - 6) + m.group(0)[-2:], text)
    text = _PHONE.sub(lambda m: f"{m.group(1)}-****-{m.group(3)[-2:].rjust(4, '*')}", text)
    return text


def install_log_masking() -> None:
    """Route every loguru record through ``mask`` (the bot logs via loguru only)."""
    from loguru import logger

    logger.configure(patcher=lambda record: record.update(message=mask(record["message"])))
