"""The bench's baseline: the same call built from stock Pipecat parts.

``build_stock_call`` takes a ``CallRequest`` as ``bot.call.build.build_call`` does, so
``bot.app.server.create_app`` serves it unchanged (``call_builder=build_stock_call``);
``python -m bot.app.stock`` is that server, started by ``run_bot.py bench --baseline stock``. What
differs from our pipeline:

* STT: Pipecat's ``WhisperSTTService`` (faster-whisper with its defaults: beam 5, no hotwords,
  no segment guards) on the same local model directory. The service loads its model in
  ``__init__``; a stock bot builds one per call and so reloads the model at every call start.
  Here the loaded model is cached per process (``_WHISPER_MODELS``) and loaded before serving,
  so call setup is not part of the comparison; the per-turn path is the stock one.
* Turns: Pipecat's default ``UserTurnStrategies()`` (VAD or transcription start, smart-turn v3
  stop) with a stock ``SileroVADAnalyzer()`` (default ``VADParams``), one per call.
* LLM: plain ``OpenAILLMService`` (no structured output, no shortcuts, no timeouts of ours)
  against the same ``llm.base_url``. The system prompt is ours, rendered once; it asks for JSON,
  so against a real model the stock bot would read JSON aloud. The bench's fake LLM answers a
  request without ``response_format`` with the plain reply text instead (see
  ``bot.tools.bench.bench_responder``): the same words our pipeline speaks, so TTS work is equal.
* TTS: the same ``SupertonicTTSService`` on the process-wide engine (Pipecat's sentence
  aggregator splits the token stream; in ours the LLM stage hands over whole sentences).
* Input resampler: the stock one when the server runs with ``turn.fast_input_resampler=false``
  (the bench sets it).
* Greeting: the same words as ours (``speak_greeting`` reads the session's ``DialogPolicy`` for the
  recording notice and holiday line; the stock session gets one from ``make_policy``, as its plain
  LLM has none), synthesized by the TTS (no canned audio).

Turn records are filled by the same ``TurnObserver`` as ours; the stock STT and LLM push no turn
facts, so it reads their transcripts, responses and tokens instead (STT done, LLM request and
first token, calls, route).
"""

from __future__ import annotations

import sys
import threading

from loguru import logger
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregatorParams,
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.whisper.stt import WhisperSTTService, WhisperSTTSettings
from pipecat.transcriptions.language import Language
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from bot.call.request import CallRequest
from bot.call.session import CallSession, assemble_session
from bot.call.wiring import make_policy
from bot.config import Config, Secrets
from bot.dialog.domain import render_system_prompt
from bot.dialog.state import DialogState
from bot.stages.supertonic import SupertonicTTSService
from bot.telemetry.turn_facts import TurnMarkFrame
from bot.telemetry.turns import CallRecorder, TurnObserver

_WHISPER_MODELS: dict[tuple, object] = {}
_WHISPER_LOCK = threading.Lock()


class CachedModelWhisperSTTService(WhisperSTTService):
    """Stock ``WhisperSTTService`` whose ``_load`` reuses one model per process (see module doc)."""

    _settings: WhisperSTTSettings  # Pipecat annotates it with its class attribute `Settings`, not a type to mypy

    def _load(self) -> None:
        key = (self._settings.model, self._device, self._compute_type)
        with _WHISPER_LOCK:
            model = _WHISPER_MODELS.get(key)
            if model is None:
                super()._load()
                _WHISPER_MODELS[key] = self._model
            else:
                self._model = model


def stock_stt(config: Config) -> CachedModelWhisperSTTService:
    from bot.modelfiles.manifest import resolve_whisper_model

    return CachedModelWhisperSTTService(
        device=config.stt.device,
        compute_type=config.stt.compute_type,
        settings=WhisperSTTService.Settings(
            model=resolve_whisper_model(config.stt, config.base_dir), language=Language(config.stt.language)
        ),
    )


def build_stock_call(request: CallRequest) -> CallSession:
    """``build_call`` with stock Pipecat STT, turn strategies and LLM (same transport and TTS)."""
    config, models, call_id, records = request.config, request.models, request.call_id, request.records
    recorder = CallRecorder(call_id, qa=request.qa, sink=(lambda rec: records.turn(call_id, rec)) if records else None)
    dialog = DialogState()
    stt = stock_stt(config)
    prompt = render_system_prompt(models.assets.prompt, models.assets.domain, {})
    context = LLMContext()
    user_agg, assistant_agg = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer(), user_turn_strategies=UserTurnStrategies()),
        assistant_params=LLMAssistantAggregatorParams(),
    )
    llm = OpenAILLMService(
        api_key=request.secrets.llm_api_key,
        base_url=config.llm.base_url,
        settings=OpenAILLMService.Settings(
            model=config.llm.model, system_instruction=prompt, temperature=config.llm.temperature,
            max_tokens=config.llm.max_tokens,
        ),
    )

    tts = SupertonicTTSService(engine=models.tts, voice=config.tts.voice, frame_ms=config.tts.frame_ms)

    @tts.event_handler("on_tts_request")
    async def _sentence_ready(_tts, _context_id, _text):
        # The TTS's sentence aggregator completed a sentence: "first reply sentence ready for TTS"
        # (a turn fact, as our stages say it: the TurnObserver writes the record).
        await _tts.push_frame(TurnMarkFrame(mark="first_sentence"))

    return assemble_session(request, stt=stt, user_agg=user_agg, llm=llm, tts=tts, assistant_agg=assistant_agg,
                            recorder=recorder, dialog=dialog, observers=request.observers,
                            turn_observer=TurnObserver(recorder, stock_stt=stt, stock_llm=llm),
                            policy=make_policy(config, models.assets))


def main(argv: list[str] | None = None) -> int:
    """``python -m bot.app.stock [--config PATH] [--set K=V ...]``: serve the stock pipeline like ``run_bot.py serve``."""
    import argparse

    import uvicorn

    from bot.app.server import create_app
    from bot.call.models import load_models
    from bot.config import load_cli_config
    from bot.modelfiles.manifest import startup_errors
    from bot.ops.hatches import escape_hatches, log_banner
    from bot.privacy import start_logging

    parser = argparse.ArgumentParser(prog="python -m bot.app.stock", description=main.__doc__)
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    start_logging(args.verbose)
    config = load_cli_config(args.config, args.overrides)
    if config is None:
        return 2
    secrets = Secrets.from_env(config)
    with startup_errors():
        models = load_models(config)
        stock_stt(config)  # load the stock STT's model once, before serving (see module doc)
    log_banner(escape_hatches(config, tts_engine=models.tts, whisper_engine=models.whisper))
    logger.warning("STOCK BASELINE pipeline (bot/app/stock.py): for `run_bot.py bench --baseline stock` only")
    app = create_app(config, secrets, models, call_builder=build_stock_call)
    uvicorn.run(app, host=config.server.host, port=config.server.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
