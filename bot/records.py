"""Per-call turn records: an observer stamps what passes through the pipeline.

The processors that know things frames do not carry (the LLM's request and first token, the
route, the STT guards) write into ``CallRecorder.current`` directly; everything else is read
off the frames by ``TurnObserver``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    InterruptionFrame,
    TTSAudioRawFrame,
    UserStoppedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection

from bot.latency import TurnRecord


class CallRecorder:
    """Holds one call's turn records; turn 0 is the greeting."""

    def __init__(self, call_id: str, *, qa: bool = False, on_turn_done: Callable[[TurnRecord], None] | None = None):
        self.call_id = call_id
        self.qa = qa
        self.started = time.time()
        self.records: list[TurnRecord] = []
        self._on_turn_done = on_turn_done
        self._pending_vad_stop: float | None = None
        self._pending_speech_end: float | None = None
        self._pending_stt: dict = {}
        self.stt_rejects: list[str] = []
        self.bot_speaking = False
        self.current = self._new("greeting")

    def _new(self, route: str) -> TurnRecord:
        rec = TurnRecord(call_id=self.call_id, index=len(self.records), route=route, qa=self.qa)
        self.records.append(rec)
        return rec

    # --- events -------------------------------------------------------------------------------

    def vad_stopped(self, timestamp: float, stop_secs: float) -> None:
        self._pending_vad_stop = timestamp
        self._pending_speech_end = timestamp - stop_secs

    def stt_result(self, audio_secs: float, transcribe_ms: float, rtf: float, rejected: str | None = None) -> None:
        """A VAD segment was transcribed (or rejected): the latest one times the turn's STT."""
        self._pending_stt = {"stt_done": time.time(), "stt_audio_secs": audio_secs, "stt_ms": transcribe_ms,
                             "stt_rtf": rtf}
        if rejected:
            self.stt_rejects.append(rejected)

    def user_turn_ended(self, t: float) -> TurnRecord:
        """The caller's turn is over: open the record for the bot's answer."""
        self._finish(self.current)
        rec = self._new("pending")
        rec.speech_end, rec.vad_stop = self._pending_speech_end, self._pending_vad_stop
        for k, v in self._pending_stt.items():
            setattr(rec, k, v)
        rec.turn_end = t
        self._pending_stt = {}
        self.current = rec
        return rec

    def _finish(self, rec: TurnRecord) -> None:
        if self._on_turn_done and rec.route != "pending":
            self._on_turn_done(rec)

    def close(self) -> None:
        self._finish(self.current)

    def write_jsonl(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{time.strftime('%Y%m%d', time.localtime(self.started))}.jsonl"
        with path.open("a", encoding="utf-8") as f:
            for rec in self.records:
                f.write(json.dumps(rec.to_dict(), ensure_ascii=False) + "\n")
        return path


class TurnObserver(BaseObserver):
    """Reads turn timing off the frames (first push of each frame only)."""

    def __init__(self, recorder: CallRecorder):
        super().__init__(observe_every_push=False)
        self._rec = recorder

    async def on_push_frame(self, data: FramePushed):
        frame = data.frame
        now = time.time()
        rec = self._rec
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            rec.vad_stopped(frame.timestamp, frame.stop_secs)
        elif isinstance(frame, UserStoppedSpeakingFrame) and data.direction == FrameDirection.DOWNSTREAM:
            # The aggregator broadcasts it both ways: one turn end, one record.
            rec.user_turn_ended(now)
        elif isinstance(frame, TTSAudioRawFrame):
            rec.current.mark("tts_first_audio", now)
        elif isinstance(frame, BotStartedSpeakingFrame):
            rec.bot_speaking = True
            rec.current.mark("first_audio_out", now)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            rec.bot_speaking = False
        elif isinstance(frame, InterruptionFrame) and rec.bot_speaking:
            rec.current.interrupted = True
            logger.debug("call {}: turn {} interrupted by the caller", rec.call_id, rec.current.index)
