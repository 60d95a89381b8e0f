"""Per-call turn records: an observer stamps what passes through the pipeline.

The processors that know things frames do not carry (the LLM's request and first token, the
route, the STT guards) write into ``CallRecorder.current`` directly; everything else is read
off the frames by ``TurnObserver``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection

from bot.telemetry.latency import TurnRecord
from processors.whisper_stt import UnclearSpeechFrame


class CallRecorder:
    """Holds one call's turn records; turn 0 is the greeting.

    A record opens when the caller's turn starts, so everything that happens for that turn
    (VAD stops, STT, a speculative model call that starts before the turn ends) lands in it.
    """

    def __init__(self, call_id: str, *, qa: bool = False, sink: Callable[[dict], None] | None = None):
        self.call_id = call_id
        self.qa = qa
        self._sink = sink  # the records database (CallLog.turn): each turn as it is answered and closed
        self.started = time.time()
        self.records: list[TurnRecord] = []
        self.bot_speaking = False
        self.current = self._new("greeting")

    def _new(self, route: str) -> TurnRecord:
        rec = TurnRecord(call_id=self.call_id, index=len(self.records), route=route, qa=self.qa)
        self.records.append(rec)
        return rec

    # --- events -------------------------------------------------------------------------------

    def user_turn_started(self) -> TurnRecord:
        """The caller started a turn: close the previous record (interrupted if the bot was talking)."""
        if self.bot_speaking:
            self.current.interrupted = True
        return self.keypad_turn()

    def vad_stopped(self, timestamp: float, stop_secs: float) -> None:
        # The last pause of the turn is the one the caller waits after.
        self.current.mark("vad_stop", timestamp, overwrite=True)
        self.current.mark("speech_end", timestamp - stop_secs, overwrite=True)

    def stt_result(self, audio_secs: float, transcribe_ms: float, rtf: float) -> None:
        """A VAD segment was transcribed (or rejected): the latest one times the turn's STT."""
        rec = self.current
        rec.mark("stt_done", overwrite=True)
        rec.stt_audio_secs, rec.stt_ms, rec.stt_rtf = audio_secs, transcribe_ms, rtf

    def tts_synthesized(self, result) -> None:
        """A sentence of the current answer was synthesized (``SynthResult``)."""
        self.current.tts_synth_ms.append(round(result.synth_ms, 1))

    def user_turn_ended(self, t: float) -> TurnRecord:
        self.current.mark("turn_end", t, overwrite=True)
        return self.current

    def keypad_turn(self) -> TurnRecord:
        """Close the current record and open the next (keys pressed on the phone pad make a turn too)."""
        self._finish(self.current)
        self.current = self._new("pending")
        return self.current

    def save(self, rec: TurnRecord) -> None:
        """Hand the turn to the records database (again when it changes: written by call and index)."""
        if self._sink is not None:
            self._sink(rec.to_dict())

    def _finish(self, rec: TurnRecord) -> None:
        if rec.route == "pending":
            rec.route = "no_reply"  # e.g. every segment was rejected by the STT guards
        self.save(rec)

    def close(self) -> None:
        self._finish(self.current)


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
        elif isinstance(frame, UserStartedSpeakingFrame) and data.direction == FrameDirection.DOWNSTREAM:
            # The aggregator broadcasts turn frames both ways: count one.
            rec.user_turn_started()
        elif isinstance(frame, UserStoppedSpeakingFrame) and data.direction == FrameDirection.DOWNSTREAM:
            rec.user_turn_ended(now)
        elif isinstance(frame, UnclearSpeechFrame):
            rec.current.route = "unclear"
        elif isinstance(frame, TTSSpeakFrame) and rec.current.route == "unclear":
            rec.current.mark("first_sentence", now)  # the "say that again?" prompt
        elif isinstance(frame, TTSAudioRawFrame):
            # Only this turn's answer: the tail of an interrupted reply can still be in flight.
            if rec.current.first_sentence is not None:
                rec.current.mark("tts_first_audio", now)
        elif isinstance(frame, BotStartedSpeakingFrame):
            rec.bot_speaking = True
            if rec.current.first_sentence is not None:
                rec.current.mark("first_audio_out", now)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            rec.bot_speaking = False
