"""Per-call turn records, filled from the frames that pass through the pipeline.

``CallRecorder`` holds a call's records and hands each to the records database; ``TurnObserver``
fills them: timing from Pipecat's own frames (VAD, turns, audio), and what the stages decided or
measured from the frames they push to say so (``bot/telemetry/turn_facts.py``). A stock Pipecat
STT or LLM says nothing of the kind (the bench's baseline): its standard frames are read instead.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

import numpy as np
from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from bot.telemetry.latency import AUDIBLE_PEAK, TurnRecord
from bot.telemetry.tracing import trace_id_hex
from bot.telemetry.turn_facts import (
    AsksToRepeat,
    BackchannelHeardFrame,
    CannedPlayedFrame,
    DialogTurnFrame,
    EndpointChosenFrame,
    FactsFoundFrame,
    KeypadTurnFrame,
    LLMRequestFrame,
    LLMRequestWithdrawnFrame,
    SentenceReadyFrame,
    SpeechReadFrame,
    StageFailedFrame,
    TurnAnsweredFrame,
    TurnFactFrame,
    TurnMarkFrame,
    TurnOpenedFrame,
)


class CallRecorder:
    """Holds one call's turn records; turn 0 is the greeting.

    A record opens when the caller's turn starts, so everything that happens for that turn
    (VAD stops, STT, a speculative model call that starts before the turn ends) lands in it.
    """

    def __init__(self, call_id: str, *, qa: bool = False, sink: Callable[[dict], None] | None = None,
                 first_index: int = 0):
        self.call_id = call_id
        self.qa = qa
        self._sink = sink  # the records database (CallLog.turn): each turn as it is answered and closed
        # A resumed call (issue 46) goes on numbering the call's turns after the ones already recorded.
        self.first_index = first_index
        # What a worker resuming the call needs beyond the turn (the dialog's snapshot), saved with each turn.
        self.snapshot: Callable[[], dict] | None = None
        self.started = time.time()
        self.trace_id = trace_id_hex(call_id)  # the call's trace (telemetry.otlp_endpoint), in every record
        self.caller: str | None = None  # the caller's number (phone): the trace shows it masked
        self.records: list[TurnRecord] = []
        self.bot_speaking = False
        # Called once with the greeting's record when its first audio goes out (``ProcessMetrics.greeting_sent``).
        self.on_greeting: Callable[[TurnRecord], None] | None = None
        self.current = self._new("greeting")
        self.current.mark("stream_start", self.started)  # built when the media stream starts

    def _new(self, route: str) -> TurnRecord:
        rec = TurnRecord(call_id=self.call_id, index=self.first_index + len(self.records), route=route, qa=self.qa)
        self.records.append(rec)
        rec.trace_id = self.trace_id
        return rec

    # --- events -------------------------------------------------------------------------------

    def user_turn_started(self) -> TurnRecord:
        """The caller started a turn: close the previous record (interrupted if the bot was talking)."""
        if self.bot_speaking:
            self.current.interrupted = True
        return self.next_turn()

    def vad_stopped(self, timestamp: float, stop_secs: float) -> None:
        # The last pause of the turn is the one the caller waits after.
        self.current.mark("vad_stop", timestamp, overwrite=True)
        self.current.mark("speech_end", timestamp - stop_secs, overwrite=True)

    def stt_result(self, audio_secs: float | None, transcribe_ms: float | None, rtf: float | None) -> None:
        """A VAD segment was transcribed (or rejected): the latest one times the turn's STT."""
        rec = self.current
        rec.mark("stt_done", overwrite=True)
        rec.stt_audio_secs, rec.stt_ms, rec.stt_rtf = audio_secs, transcribe_ms, rtf

    def bot_started_speaking(self, t: float) -> None:
        """The bot's audio started: the answer's first audio out (only once it has a sentence: the tail
        of an interrupted reply is not this turn's answer)."""
        self.bot_speaking = True
        rec = self.current
        if rec.first_sentence is None or rec.first_audio_out is not None:
            return
        rec.mark("first_audio_out", t)
        if rec.route == "greeting" and self.on_greeting is not None:
            self.on_greeting(rec)

    def user_turn_ended(self, t: float) -> TurnRecord:
        self.current.mark("turn_end", t, overwrite=True)
        return self.current

    def next_turn(self) -> TurnRecord:
        """Close the current record and open the next (keys pressed on the phone pad make a turn too)."""
        self._finish(self.current)
        self.current = self._new("pending")
        return self.current

    def save(self, rec: TurnRecord) -> None:
        """Hand the turn to the records database (again when it changes: written by call and index)."""
        if self._sink is not None:
            self._sink({**rec.to_dict(), **({"dialog": self.snapshot()} if self.snapshot else {})})

    def _finish(self, rec: TurnRecord) -> None:
        if rec.route == "pending":
            rec.route = "no_reply"  # e.g. every segment was rejected by the STT guards
        self.save(rec)

    def close(self) -> None:
        self._finish(self.current)


