"""What a call does at its edges: a silent caller, and a stage that raises (``guard_call``)."""

from __future__ import annotations

import asyncio

from loguru import logger
from pipecat.frames.frames import EndWorkerFrame, ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
from pipecat.processors.frame_processor import FrameProcessor

from bot.call.length import CallLengthLimit
from bot.call.session import CallSession
from bot.config import Config
from bot.dialog.policy import AfterFailure, StageFailure
from bot.dialog.state import CannedReplies
from bot.stages.supertonic import CannedAudio, SupertonicTTSService
from bot.stages.whisper import UnclearSpeechFrame
from bot.telemetry.turn_facts import BackchannelHeardFrame, CannedPlayedFrame, StageFailedFrame


def guard_call(session: CallSession, user_agg: LLMUserAggregator, config: Config, canned_audio: CannedAudio | None = None) -> None:
    """The edges of a call end in speech, never silence.

    * Idle caller: after ``call.idle_prompt_secs`` of silence (Pipecat's idle timer, which runs only
      while the bot waits for the caller) "여보세요, 듣고 계신가요?"; as long again: goodbye and hang-up.
    * The STT raising on a segment: the turn ends like unclear speech ("잘 못 들었습니다…").
    * The TTS raising on a sentence: the canned apology, played from memory at once (once per turn;
      not queued as a sentence: it would wait behind the failed answer's silent audio context).
    * A second turn with a failing stage: the polite end (opening hours), then hang-up.
    * ``call.max_minutes``: two minutes before, a callback or a text offered; at the limit, the polite end.

    What to say after a failure is the dialog policy's (``DialogPolicy.stage_failed``); the words are
    the call's language's (an English call hears "Hello, are you still there?").
    """
    CallGuard(session, config, canned_audio).attach(user_agg)


class CallGuard:
    """One call's guard: its event handlers and what they count."""

    def __init__(self, session: CallSession, config: Config, canned_audio: CannedAudio | None) -> None:
        self.session, self.config, self.canned_audio = session, config, canned_audio
        self.idle_prompts = 0  # idle timeouts since the caller last spoke
        self.failed_turns: set[int] = set()  # turns (record index) in which a stage raised
        self._length: asyncio.Task | None = None  # the call's clock (call.max_minutes)

    def attach(self, user_agg: LLMUserAggregator) -> None:
        """Handle the call's events: the caller's turns and silences, the STT's and TTS's errors."""
        user_agg.add_event_handler("on_user_turn_started", self._caller_spoke)
        user_agg.add_event_handler("on_user_backchannel", self._caller_acknowledged)
        user_agg.add_event_handler("on_user_turn_idle", self._caller_idle)
        self.session.stt.add_event_handler("on_error", self._stt_failed)
        self.session.tts.add_event_handler("on_error", self._tts_failed)
        self._limit = CallLengthLimit(policy=self.session.policy, dialog=self.session.dialog,
                                      max_minutes=self.config.call.max_minutes, push=user_agg.push_frame)
        self.session.worker.add_event_handler("on_pipeline_started", self._start_clock)
        self.session.worker.add_event_handler("on_pipeline_finished", self._stop_clock)

    async def _start_clock(self, *_args: object) -> None:
        self._length = asyncio.create_task(self._limit.run(), name=f"call-length-{self._call}")

    async def _stop_clock(self, *_args: object) -> None:
        if self._length is not None:
            self._length.cancel()

    @property
    def _call(self) -> str:
        return self.session.recorder.call_id[-6:]

    def _canned(self) -> CannedReplies:
        session = self.session
        return session.policy.for_language(session.dialog.language).canned

    async def _caller_spoke(self, _agg: object, _strategy: object) -> None:
        self.idle_prompts = 0

    async def _caller_acknowledged(self, agg: FrameProcessor, _message: object) -> None:
        await agg.push_frame(BackchannelHeardFrame())  # the reply being spoken: neither interrupted nor a turn

    async def _caller_idle(self, agg: FrameProcessor) -> None:
        self.idle_prompts += 1
        if self.idle_prompts == 1:
            logger.info("call {}: caller silent for {:.0f} s: asking if they are there", self._call,
                        self.config.call.idle_prompt_secs)
            await agg.push_frame(TTSSpeakFrame(self._canned().idle_prompt))
            return
        logger.info("call {}: caller still silent: goodbye and hang-up", self._call)
        self.session.end_reason = self.session.end_reason or "caller_idle"
        await agg.push_frame(TTSSpeakFrame(self._canned().idle_goodbye))
        await agg.push_frame(EndWorkerFrame(reason="caller idle"))

    async def _stage_failed(self, processor: FrameProcessor, stage: StageFailure, error: ErrorFrame) -> AfterFailure:
        """Record the failure (a turn fact); what the policy says to do about it."""
        await processor.push_frame(StageFailedFrame(error=f"{stage}: {str(getattr(error, 'error', error))[:200]}"))
        turn = self.session.recorder.current.index
        first_of_turn = turn not in self.failed_turns
        self.failed_turns.add(turn)
        return self.session.policy.stage_failed(stage, len(self.failed_turns), first_of_turn)

    async def _stt_failed(self, processor: FrameProcessor, error: ErrorFrame) -> None:
        then = await self._stage_failed(processor, StageFailure.STT, error)
        if then is AfterFailure.END:
            await self._end_politely(self.session.tts, "stt_failed: twice in one call")
        elif then is AfterFailure.UNCLEAR and self.config.turn.korean_endpointing:
            # The turn ends after the normal wait with "please say that again", as for unreadable speech.
            await processor.push_frame(UnclearSpeechFrame(reason="stt_error", audio_secs=0.0))
        elif then is AfterFailure.UNCLEAR:
            await self.session.tts.queue_frame(TTSSpeakFrame(self._canned().unclear))

    async def _tts_failed(self, processor: SupertonicTTSService, error: ErrorFrame) -> None:
        then = await self._stage_failed(processor, StageFailure.TTS, error)
        if then is AfterFailure.END:
            await self._end_politely(processor, "tts_failed: twice in one call")
        elif then is AfterFailure.APOLOGY:
            await self._play_canned(processor, self._canned().apology, "apology")

    async def _end_politely(self, processor: FrameProcessor, reason: str) -> None:
        logger.error("call {}: {}; ending the call politely", self._call, reason)
        self.session.end_reason = self.session.end_reason or reason.split(":")[0]
        await processor.queue_frame(TTSSpeakFrame(self._canned().closing_hours))
        await processor.queue_frame(EndWorkerFrame(reason=reason))

    async def _play_canned(self, tts: SupertonicTTSService, text: str, name: str) -> None:
        """``text`` from the canned audio at once (pushed, not queued), or synthesized when missing."""
        canned, voice = self.canned_audio, self.config.tts.voice
        hit = canned.get(text, tts.sample_rate, voice, tts.language_tag()) if canned else None
        if hit is None:
            await tts.queue_frame(TTSSpeakFrame(text))
            return
        await tts.push_frame(CannedPlayedFrame(sentence=name))
        step = max(1, tts.sample_rate * self.config.tts.frame_ms // 1000) * 2
        for i in range(0, len(hit.pcm), step):
            await tts.push_frame(TTSAudioRawFrame(hit.pcm[i : i + step], tts.sample_rate, 1))
