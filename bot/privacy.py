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


def start_logging(verbose: bool) -> None:
    """A command's logging: masked loguru lines on stderr, DEBUG with ``-v``."""
    import sys

    from loguru import logger

    logger.remove()
    install_log_masking()
    logger.add(sys.stderr, level="DEBUG" if verbose else "INFO")


# Card numbers: 15-16 digits in groups (4-4-4-4, 4-6-5) or run together.
_CARD = re.compile(r"(?<![0-9A-Za-z])(\d{4})[- ]?(?:\d{4}[- ]?\d{4}[- ]?\d{4}|\d{6}[- ]?\d{5})(?![0-9A-Za-z])")


def mask_stored(text: str) -> str:
    """What may be stored of a caller's words: resident registration and card numbers masked.

    A number said as digit words ("팔 공 공 일 ...") is masked too, when its digits form one of
    those numbers. Phone numbers and reception numbers are kept (call-backs, status questions).
    """
    from bot.korean.digits import spoken_digit_runs

    if not text:
        return text
    text = _mask_numbers(text)
    for run, digits in reversed(spoken_digit_runs(text)):
        masked = _mask_numbers(digits)
        if masked != digits:
            text = text[: run[0]] + masked + " " + text[run[1] :]
    return text


def _mask_numbers(text: str) -> str:
    text = _RRN.sub(lambda m: f"{m.group(1)}-{m.group(2)}******", text)
    return _CARD.sub(lambda m: f"{m.group(1)}-****-****-****", text)
