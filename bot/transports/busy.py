"""The busy message as the phone's wire speaks it: 8 kHz μ-law media over a stream we cannot take.

A worker full or draining when a media stream arrives (the webhook was answered elsewhere, or before
the drain) says the busy message itself over the stream and closes it (``bot.app.routes.media``).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, Protocol

from loguru import logger
from starlette.websockets import WebSocket


class Speaker(Protocol):
    def synthesize(self, text: str, sample_rate: int, *, voice: str) -> Any: ...


class Models(Protocol):
    """What the busy message needs of the process's models: the TTS engine (a canned cache, when there is one)."""

    @property
    def tts(self) -> Speaker: ...


class BusyAudio:
    """The busy message as Twilio media (8 kHz μ-law), synthesized once on first use."""

    def __init__(self, models: Models, voice: str, text: str):
        self._models = models
        self._voice = voice
        self._text = text
        self._ulaw: bytes | None = None

    def _build(self) -> bytes:
        import audioop  # what pipecat uses for μ-law (stdlib through 3.12, audioop-lts after)

        canned = getattr(self._models, "canned_audio", None)
        hit = canned.get(self._text, 8000, self._voice) if canned is not None else None
        result = hit or self._models.tts.synthesize(self._text, 8000, voice=self._voice)
        return audioop.lin2ulaw(result.pcm, 2)

    async def ulaw(self) -> bytes:
        if self._ulaw is None:
            self._ulaw = await asyncio.to_thread(self._build)
        return self._ulaw


async def play_busy_and_close(websocket: WebSocket, stream_sid: str, audio: BusyAudio, *, reason: str) -> None:
    """Speak the busy message over a media stream we cannot take, then close it (Twilio ends the call)."""
    try:
        ulaw = await audio.ulaw()
        for i in range(0, len(ulaw), 160):
            payload = base64.b64encode(ulaw[i:i + 160]).decode("ascii")
            await websocket.send_text(json.dumps({"event": "media", "streamSid": stream_sid,
                                                  "media": {"payload": payload}}))
        await asyncio.sleep(len(ulaw) / 8000 + 0.3)  # Twilio plays it at real time
    except Exception as e:  # noqa: BLE001 - the caller may be gone already
        logger.warning("busy message over the stream failed: {}", e)
    try:
        await websocket.close(code=1000, reason=reason[:120])
    except Exception:  # noqa: BLE001
        pass
