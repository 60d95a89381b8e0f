"""Twilio phone path: the signed voice webhook's TwiML, the media stream's start, and the serializer.

Nobody opens a call on our GPU without going through the signed webhook: the webhook issues a
one-time token bound to the CallSid (signed and expiring, ``bot/line/tokens.py``; its single use is
kept in the records database, ``bot/line/admission.py``, so any worker can take the media stream), and the
media stream must present it in ``customParameters``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from loguru import logger
from pipecat.audio.resamplers.soxr_stream_resampler import SOXRStreamAudioResampler
from pipecat.audio.utils import ulaw_to_pcm
from pipecat.frames.frames import AudioRawFrame, CancelFrame, EndFrame, Frame, InputAudioRawFrame, InterruptionFrame
from pipecat.serializers.twilio import TwilioFrameSerializer
from twilio.request_validator import RequestValidator
from twilio.twiml.voice_response import Connect, Dial, Parameter, Stream, VoiceResponse

from bot import languages
from bot.aftercall.twilio_api import TwilioAPI, TwilioAPIError
from bot.privacy import mask

TWILIO_RATE = 8000
# Twilio's messages are well under 1 KiB (a 20 ms media frame is ~300 bytes); bigger ones are dropped.
MAX_MESSAGE_CHARS = 64 * 1024
EXPECTED_FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}


def build_stream_twiml(public_host: str, token: str, *, callback: bool = False, action: str | None = None,
                       segment: int = 0) -> str:
    """TwiML that connects the call to our media-stream WebSocket, carrying the call's token
    (``callback``: a callback we placed; the server looks its row up by the CallSid).

    ``action``: the URL Twilio requests when the stream ends, the call still up (``bot/store/segments.py``);
    ``segment``: which of the call's streams this is (0: the webhook's; more: a resume).
    """
    response = VoiceResponse()
    connect = Connect(action=action, method="POST") if action else Connect()
    stream = Stream(url=f"wss://{public_host}/twilio/media")
    stream.append(Parameter(name="token", value=token))
    if callback:
        stream.append(Parameter(name="callback", value="1"))
    if segment:
        stream.append(Parameter(name="seg", value=str(segment)))
    connect.append(stream)
    response.append(connect)
    return str(response)


def build_say_twiml(message: str, language: str = languages.FIRST) -> str:
    """``message`` said by Twilio in ``language`` (a line language code), then hang up (an
    answering machine's message)."""
    response = VoiceResponse()
    response.say(message, language=languages.get(language).say_voice)  # bot/languages/<code>/
    response.hangup()
    return str(response)


def build_hangup_twiml() -> str:
    """The call is over: ``<Hangup/>`` (the action route's answer to a call the bot ended)."""
    response = VoiceResponse()
    response.hangup()
    return str(response)


def build_busy_twiml(message: str | None = None) -> str:
    """TwiML for a call we cannot take: ``message`` spoken by Twilio in Korean, then hang up.

    Without a message: a busy signal (``<Reject reason="busy">``).
    """
    response = VoiceResponse()
    if message:
        response.say(message, language="ko-KR")
        response.hangup()
    else:
        response.reject(reason="busy")
    return str(response)


def signature_is_valid(auth_token: str, url: str, params: dict[str, str], signature: str | None) -> bool:
    """Check ``X-Twilio-Signature`` against the URL Twilio called and the form fields."""
    if not signature:
        return False
    return RequestValidator(auth_token).validate(url, params, signature)


@dataclass
class StreamStart:
    """What a Twilio media stream says about itself in its ``start`` message."""

    stream_sid: str
    call_sid: str
    account_sid: str
    media_format: dict
    custom_parameters: dict = field(default_factory=dict)


class StreamProtocolError(ValueError):
    """The first messages of a media stream are not what Twilio sends.

    The message names what is wrong (a field's type and size, or a short word such as an event
    name), never what was sent: it is safe to log.
    """


START_MESSAGES = 2  # Twilio sends `connected`, then `start`
_SID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # Twilio's SIDs: two letters and 32 hex digits
_WORD_RE = re.compile(r"^[A-Za-z_]{1,24}$")
_FORMAT_RE = re.compile(r"^[A-Za-z0-9/.+-]{1,32}$")  # audio/x-mulaw
_PARAM_MAX = 64  # customParameters entries (the stream TwiML sets two or three)


async def read_stream_start(receive: Callable[[], Awaitable[Mapping[str, Any]]], *, max_bytes: int) -> StreamStart:
    """Read a media stream's first messages (ASGI ``websocket.receive`` events) up to its ``start``.

    At most ``START_MESSAGES`` text messages and ``max_bytes`` bytes in all; anything else (a binary
    frame, more bytes, a close, a ``start`` of any other shape) raises ``StreamProtocolError``.
    """
    texts: list[str] = []
    size = 0
    while len(texts) < START_MESSAGES:
        event = await receive()
        if event.get("type") == "websocket.disconnect":
            raise StreamProtocolError("closed before its start")
        text = event.get("text")
        if not isinstance(text, str):
            raise StreamProtocolError("a binary message before its start")
        size += len(text.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise StreamProtocolError(f"more than {max_bytes} bytes before its start (server.media_prestart_max_bytes)")
        texts.append(text)
        if '"start"' in text:
            break
    return parse_stream_start(texts)


def _what(value: object) -> str:
    """A value named for a log line: a short word as it is (an event name), else only its type and size."""
    if isinstance(value, str):
        return repr(value) if _WORD_RE.match(value) else f"a string of {len(value)} chars"
    return type(value).__name__


def parse_stream_start(messages: list[str]) -> StreamStart:
    """Parse Twilio's ``connected`` + ``start`` messages (the first two on the socket).

    Every field is checked for its type: SIDs are short strings of letters, digits and ``_.-``,
    ``mediaFormat`` an object, ``customParameters`` an object of strings.
    """
    parsed = []
    for raw in messages:
        try:
            msg = json.loads(raw)
        except (ValueError, TypeError, RecursionError) as e:  # JSONDecodeError is a ValueError
            what = "nested too deeply" if isinstance(e, RecursionError) else "not JSON"
            raise StreamProtocolError(f"malformed JSON message ({what}, {len(str(raw))} chars)") from None
        if not isinstance(msg, dict):
            raise StreamProtocolError(f"message is not a JSON object ({type(msg).__name__})")
        parsed.append(msg)
    start = next((m for m in parsed if m.get("event") == "start"), None)
    if start is None:
        events = [_what(m.get("event")) for m in parsed]
        raise StreamProtocolError(f"expected connected/start, got events [{', '.join(events)}]")
    body = start.get("start")
    if not isinstance(body, dict):
        raise StreamProtocolError(f"start message has no 'start' object ({_what(body)})")
    stream_sid = start.get("streamSid") or body.get("streamSid")
    call_sid = body.get("callSid")
    if not stream_sid or not call_sid:
        raise StreamProtocolError("start message lacks streamSid or callSid")
    for name, value in (("streamSid", stream_sid), ("callSid", call_sid), ("accountSid", body.get("accountSid", "AC"))):
        if not isinstance(value, str) or not _SID_RE.match(value):
            raise StreamProtocolError(f"start message's {name} is not a SID ({_what(value)})")
    media_format = body.get("mediaFormat") or {}
    if not isinstance(media_format, dict):
        raise StreamProtocolError(f"start message's mediaFormat is not an object ({_what(media_format)})")
    params = body.get("customParameters") or {}
    if not isinstance(params, dict):
        raise StreamProtocolError(f"start message's customParameters is not an object ({_what(params)})")
    if len(params) > _PARAM_MAX or not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
        raise StreamProtocolError("start message's customParameters are not names and strings")
    return StreamStart(
        stream_sid=stream_sid,
        call_sid=call_sid,
        account_sid=body.get("accountSid", ""),
        media_format=media_format,
        custom_parameters=params,
    )


def media_format_problem(media_format: dict) -> str | None:
    """None when the stream is 8 kHz mono mu-law, else what is wrong with it."""
    for key, want in EXPECTED_FORMAT.items():
        if media_format.get(key) != want:
            got = media_format.get(key)
            shown = got if isinstance(got, int) else repr(got) if isinstance(got, str) and _FORMAT_RE.match(got) \
                else _what(got)
            return f"unsupported mediaFormat {key}={shown} (want {want!r})"
    return None


class Handover(Protocol):
    """What the serializer asks of its call at the call's edges (``bot.app.phone``): one object, not callbacks."""

    async def caller_hung_up(self) -> None:
        """Twilio's ``stop``: the caller hung up."""
        ...

    async def bot_ends(self) -> None:
        """The bot ends the call (an EndFrame): awaited before the hang-up or the stream's close, so that
        the <Connect>'s action, asked once the stream closes, reads that the bot ended it (issue 46)."""
        ...

    def transfer_number(self) -> str | None:
        """Where the call goes at its end (a transfer), or None: hang up."""
        ...

    def transfer_twiml(self, number: str) -> str:
        """The TwiML that hands the call to ``number``."""
        ...


class PhoneSerializer(TwilioFrameSerializer):
    """Twilio serializer that sends ``clear`` only when bot audio is actually playing.

    Stock Pipecat sends a ``clear`` on every user turn start, even to a silent line. We keep a
    clock of the audio handed to Twilio (the output transport sends faster than real time, so
    Twilio buffers it) and clear only while some of it is still unplayed: one ``clear`` per
    interruption. The input resampler is soxr "QQ", which returns 20 ms for 20 ms instead of the
    default VHQ stream resampler's ~100 ms bursts.
    """

    def __init__(
        self,
        *args: Any,
        fast_input_resampler: bool = True,
        handover: Handover | None = None,
        api: TwilioAPI | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._handover = handover
        self._api = api
        self._bot_ended = False
        self.caller_hung_up = False
        if fast_input_resampler:
            self._input_resampler = SOXRStreamAudioResampler(quality="QQ")
        self._playing_until = 0.0
        self.ignored: Counter[str] = Counter()  # malformed messages ignored, by kind
        self._last_seq: int | None = None

    def bot_audio_pending(self) -> bool:
        return time.monotonic() < self._playing_until

    async def serialize(self, frame: Frame) -> str | bytes | None:
        if isinstance(frame, InterruptionFrame):
            if not self.bot_audio_pending():
                return None
            self._playing_until = 0.0
            return await super().serialize(frame)
        if isinstance(frame, (EndFrame, CancelFrame)):
            if self.caller_hung_up:
                return None  # Twilio already ended the call; nothing to hang up
            handover = self._handover if isinstance(frame, EndFrame) else None
            if handover is not None and not self._bot_ended:
                self._bot_ended = True
                await handover.bot_ends()
            number = handover.transfer_number() if handover is not None else None
            if handover is not None and number and self._params.auto_hang_up and not self._hangup_attempted:
                self._hangup_attempted = True
                await self._redirect_call(handover.transfer_twiml(number))
                return None
            if not self._params.auto_hang_up:
                logger.info(
                    "call {}: no Twilio credentials (or auto hang-up off); skipping the REST hang-up, "
                    "closing the stream instead",
                    mask(self._call_sid or ""),
                )
                return None
        payload = await super().serialize(frame)
        if payload and isinstance(frame, AudioRawFrame):
            secs = len(frame.audio) / 2 / frame.sample_rate / max(frame.num_channels, 1)
            self._playing_until = max(self._playing_until, time.monotonic()) + secs
        return payload

    async def deserialize(self, data: str | bytes) -> Frame | None:
        """Twilio's messages after ``start``; anything outside the protocol is ignored and counted.

        Stock Pipecat lets a non-object JSON message or a bad base64 payload raise inside the
        receive loop, which ends the call, and logs every malformed message in full. Here each kind
        of bad message (``ignored``) is logged once per call and dropped: binary or oversized frames,
        invalid JSON, unknown events, a second ``start``, media with a bad payload, another stream's
        SID or a sequence number that goes backwards.
        """
        if isinstance(data, bytes):
            return self._ignore("binary frame")
        if len(data) > MAX_MESSAGE_CHARS:
            return self._ignore("oversized message")  # over MAX_MESSAGE_CHARS
        try:
            msg = json.loads(data)
        except (json.JSONDecodeError, RecursionError):
            return self._ignore("invalid JSON")
        if not isinstance(msg, dict):
            return self._ignore("JSON that is not an object")
        event = msg.get("event")
        if event == "media":
            return await self._media(msg)
        if event == "stop":
            # Twilio's `stop` (the caller hung up) is ignored by stock Pipecat; we end the call on it.
            self.caller_hung_up = True
            logger.info("call {}: Twilio sent stop (caller hung up)", mask(self._call_sid or ""))
            if self._handover is not None:
                await self._handover.caller_hung_up()
            return None
        if event == "dtmf":
            return await super().deserialize(data) if isinstance(msg.get("dtmf"), dict) else self._ignore("bad dtmf")
        if event in ("mark", "connected"):
            return None
        if event == "start":
            return self._ignore("duplicate start")
        return self._ignore("unknown event")

    async def _media(self, msg: dict) -> Frame | None:
        if msg.get("streamSid") not in (None, self._stream_sid):
            return self._ignore("media for another streamSid")
        seq = msg.get("sequenceNumber")
        if seq is not None:
            try:
                n = int(seq)
            except (TypeError, ValueError):
                return self._ignore("bad sequenceNumber")
            if self._last_seq is not None and n <= self._last_seq:
                return self._ignore("out-of-order sequenceNumber")
            self._last_seq = n
        media = msg.get("media")
        payload = media.get("payload") if isinstance(media, dict) else None
        if not isinstance(payload, str) or not payload:
            return self._ignore("media without a payload")
        try:
            ulaw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            return self._ignore("media payload is not base64")
        pcm = await ulaw_to_pcm(ulaw, self._twilio_sample_rate, self._sample_rate, self._input_resampler)
        if not pcm:
            return None
        return InputAudioRawFrame(audio=pcm, num_channels=1, sample_rate=self._sample_rate)

    def _ignore(self, kind: str) -> Frame | None:
        """Count a bad message; the first of each kind in a call is logged (a flood is one line). None: no frame
        (``return self._ignore(...)`` in ``deserialize``)."""
        if kind not in self.ignored:
            logger.warning("call {}: ignoring {} on the media stream (further ones are counted, not logged)",
                           mask(self._call_sid or ""), kind)
        self.ignored[kind] += 1
        return None

    async def _hang_up_call(self) -> None:
        """End the call through Twilio's REST API (``bot/aftercall/twilio_api.py``), once."""
        call = mask(self._call_sid or "")
        if self._api is None or self._call_sid is None:
            logger.warning("call {}: no Twilio REST client or no call; closing the stream instead of hanging up",
                           call)
            return
        try:
            if await self._api.hang_up(self._call_sid):
                logger.info("call {}: hung up through Twilio's API", call)
            else:
                logger.debug("call {}: already ended at Twilio", call)
        except TwilioAPIError as e:
            logger.error("call {}: hang-up failed: {}", call, e)

    async def _redirect_call(self, twiml: str) -> None:
        """Hand the call to new TwiML (a <Dial> to a person) through Twilio's REST API."""
        call = mask(self._call_sid or "")
        if self._api is None or self._call_sid is None:
            logger.error("call {}: transfer failed: no Twilio REST client or no call", call)
            return
        try:
            if await self._api.redirect(self._call_sid, twiml):
                logger.info("call {}: transferred to a person", call)
            else:
                logger.warning("call {}: transfer not made: the call had already ended", call)
        except TwilioAPIError as e:
            logger.error("call {}: transfer failed: {}", call, e)


def build_dial_twiml(number: str, whisper_url: str | None = None) -> str:
    """TwiML that connects the caller to a person at ``number``.

    With ``whisper_url`` the transfer is warm: when the person answers, Twilio plays them the TwiML
    at that URL (``build_whisper_twiml``: who is calling and why) before the caller is connected.
    """
    response = VoiceResponse()
    if whisper_url:
        dial = Dial()
        dial.number(number, url=whisper_url, method="POST")
        response.append(dial)
    else:
        response.dial(number)
    return str(response)


def build_whisper_twiml(summary: str) -> str:
    """What the person taking a transfer hears before the caller: the bot's summary, in Korean."""
    response = VoiceResponse()
    response.say(summary, language="ko-KR")
    return str(response)
