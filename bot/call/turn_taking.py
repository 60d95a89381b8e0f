"""Turn-taking of a call: when the caller's turn starts and stops, and when they may barge in.

VAD starts a turn (barge-in that lets backchannels by); how the words end picks the wait before
it stops (``KoreanEndOfTurnStopStrategy``), or a plain speech timeout.
"""

from __future__ import annotations

from collections.abc import Callable

from pipecat.audio.vad.vad_analyzer import VADAnalyzer
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregatorParams
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_mute import MuteUntilFirstBotCompleteUserMuteStrategy
from pipecat.turns.user_start import (
    BaseUserTurnStartStrategy,
    TranscriptionUserTurnStartStrategy,
    VADUserTurnStartStrategy,
)
from pipecat.turns.user_stop import BaseUserTurnStopStrategy, SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from bot.config import Config
from bot.stages.backchannel_turn_start import Backchannels, BackchannelTurnStartStrategy
from bot.stages.korean_turn_stop import EndOfTurnRules, KoreanEndOfTurnStopStrategy
from bot.stages.silero_vad import SharedSileroVADAnalyzer


def user_turn_params(config: Config, rules: EndOfTurnRules, *, vad: VADAnalyzer | None = None,
                     on_decision: Callable[[str, float], None] | None = None,
                     unclear_reply: str | Callable[[], str] | None = None, backchannels: Backchannels | None = None,
                     line_playing: Callable[[], bool] | None = None) -> LLMUserAggregatorParams:
    """Turn-taking: VAD starts a turn (barge-in on); the ending of what was said picks the wait.

    With ``backchannels``, speech over the bot interrupts once it lasts ``turn.barge_in_secs`` or
    its words are more than a backchannel; ``line_playing`` is the transport's clock of unplayed
    bot audio (``line_clock``)."""
    return LLMUserAggregatorParams(
        vad_analyzer=vad,
        user_turn_strategies=UserTurnStrategies(
            # A transcript that arrives after its turn was closed (STT overloaded past
            # stop_timeout_secs) opens a turn of its own: answered late, not merged into the next.
            start=[_vad_start(config, backchannels, line_playing),
                   TranscriptionUserTurnStartStrategy(enable_interruptions=False)],
            stop=[_turn_stop(config, rules, on_decision, unclear_reply,
                             vad.silence_heard if isinstance(vad, SharedSileroVADAnalyzer) else None)],
        ),
        user_mute_strategies=[MuteUntilFirstBotCompleteUserMuteStrategy()] if config.call.mute_during_greeting else [],
        user_turn_stop_timeout=config.turn.stop_timeout_secs,
        # Pipecat's idle timer: runs only while the bot waits for the caller (never during its speech).
        user_idle_timeout=config.call.idle_prompt_secs,
    )


def _turn_stop(config: Config, rules: EndOfTurnRules, on_decision: Callable[[str, float], None] | None,
               unclear_reply: str | Callable[[], str] | None,
               silence_heard: Callable[[], float] | None) -> BaseUserTurnStopStrategy:
    if config.turn.korean_endpointing:
        waits = {"final": config.turn.final_wait_secs, "continuing": config.turn.continuing_wait_secs,
                 "default": config.turn.speech_timeout_secs}
        return KoreanEndOfTurnStopStrategy(rules=rules, waits=waits, speculate=config.turn.speculative_reply,
                                           on_decision=on_decision, unclear_reply=unclear_reply,
                                           silence_heard=silence_heard,
                                           # speech again needs start_secs to start a turn; a queue
                                           # behind the analyzer gets a second more
                                           resume_hold_secs=config.vad.start_secs + 1.0)
    # Speech timeout, not smart-turn: smart-turn races the segmented STT (see notes).
    return SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=config.turn.speech_timeout_secs)


def _vad_start(config: Config, backchannels: Backchannels | None,
               line_playing: Callable[[], bool] | None) -> BaseUserTurnStartStrategy:
    if backchannels is None or config.turn.barge_in_secs <= 0:
        return VADUserTurnStartStrategy(enable_interruptions=True)
    return BackchannelTurnStartStrategy(backchannels=backchannels, barge_in_secs=config.turn.barge_in_secs,
                                        line_playing=line_playing, vad_stop_secs=config.vad.stop_secs)


def line_clock(transport: BaseTransport) -> Callable[[], bool] | None:
    """The phone line's clock of bot audio Twilio has not played yet (``PhoneSerializer``), or None.

    Pipecat's websocket output sends audio at twice real time, so the pipeline's "bot stopped
    speaking" comes while the caller still hears the last seconds of a reply. The transport keeps
    its serializer in its params (no public accessor in Pipecat 1.14).
    """
    serializer = getattr(getattr(transport, "_params", None), "serializer", None)
    return getattr(serializer, "bot_audio_pending", None)
