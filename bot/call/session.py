"""One running call (``CallSession``) and its stages put in order in one worker."""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameProcessor

from bot.call.request import CallRequest
from bot.dialog.policy import DialogPolicy
from bot.dialog.state import DialogState
from bot.stages.supertonic import SupertonicTTSService
from bot.telemetry.turns import CallRecorder, TurnObserver


@dataclass
class CallSession:
    """One running call: its worker and what it records."""

    worker: PipelineWorker
    recorder: CallRecorder
    dialog: DialogState
    llm: FrameProcessor  # ours: DialogLLMService; the stock baseline's: Pipecat's
    stt: FrameProcessor  # ours: WhisperSTTProcessor; the stock baseline's: Pipecat's
    tts: SupertonicTTSService
    # The line's rules (greeting, callback opening, failures, transfer summary): ours is the dialog stage's;
    # the stock baseline's plain LLM has none, so bot/app/stock.py gives one (its greeting says the same).
    policy: DialogPolicy
    turns: TurnObserver  # writes the records (from the turn facts); views wait on it (``caught_up``)
    end_reason: str | None = None  # how the call ended, when the transport knows (caller_hangup, ...)


def assemble_session(request: CallRequest, *, stt: FrameProcessor, user_agg: FrameProcessor, llm: FrameProcessor,
                     tts: SupertonicTTSService, assistant_agg: FrameProcessor, recorder: CallRecorder,
                     dialog: DialogState, observers: list[BaseObserver] | tuple[BaseObserver, ...] = (),
                     keypad: FrameProcessor | None = None,
                     policy: DialogPolicy, turn_observer: TurnObserver | None = None) -> CallSession:
    """The stages in call order, in one worker with the call's turn records (also the stock baseline's:
    its ``turn_observer`` reads its stock STT and LLM). ``observers``: the request's and the call's own."""
    stages = [request.transport.input(), stt, user_agg, *([keypad] if keypad else []), llm, tts,
              request.transport.output(), assistant_agg]
    pipeline = Pipeline(stages)
    turns = turn_observer or TurnObserver(recorder)
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=request.in_rate,
            audio_out_sample_rate=request.out_rate,
            enable_metrics=True,
            enable_usage_metrics=True,
        ),
        observers=[turns, *observers],
        idle_timeout_secs=request.config.call.idle_timeout_secs,
        enable_rtvi=request.qa,
    )
    return CallSession(worker=worker, recorder=recorder, dialog=dialog, llm=llm, stt=stt, tts=tts,
                       policy=policy, turns=turns)
