"""``python -m bot.testing.lab_server``: ``run_bot.py serve`` for the test lab (tests and benchmarks only).

The product server (``bot/app/serve.py``) is served unchanged, with two test-side seams:

* ``--stt-text TEXT --stt-delay-ms N``: every call's STT answers each speech segment with
  ``TEXT`` after exactly N ms (``bot/testing/fixed_stt.py``), so what a test bounds is the bot's
  own timing, not how fast Whisper runs on this machine. Without them, real Whisper.
* ``--fault-injection``: a media stream's ``fault`` custom parameter breaks that call
  (``bot/testing/inject.py``); a real Twilio call carries only our webhook's parameters.
* ``LAB_RECORDS_DOWN_FILE=PATH`` (environment, inherited by ``--workers``): while PATH exists the
  records database is unreachable (``inject.records_down_switch``).
* With the fixed-delay STT, a media stream's ``stt_script`` custom parameter (a JSON list of
  texts) gives that call's segments their own words, one each in order: a scripted call
  (backchannels over the reply, then a barge-in) in one process, other calls unaffected.

``--workers N`` runs N such workers under ``run_bot.py serve --workers``'s supervisor. Every other
argument is ``run_bot.py``'s (``--config``, ``--set``, ``-v``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from loguru import logger

from bot.call.build import build_call
from bot.call.request import CallRequest
from bot.privacy import mask
from bot.testing.fixed_stt import FixedDelayEngine, parse_script
from bot.testing.inject import PIPELINE_RAISE, apply_call_fault, raise_mid_turn, records_down_switch


def lab_call_builder(*, fault_injection: bool):
    """``build_call``, with the stream's ``fault`` parameter applied when injection is on, and its
    ``stt_script`` when the STT is the fixed-delay engine."""

    def build(request: CallRequest):
        config, models, call_id = request.config, request.models, request.call_id
        fault = request.stream_parameters.get("fault")
        raise_in = 0
        if fault and fault_injection:
            logger.warning("call {}: FAULT INJECTED: {}", mask(call_id), fault)
            if fault.startswith(PIPELINE_RAISE):
                raise_in = int(fault.partition(":")[2] or 1)
            else:
                config, models = apply_call_fault(fault, config, models)
        script = request.stream_parameters.get("stt_script")
        if script and isinstance(models.whisper, FixedDelayEngine):
            texts = parse_script(script)
            logger.warning("call {}: TEST LAB: scripted STT ({} segment texts)", mask(call_id), len(texts))
            models = dataclasses.replace(models, whisper=models.whisper.scripted(texts))
        session = build_call(dataclasses.replace(request, config=config, models=models))
        if raise_in:
            raise_mid_turn(session, raise_in)
        return session

    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.testing.lab_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stt-text", default=None, help="fixed-delay STT: what every speech segment says")
    parser.add_argument("--stt-delay-ms", type=float, default=None, help="fixed-delay STT: ms per segment")
    parser.add_argument("--fault-injection", action="store_true", help="a stream's `fault` parameter breaks its call")
    parser.add_argument("--stt-min-speech-ms", type=float, default=250.0,
                        help="fixed-delay STT: shorter segments are rejected as empty (default 250)")
    parser.add_argument("--workers", type=int, default=1, help="N lab workers, as `run_bot.py serve --workers N`")
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if (args.stt_text is None) != (args.stt_delay_ms is None):
        parser.error("--stt-text and --stt-delay-ms go together")

    from bot.app.serve import serve
    from bot.config import load_cli_config
    from bot.core.errors import StartupError
    from bot.modelfiles.local_llm import serving_llm
    from bot.privacy import start_logging

    start_logging(args.verbose)
    if os.environ.get("LAB_RECORDS_DOWN_FILE"):
        records_down_switch(Path(os.environ["LAB_RECORDS_DOWN_FILE"]))
        logger.warning("TEST LAB: the records database is unreachable while {} exists",
                       os.environ["LAB_RECORDS_DOWN_FILE"])
    config = load_cli_config(args.config, args.overrides)
    if config is None:
        return 2

    if args.workers > 1:
        from bot.line.workers import run_workers

        lab = [sys.executable, "-m", "bot.testing.lab_server"]
        if args.stt_text is not None:
            lab += ["--stt-text", args.stt_text, "--stt-delay-ms", str(args.stt_delay_ms),
                    "--stt-min-speech-ms", str(args.stt_min_speech_ms)]
        if args.fault_injection:
            lab.append("--fault-injection")
        return run_workers(config, args, args.workers, command=lab)

    prepare = None
    if args.stt_text is not None:
        def prepare(models):
            engine = FixedDelayEngine(args.stt_text, args.stt_delay_ms / 1000, cfg=config.stt,
                                      min_speech_s=args.stt_min_speech_ms / 1000)
            logger.warning("TEST LAB: every call's STT is fixed-delay ({} ms, known text)", args.stt_delay_ms)
            return dataclasses.replace(models, whisper=engine)
    if args.fault_injection:
        logger.warning("TEST LAB: a media stream's `fault` parameter breaks its call")
    try:
        with serving_llm(config) as llm_server:
            return serve(config, llm_server, call_builder=lab_call_builder(fault_injection=args.fault_injection),
                         prepare_models=prepare)
    except StartupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
