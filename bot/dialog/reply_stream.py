"""Streaming helpers for the structured LLM turn: pull the spoken reply out of the JSON as it is
generated, and cut it into sentences for the TTS.

``ReplyFieldExtractor`` is an incremental JSON scanner: fed the streamed content chunks, it
returns the newly decoded characters of the top-level ``"reply"`` string, and nothing else (no
braces, quotes, escapes, field names or other fields). ``parse_turn`` parses the whole text once
the stream ends. ``KoreanSentenceSplitter`` turns the reply characters into complete sentences
as early as they are known to be complete.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["KoreanSentenceSplitter", "ReplyFieldExtractor", "TurnParseError", "parse_turn"]


class TurnParseError(ValueError):
    """The model's output is not one JSON object; ``text`` is what was received."""

    def __init__(self, message: str, text: str):
        super().__init__(message)
        self.text = text


_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")
_WS = frozenset(" \t\r\n")
_REPLACEMENT = "\ufffd"


class ReplyFieldExtractor:
    """Incremental extractor of one top-level string field (``reply``) of a streamed JSON object.

    Text before the first ``{`` (a code fence, a stray think tag) and after the top-level object
    closes is ignored. A field of that name inside a nested object or array does not count, nor
    does the text ``"reply"`` inside another string. Escapes (``\\"``, ``\\\\``, ``\\/``, ``\\n``,
    ``\\t``, ``\\uXXXX`` with surrogate pairs) may be split across chunks at any position; a
    lone surrogate decodes to U+FFFD.
    """

    def __init__(self, field: str = "reply"):
        self.field = field
        self._raw: list[str] = []
        self._reply: list[str] = []
        self._stack: list[str] = []
        self._started = False  # saw the top-level "{"
        self._closed = False  # the top-level object ended
        self._expect_key = False  # next top-level string is a key
        self._last_key: str | None = None
        self._value_for: str | None = None  # key whose value comes next (after ":")
        self._reply_started = False
        self._done = False
        # string scanning
        self._in_str = False
        self._kind = ""  # "key" | "reply" | "skip"
        self._key_buf: list[str] = []
        self._esc = False
        self._hex: str | None = None
        self._high: int | None = None  # pending high surrogate

    # --- public -------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True once the reply string has closed."""
        return self._done

    @property
    def started(self) -> bool:
        """True once the reply string has opened (its first character may still be pending)."""
        return self._reply_started

    @property
    def reply(self) -> str:
        """All reply characters returned so far."""
        return "".join(self._reply)

    @property
    def text(self) -> str:
        """All raw text fed so far."""
        return "".join(self._raw)

    def feed(self, chunk: str) -> str:
        """Consume a chunk of the streamed JSON; return the newly decoded reply characters."""
        if not chunk:
            return ""
        self._raw.append(chunk)
        if self._closed:
            return ""
        out: list[str] = []
        for ch in chunk:
            if self._in_str:
                self._string_char(ch, out)
            elif self._started:
                if self._closed:
                    break
                self._structure_char(ch)
            elif ch == "{":
                self._started = True
                self._stack.append("{")
                self._expect_key = True
        text = "".join(out)
        if text:
            self._reply.append(text)
        return text

    def finish(self, full_text: str | None = None) -> dict[str, Any]:
        """Parse the whole output (``full_text``, else everything fed) with ``parse_turn``."""
        return parse_turn(self.text if full_text is None else full_text)

    # --- scanning -----------------------------------------------------------------------------

    def _structure_char(self, ch: str) -> None:
        top = len(self._stack) == 1
        if ch == '"':
            self._in_str = True
            self._esc = False
            self._hex = None
            self._high = None
            if top and self._expect_key:
                self._kind = "key"
                self._key_buf = []
            elif top and self._value_for == self.field and not self._reply_started:
                self._kind = "reply"
                self._reply_started = True
            else:
                self._kind = "skip"
            if top:
                self._value_for = None
        elif ch in "{[":
            if top:
                self._value_for = None
            self._stack.append(ch)
        elif ch in "}]":
            if self._stack:
                self._stack.pop()
            if not self._stack:
                self._closed = True
        elif top:
            if ch == ":":
                self._value_for = self._last_key
                self._expect_key = False
            elif ch == ",":
                self._expect_key = True
                self._value_for = None
            elif ch not in _WS:
                self._value_for = None  # a literal value (null, number, true)

    def _string_char(self, ch: str, out: list[str]) -> None:
        if self._hex is not None:
            if ch not in _HEX:  # malformed \u escape: drop it, rescan this character
                self._hex = None
                self._put(_REPLACEMENT, out)
                self._string_char(ch, out)
                return
            self._hex += ch
            if len(self._hex) == 4:
                cp = int(self._hex, 16)
                self._hex = None
                self._put_codepoint(cp, out)
            return
        if self._esc:
            self._esc = False
            if ch == "u":
                self._hex = ""
            else:
                self._put(_SIMPLE_ESCAPES.get(ch, ch), out)
            return
        if ch == "\\":
            self._esc = True
        elif ch == '"':
            self._end_string(out)
        else:
            self._put(ch, out)

    def _put_codepoint(self, cp: int, out: list[str]) -> None:
        if 0xD800 <= cp < 0xDC00:
            if self._high is not None:
                self._route(_REPLACEMENT, out)  # the earlier high surrogate was lone
            self._high = cp
        elif 0xDC00 <= cp < 0xE000:
            if self._high is None:
                self._put(_REPLACEMENT, out)
            else:
                high, self._high = self._high, None
                self._route(chr(0x10000 + ((high - 0xD800) << 10) + (cp - 0xDC00)), out)
        else:
            self._put(chr(cp), out)

    def _put(self, text: str, out: list[str]) -> None:
        if self._high is not None:
            self._high = None
            self._route(_REPLACEMENT, out)
        self._route(text, out)

    def _route(self, text: str, out: list[str]) -> None:
        if self._kind == "reply":
            out.append(text)
        elif self._kind == "key":
            self._key_buf.append(text)

    def _end_string(self, out: list[str]) -> None:
        if self._high is not None:
            self._high = None
            self._route(_REPLACEMENT, out)
        if self._hex is not None:
            self._hex = None
        self._in_str = False
        if self._kind == "key":
            self._last_key = "".join(self._key_buf)
            self._expect_key = False
        elif self._kind == "reply":
            self._done = True
        self._kind = ""


