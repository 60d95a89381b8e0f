"""The QA page's live view of a call: transcript, sentences and turn records over RTVI.

Live data for the page rides the WebRTC data channel as RTVI ``server-message``s (the worker has
RTVI on when ``qa=True``)::

    {"label": "rtvi-ai", "type": "server-message", "data": {"qa": KIND, ...}}

    {"qa": "call", "call_id": "…"}                                  on connect
    {"qa": "transcript", "turn": N, "text": "…"}                       each final STT segment
    {"qa": "reply", "turn": N, "text": "…"}                            each sentence, once played
    {"qa": "turn", "turn": N, "route": "llm", "intent": …, "flow": …,  when turn N's first audio
     "slots": {…}, "interrupted": false, "error": null,                goes out, and again each time
     "voice_to_voice_ms": 812.0, "stages_ms": {…},                     it changed (LLM answer done,
     "record": {TurnRecord.to_dict()}}                                 bot stopped, caller spoke)

Turn N is the index of the ``TurnRecord`` (0 is the greeting; a caller's turn and the bot's answer
share one record); the page updates its row in place. The route is often still "pending" at first
audio: the LLM stage sets route, intent and slots when its JSON is complete, after the first
sentence is already playing, hence the updates. The page also shows Pipecat's standard RTVI
speaking events.
"""

from __future__ import annotations

import json
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    LLMFullResponseEndFrame,
    TranscriptionFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.transports.base_output import BaseOutputTransport

from bot.call.session import CallSession
from bot.core.deadline import within
from bot.telemetry.latency import TurnRecord

# Frames after which a turn record may have changed (route and slots come with the LLM's end).
_TURN_EVENTS = (LLMFullResponseEndFrame, BotStoppedSpeakingFrame, UserStartedSpeakingFrame, UserStoppedSpeakingFrame)
_CATCH_UP_SECS = 1.0


class QALiveObserver(BaseObserver):
    """Sends the caller's transcript, the bot's sentences and per-turn records to the QA page.

    Created before the call's worker exists (``build_call`` takes observers); ``attach`` it to the
    session once built. Reads the call's ``CallRecorder`` and writes nothing to it: observers run
    in separate tasks, so before it reads a turn it waits until the session's ``TurnObserver`` has
    handled the same frame (``caught_up``).
    """

    def __init__(self) -> None:
        # Every push, not only the first: a sentence counts as spoken when the output transport
        # passes its TTSTextFrame on, after the sentence's audio (the TTS runs ahead of playout,
        # and the sentences an interruption drops are never played).
        super().__init__(observe_every_push=True)
        self._session: CallSession | None = None
        self._sent: dict[int, str] = {}

    def attach(self, session: CallSession) -> None:
        self._session = session

    async def send(self, data: dict[str, Any]) -> None:
        session = self._session
        if session is None:
            return
        try:
            payload = json.loads(json.dumps(data, ensure_ascii=False, default=str))
            await session.worker.rtvi.send_server_message(payload)
        except Exception as e:  # the page is a view: never let it break the call
            logger.debug("QA page message not sent: {}", e)

    async def on_push_frame(self, data: FramePushed) -> None:
        if self._session is None:
            return
        frame = data.frame
        if isinstance(frame, TTSTextFrame):
            if isinstance(data.source, BaseOutputTransport) and frame.text.strip():
                rec = self._session.recorder
                await self.send({"qa": "reply", "turn": rec.current.index, "text": frame.text.strip()})
            return
        if not data.first_push:
            return
        # Broadcast frames (BotStarted/StoppedSpeaking) come in pairs: report the downstream one.
        if frame.broadcast_sibling_id is not None and data.direction != FrameDirection.DOWNSTREAM:
            return
        rec = self._session.recorder
        if isinstance(frame, TranscriptionFrame):
            # The caller's turn opened its record when it started (CallRecorder.user_turn_started).
            if frame.text.strip():
                await self.send({"qa": "transcript", "turn": rec.current.index, "text": frame.text.strip()})
        elif isinstance(frame, (BotStartedSpeakingFrame, *_TURN_EVENTS)):
            await self._caught_up(frame)
            await self.send_turns()

    async def _caught_up(self, frame: Frame) -> None:
        """Until the records hold what ``frame`` says (a view never waits long on them)."""
        if self._session is None:
            return
        try:
            await within(self._session.turns.caught_up(frame), _CATCH_UP_SECS)
        except TimeoutError:
            logger.debug("QA page: turn records behind {}; sent as they are", frame)

    async def send_turns(self) -> None:
        """The last two turn records, each when it changed since it was last sent.

        The previous one too: a barge-in marks it interrupted just as the next turn opens.
        """
        if self._session is None:
            return
        for rec in self._session.recorder.records[-2:]:
            await self._send_turn(rec)

    async def _send_turn(self, rec: TurnRecord) -> None:
        stages = rec.stages_ms()
        msg = {
            "qa": "turn",
            "turn": rec.index,
            "route": rec.route,
            "intent": rec.intent,
            "flow": rec.flow,
            "slots": dict(rec.slots),
            "interrupted": rec.interrupted,
            "error": rec.error,
            "voice_to_voice_ms": stages.get("voice_to_voice"),
            "stages_ms": stages,
            "record": rec.to_dict(),  # everything else the record holds (timestamps, STT, endpointing)
        }
        key = json.dumps(msg, sort_keys=True, default=str)
        if self._sent.get(rec.index) == key:
            return
        self._sent[rec.index] = key
        await self.send(msg)