def _hear(rec: TurnRecord, frame: TTSAudioRawFrame, now: float) -> None:
    """Until the answer's first audible sample: add this frame's silence to its lead, or mark it."""
    if rec.tts_first_audible is not None:
        return
    channels = max(1, frame.num_channels)
    samples = np.frombuffer(frame.audio[: len(frame.audio) // 2 * 2], dtype="<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) >= AUDIBLE_PEAK)
    before = loud[0] if loud.size else samples.size
    rec.lead_silence_ms = (rec.lead_silence_ms or 0.0) + before / channels / frame.sample_rate * 1000.0
    if loud.size:
        rec.lead_silence_ms = round(rec.lead_silence_ms, 1)
        rec.mark("tts_first_audible", now)


class TurnObserver(BaseObserver):
    """Fills the call's turn records from the frames it sees (first push of each frame only).

    ``stock_stt`` / ``stock_llm``: stock Pipecat services, which push no turn facts; their
    transcripts, responses and tokens time the turn instead (the bench's baseline, ``bot/app/stock.py``).
    """

    # How many handled frames ``caught_up`` remembers.
    _SEEN = 512

    def __init__(self, recorder: CallRecorder, *, stock_stt: FrameProcessor | None = None,
                 stock_llm: FrameProcessor | None = None,
                 sentence_names: dict[str, str] | None = None):
        super().__init__(observe_every_push=False)
        self._rec = recorder
        # Canned sentences' normalized text -> the name ``heard`` lists (model sentences: "reply");
        # None: ``heard`` is not kept (the stock baseline).
        self._names = sentence_names
        self._stock_stt, self._stock_llm = stock_stt, stock_llm
        self._runs: dict[int, TurnRecord] = {}  # dialog run -> the record it answers
        self._seen: deque[int] = deque(maxlen=self._SEEN)
        self._waiters: dict[int, asyncio.Event] = {}

    async def on_push_frame(self, data: FramePushed) -> None:
        frame = data.frame
        try:
            if isinstance(frame, TurnFactFrame):
                self._turn_fact(frame)
            else:
                self._timing(data)
                if data.source is self._stock_stt or data.source is self._stock_llm:
                    self._stock_frame(frame, data.source)
        except Exception as e:  # noqa: BLE001 - a bad fact must not stop the records of the rest of the call
            logger.exception("turn records: {} not recorded ({}: {})", frame, type(e).__name__, e)
        finally:
            self._seen.append(frame.id)
            waiter = self._waiters.pop(frame.id, None)
            if waiter is not None:
                waiter.set()

    async def caught_up(self, frame: Frame) -> None:
        """Wait until ``frame``'s push has been handled, and with it every push before it (observers
        run off a queue: the chat tool reads a turn's record once its reply's end frame is in)."""
        if frame.id in self._seen:
            return
        await self._waiters.setdefault(frame.id, asyncio.Event()).wait()

    # --- Pipecat's frames -----------------------------------------------------------------------

    def _timing(self, data: FramePushed) -> None:
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
        elif isinstance(frame, AsksToRepeat):
            rec.current.route = "unclear"
        elif isinstance(frame, TTSSpeakFrame) and rec.current.route == "unclear":
            rec.current.mark("first_sentence", now)  # the "say that again?" prompt
        elif isinstance(frame, TTSAudioRawFrame):
            # Only this turn's answer: the tail of an interrupted reply can still be in flight.
            if rec.current.first_sentence is not None:
                rec.current.mark("tts_first_audio", now)
                _hear(rec.current, frame, now)
        elif isinstance(frame, BotStartedSpeakingFrame):
            rec.bot_started_speaking(now)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            rec.bot_speaking = False

    def _stock_frame(self, frame: Frame, source: FrameProcessor) -> None:
        rec, now = self._rec, time.time()
        if isinstance(frame, TranscriptionFrame) and source is self._stock_stt:
            rec.stt_result(None, None, None)  # stock STT reports no timings; stt_done = now
        elif isinstance(frame, LLMFullResponseStartFrame) and source is self._stock_llm:
            cur = rec.current
            cur.llm_calls += 1
            cur.route = "llm"
            cur.mark("llm_request", now)
        elif isinstance(frame, LLMTextFrame) and source is self._stock_llm:
            rec.current.mark("llm_first_token", now)

    # --- what the stages say ----------------------------------------------------------------------

    def _turn_fact(self, frame: TurnFactFrame) -> None:
        if isinstance(frame, KeypadTurnFrame):
            self._runs[frame.run] = self._rec.next_turn()
        elif isinstance(frame, DialogTurnFrame):
            self._runs[frame.run] = self._rec.current
        rec = self._runs.get(frame.run) or self._rec.current
        if isinstance(frame, SentenceReadyFrame) and self._names is not None:
            rec.heard.append(self._names.get(frame.text, "reply"))
        _apply(frame, rec)
        if isinstance(frame, TurnAnsweredFrame) or rec is not self._rec.current:
            self._rec.save(rec)  # answered, or a late fact about a turn already closed (and saved)


def _apply(frame: TurnFactFrame, rec: TurnRecord) -> None:
    """Write one fact into its turn's record."""
    if isinstance(frame, DialogTurnFrame):
        if frame.transcript:
            rec.transcript = frame.transcript
        rec.line_open, rec.language = frame.line_open, frame.language
    elif isinstance(frame, KeypadTurnFrame):
        rec.transcript, rec.line_open, rec.language = frame.transcript, frame.line_open, frame.language
    elif isinstance(frame, SpeechReadFrame):
        if rec.first_audio_out is None:  # not speech over the reply (see TurnRecord.mark)
            rec.mark("stt_done", frame.t, overwrite=True)
            rec.stt_audio_secs, rec.stt_ms, rec.stt_rtf = frame.audio_secs, frame.transcribe_ms, frame.rtf
        if frame.language_p is not None:
            rec.language_p = round(frame.language_p, 3)
    elif isinstance(frame, SentenceReadyFrame):
        rec.tts_synth_ms.append(round(frame.synth_ms, 1))
    elif isinstance(frame, FactsFoundFrame):
        rec.retrieval_ms, rec.facts = frame.retrieval_ms, list(frame.facts)
        if frame.directory_hit is not None:
            rec.answer_source = frame.directory_hit
    elif isinstance(frame, LLMRequestFrame):
        rec.llm_calls += 1
        rec.mark("llm_request", frame.t, overwrite=True)
    elif isinstance(frame, LLMRequestWithdrawnFrame):
        rec.llm_calls -= 1
        rec.llm_cancelled_calls += 1
    elif isinstance(frame, TurnMarkFrame):
        rec.mark(frame.mark, frame.t, overwrite=frame.overwrite)
    elif isinstance(frame, TurnOpenedFrame):
        if frame.said:
            rec.mark("first_sentence", frame.t)
        rec.line_open = frame.line_open
        rec.route = frame.route or rec.route
        rec.reply = frame.reply if frame.reply is not None else rec.reply
        rec.ai_notice = rec.ai_notice or frame.ai_notice
    elif isinstance(frame, EndpointChosenFrame):
        rec.endpoint_kind, rec.endpoint_wait_ms = frame.kind, frame.wait_ms
    elif isinstance(frame, BackchannelHeardFrame):
        rec.backchannels += 1
    elif isinstance(frame, StageFailedFrame):
        rec.error = rec.error or frame.error
    elif isinstance(frame, CannedPlayedFrame):
        rec.heard.append(frame.sentence)
    elif isinstance(frame, TurnAnsweredFrame):
        rec.route = frame.route
        for name in ("intent", "flow", "escalation", "answer_source", "slots", "error"):
            value = getattr(frame, name)
            if value is not None:
                setattr(rec, name, value)
        rec.reply_chars, rec.reply = len(frame.reply), frame.reply