_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*|\s*```\s*$")


def parse_turn(text: str) -> dict[str, Any]:
    """Parse the model's whole output into a dict.

    Text before the first ``{`` is skipped (like ``ReplyFieldExtractor``); after the object only
    whitespace or a closing code fence may follow.

    Raises:
        TurnParseError: no object, invalid or truncated JSON, or trailing text.
    """
    s = text.strip()
    start = s.find("{")
    if start < 0:
        raise TurnParseError(f"no JSON object in model output: {text[:80]!r}", text)
    try:
        obj, end = json.JSONDecoder().raw_decode(s, start)
    except json.JSONDecodeError as e:
        raise TurnParseError(f"invalid JSON from model: {e}", text) from e
    rest = _FENCE_RE.sub("", s[end:]).strip()
    if rest:
        raise TurnParseError(f"unexpected text after the JSON object: {rest[:40]!r}", text)
    if not isinstance(obj, dict):  # pragma: no cover - raw_decode at "{" always gives a dict
        raise TurnParseError("model output is not a JSON object", text)
    return obj


# --- sentence splitting -----------------------------------------------------------------------

_TERMINATORS = frozenset(".?!。？！…")
_CLOSERS = frozenset("\"'”’)]」』>")
# Polite sentence-final endings, for splitting unpunctuated output.
FINAL_ENDINGS: tuple[str, ...] = (
    "니다", "습니까", "입니까", "십니까", "합니까", "됩니까",
    "어요", "아요", "에요", "예요", "세요", "까요", "게요", "네요", "래요", "지요", "죠",
)  # fmt: skip


class KoreanSentenceSplitter:
    """Cut streamed reply text into sentences for the TTS.

    A sentence ends after a run of ``. ? ! 。 ？ ！ …`` (plus closing quotes or brackets) that is
    followed by whitespace, or directly by another character; a ``.`` directly followed by an
    ASCII letter or digit does not end one (``1.5``, ``gov.kr``); commas never do (``15,000``).
    Unpunctuated text: once the pending text is longer than ``long_chars``, a polite sentence-
    final ending (``…니다``, ``…어요``, ``…세요``, ``…죠`` …) followed by a space also ends one.
    The result does not depend on how the text is chunked.
    """

    def __init__(self, long_chars: int = 40):
        self.long_chars = long_chars
        self._buf = ""

    @property
    def pending(self) -> str:
        return self._buf

    def push(self, text: str) -> list[str]:
        """Add text; return the sentences completed by it (stripped, in order)."""
        self._buf += text
        return self._drain(final=False)

    def flush(self) -> list[str]:
        """Return whatever is left (at most one sentence) and reset."""
        out = self._drain(final=True)
        rest = self._buf.strip()
        self._buf = ""
        if rest:
            out.append(rest)
        return out

    def reset(self) -> None:
        self._buf = ""

    def _drain(self, final: bool) -> list[str]:
        out: list[str] = []
        while True:
            self._buf = self._buf.lstrip()
            cut = self._find_cut(self._buf, final)
            if cut is None:
                return out
            sentence = self._buf[:cut].strip()
            self._buf = self._buf[cut:]
            if sentence:
                out.append(sentence)

    def _find_cut(self, buf: str, final: bool) -> int | None:
        n = len(buf)
        long = n > self.long_chars
        i = 0
        while i < n:
            ch = buf[i]
            if ch in _TERMINATORS:
                j = i
                while j < n and buf[j] in _TERMINATORS:
                    j += 1
                while j < n and buf[j] in _CLOSERS:
                    j += 1
                if j >= n:
                    return j if final else None  # the next character decides
                nxt = buf[j]
                if nxt.isspace():
                    return j
                if buf[i:j] == "." and nxt.isascii() and nxt.isalnum():
                    i = j  # 1.5, gov.kr
                    continue
                return j
            if long and ch.isspace() and i > 0 and buf.endswith(FINAL_ENDINGS, 0, i):
                return i
            i += 1
        return None
