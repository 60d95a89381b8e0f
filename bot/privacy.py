"""Masking of personal data: one function, ``mask``, for every log sink and every API that shows caller words.

``mask`` hides phone numbers (domestic, with or without hyphens or a parenthesised area code;
international, ``+82 10-...``), resident registration numbers, card numbers, each also when said as
Korean digit words (``공일공 일이삼사 오육칠팔``), and shortens Twilio call SIDs. ``start_logging``
puts it on every sink: loguru's, and the stdlib loggers (uvicorn's, the libraries under Pipecat)
routed into loguru. ``mask_stored`` is what the records database keeps of a caller's words.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from bot import languages

if TYPE_CHECKING:
    from loguru import Record

# Digits right after "3." are a fraction, never the start of a number below (a float in a log line).
# Resident registration number: 6 digits (birth date), hyphen, 7 digits.
_RRN = re.compile(r"(?<![0-9A-Za-z])(?<!\d\.)(\d{6})[- ]?([1-8])\d{6}(?![0-9A-Za-z])")
# International numbers: +country code, then groups (E.164 run together, or "+82 10-2222-3333", "+82 (10) ...").
_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}(?![0-9A-Za-z])")
# Domestic numbers: 010-1234-5678, 01012345678, 02 123 4567, (010)1234-5678, (02) 123-4567.
_PHONE = re.compile(r"(?<![0-9A-Za-z(])(?<!\d\.)\(?(0\d{1,2})\)?[- .]?(\d{3,4})[- .]?(\d{4})(?![0-9A-Za-z])")
# Card numbers: 15-16 digits in groups (4-4-4-4, 4-6-5) or run together.
_CARD = re.compile(r"(?<![0-9A-Za-z])(?<!\d\.)(\d{4})[- ]?(?:\d{4}[- ]?\d{4}[- ]?\d{4}|\d{6}[- ]?\d{5})(?![0-9A-Za-z])")
# Twilio SIDs are not personal, but a CallSid ties logs to a caller's phone record.
_SID = re.compile(r"\b(CA|AC)([0-9a-fA-F]{4})[0-9a-fA-F]{28}\b")
# Digits said as words in the line's first language ("이 공 일 공"): masked like numerals.
DIGIT_WORDS = languages.get(languages.FIRST).digit_words()
_WORDS = "".join(DIGIT_WORDS)
# Six or more digit words in a row ("공일공 일이삼사 오육칠팔"), spaces, commas and hyphens between.
_WORD_RUN = re.compile(rf"[{_WORDS}](?:[\s,.\-]*[{_WORDS}](?!요)){{5,}}")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")


def _stars(text: str, keep_head: int, keep_tail: int = 2) -> str:
    """``text`` with its digits starred but the first ``keep_head`` and the last ``keep_tail``."""
    total = sum(c.isdigit() for c in text)
    out, seen = [], 0
    for c in text:
        if c.isdigit():
            seen += 1
            if keep_head < seen <= total - keep_tail:
                c = "*"
        out.append(c)
    return "".join(out)


def _intl(m: re.Match) -> str:
    digits = sum(c.isdigit() for c in m.group(0))
    return _stars(m.group(0), keep_head=2) if 8 <= digits <= 15 else m.group(0)


def _mask_numerals(text: str, *, phones: bool = True) -> str:
    text = _CARD.sub(lambda m: f"{m.group(1)}-****-****-****", text)
    text = _RRN.sub(lambda m: f"{m.group(1)}-{m.group(2)}******", text)
    if phones:
        text = _INTL.sub(_intl, text)
        text = _PHONE.sub(lambda m: f"{m.group(1)}-****-{m.group(3)[-2:].rjust(4, '*')}", text)
    return text


def _digit_word_runs(text: str) -> list[tuple[int, int, str]]:
    """Runs of six or more spoken digits: (start, end, their digits).

    A last "이" glued to a Hangul ending ("...오육칠팔이에요", "it is ...8") is the copula, not a 2.
    """
    runs = []
    for m in _WORD_RUN.finditer(text):
        start, end = m.span()
        if text[end - 1] == "이" and end < len(text) and _HANGUL.match(text[end]) and text[end] not in DIGIT_WORDS:
            end -= 1
        runs.append((start, end, "".join(DIGIT_WORDS[c] for c in text[start:end] if c in DIGIT_WORDS)))
    return runs


def _mask_spoken(text: str, *, phones: bool) -> str:
    """Spoken digits that make a personal number, replaced by that number masked."""
    for start, end, digits in reversed(_digit_word_runs(text)):
        masked = _mask_numerals(digits, phones=phones)
        if masked != digits:
            text = text[:start] + masked + text[end:]
    return text


def mask(text: Any) -> str:
    """Mask phone, resident registration and card numbers (also as digit words); shorten call SIDs.

    The one masking function of every log line and of the APIs that show a caller's words
    (``/api/turns``, the desk). Anything that is not a string is masked as its ``str``.
    """
    text = text if isinstance(text, str) else str(text)
    if not text:
        return text
    text = _SID.sub(lambda m: f"{m.group(1)}{m.group(2)}…", text)
    if _HANGUL.search(text):
        text = _mask_spoken(text, phones=True)
    return _mask_numerals(text)


def mask_turn(record: dict[str, Any]) -> dict[str, Any]:
    """A turn record as an API may show it: the caller's and the bot's words, slot values and errors masked."""
    out = dict(record)
    for key in ("transcript", "reply", "error"):
        if isinstance(out.get(key), str):
            out[key] = mask(out[key])
    if isinstance(out.get("slots"), dict):
        out["slots"] = {k: mask(v) if isinstance(v, str) else v for k, v in out["slots"].items()}
    return out


def mask_stored(text: str) -> str:
    """What may be stored of a caller's words: resident registration and card numbers masked.

    A number said as digit words ("팔 공 공 일 ...") is masked too, when its digits form one of
    those numbers. Phone numbers and reception numbers are kept (call-backs, status questions).
    """
    if not text:
        return text
    text = _mask_numerals(text, phones=False)
    return _mask_spoken(text, phones=False)


# --- logging ----------------------------------------------------------------------------------------

# Pipecat logs the whole LLM context (every caller turn so far) at DEBUG on every model call. Off unless a
# developer asks for it by this, Pipecat's own variable: PIPECAT_LOG_LLM_CONTEXT=full run_bot.py -v
LLM_CONTEXT_ENV = "PIPECAT_LOG_LLM_CONTEXT"


def install_log_masking() -> None:
    """Route every loguru record's message through ``mask`` (sinks added later included)."""
    from loguru import logger

    logger.configure(patcher=_mask_record)


