"""Builds one call's pipeline from the process-wide models: the same for phone and browser.

transport in → STT → user aggregator (Silero VAD, VAD turn start with barge-in that lets
backchannels by, speech-timeout turn stop) → keypad → structured LLM → TTS → transport out →
assistant aggregator.
"""

from __future__ import annotations

from typing import Any

from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregatorParams,
    LLMContextAggregatorPair,
)

from bot.call.guard import guard_call
from bot.call.language import new_dialog_state
from bot.call.models import SharedModels
from bot.call.request import CallRequest
from bot.call.session import CallSession, assemble_session
from bot.call.turn_taking import line_clock, user_turn_params
from bot.call.wiring import make_llm
from bot.config import Config
from bot.recording.recorder import call_recording
from bot.stages.keypad import KeypadProcessor
from bot.stages.silero_vad import SharedSileroVADAnalyzer
from bot.stages.supertonic import SupertonicTTSService
from bot.stages.whisper import WhisperSTTProcessor
from bot.telemetry.turns import CallRecorder, TurnObserver


def build_call(request: CallRequest) -> CallSession:
    """Assemble one call's pipeline. Phone: 16 kHz in (Whisper, Silero), 8 kHz out (no resampling burst).

    Turns are written to ``request.records`` as they happen, and tickets are made and looked up there.
    """
    config, models, call_id, records = request.config, request.models, request.call_id, request.records
    resume = request.resume
    recorder = CallRecorder(call_id, qa=request.qa, first_index=resume.first_turn if resume else 0,
                            sink=(lambda rec: records.turn(call_id, rec)) if records else None)
    dialog = new_dialog_state(config, models.assets)
    history: list[Any] = []  # the model's context: a resumed call's turns so far
    if resume is not None:
        history = [dict(m) for m in resume.history]
        if resume.dialog:
            dialog.restore(resume.dialog)  # the slots, read-back, language, keypad menu of the stream that ended
    # The call's language lives in the dialog state; STT and TTS start in it (a resumed call's too)
    # and are told when it moves (settings frames from the dialog stage).
    vad = SharedSileroVADAnalyzer(session=models.vad_session, config=config.vad)
    stt = _stt(config, models, dialog.language, vad)

    user_agg, assistant_agg = LLMContextAggregatorPair(
        LLMContext(messages=history),
        user_params=user_turn_params(config, models.assets.endpointing, vad=vad,
                                     unclear_reply=lambda: llm.policy.for_language(dialog.language).canned.unclear,
                                     backchannels=models.assets.backchannels,
                                     line_playing=line_clock(request.transport)),
        assistant_params=LLMAssistantAggregatorParams(),
    )
    llm = make_llm(config, request.secrets, models.assets, dialog=dialog,
                   speech_end=lambda: recorder.current.speech_end, records=records, call_id=call_id)
    # Both voices, written as the call goes (recording.enabled): an observer of the two transports.
    observers = [*request.observers, *call_recording(config, call_id, in_rate=request.in_rate,
                                                     out_rate=request.out_rate, records=records,
                                                     segment=resume.segment if resume else 0)]
    session = assemble_session(request, stt=stt, user_agg=user_agg, llm=llm, tts=_tts(config, models, dialog.language),
                               assistant_agg=assistant_agg, recorder=recorder, dialog=dialog, observers=observers,
                               keypad=KeypadProcessor(dialog=dialog), policy=llm.policy,
                               turn_observer=TurnObserver(recorder, sentence_names=models.heard_ids))
    guard_call(session, user_agg, config, canned_audio=models.canned_audio)
    return session


def _stt(config: Config, models: SharedModels, language: str, vad: SharedSileroVADAnalyzer) -> WhisperSTTProcessor:
    """Whisper on the shared engine, decoding in the call's ``language``; with ``stt.language = "auto"``
    it detects among the line's languages. A forced ``stt.language`` holds until the call leaves the
    line's first language. ``vad``: the call's VAD (downstream, in the user aggregator): its audio
    clock places the segment's lead-in."""
    auto = config.stt.language == "auto"
    return WhisperSTTProcessor(engine=models.whisper, language=language,
                               decode_as={} if auto else {config.line.languages[0]: config.stt.language},
                               unclear_min_segment_secs=config.stt.unclear_min_segment_secs,
                               detect=tuple(config.line.languages) if auto else None,
                               decode_p=config.stt.language_repeat_p, vad_heard=vad.audio_heard)


def _tts(config: Config, models: SharedModels, language: str) -> SupertonicTTSService:
    """Supertonic on the shared engine, speaking in the call's language (its TTS tag; a line of one
    language without a tag, as before) and from the canned audio where a sentence is fixed."""
    return SupertonicTTSService(
        engine=models.tts, voice=config.tts.voice, frame_ms=config.tts.frame_ms,
        language=language if models.assets.languages else None, canned=models.canned_audio,
    )