def _mask_record(record: Record) -> None:
    record["message"] = mask(record["message"])


class StdlibToLoguru(logging.Handler):
    """The stdlib's log records (uvicorn, httpx, websockets, aiortc...) into loguru, so they are masked too."""

    def emit(self, record: logging.LogRecord) -> None:
        from loguru import logger

        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        # The line is attributed to the stdlib logger's caller (uvicorn, websockets...), not to logging itself.
        frame: FrameType | None = sys._getframe(0)
        depth = 0
        while frame is not None and (depth == 0 or frame.f_code.co_filename == logging.__file__):
            frame, depth = frame.f_back, depth + 1
        logger.opt(depth=depth, exception=record.exc_info).log(level, "{}", record.getMessage())


def route_stdlib_logging(level: int = logging.WARNING) -> None:
    """Every stdlib logger to loguru: one handler on the root; loggers with handlers of their own propagate."""
    root = logging.getLogger()
    root.handlers = [StdlibToLoguru()]
    root.setLevel(level)
    for name in list(logging.root.manager.loggerDict):
        lg = logging.getLogger(name)
        if lg.handlers:  # e.g. uvicorn's own stream handlers, if something configured them: ours instead
            lg.handlers = []
            lg.propagate = True


def _masked_stderr(message: object) -> None:
    # The whole formatted line, the exception's traceback included (diagnose is off: no variable values).
    sys.stderr.write(mask(str(message)))


def start_logging(verbose: bool) -> None:
    """A command's logging: masked lines on stderr, DEBUG with ``-v``; the stdlib's loggers routed in.

    Pipecat's per-turn LLM context dump stays out unless env PIPECAT_LOG_LLM_CONTEXT says ``full``.
    """
    from loguru import logger

    os.environ.setdefault(LLM_CONTEXT_ENV, "off")
    logger.remove()
    install_log_masking()
    logger.add(_masked_stderr, level="DEBUG" if verbose else "INFO", colorize=sys.stderr.isatty(),
               backtrace=False, diagnose=False)
    route_stdlib_logging(logging.INFO if verbose else logging.WARNING)
