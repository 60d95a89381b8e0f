"""Benchmark Supertonic synthesis with the configured model and providers.

Prints per-sentence synthesis time (p50/p90) for short, medium and long Korean sentences, and for
a three-sentence reply the time until the first sentence's audio is ready versus the whole reply.

Usage::

    python scripts/bench_tts.py                      # config.toml, the configured model
    python scripts/bench_tts.py --set tts.total_steps=8 --set tts.providers='["cuda","cpu"]'
    python scripts/bench_tts.py --standin            # a stand-in model built in a temp dir
    python scripts/bench_tts.py --device cuda        # providers cuda -> cpu (tensorrt: tensorrt -> cuda -> cpu)

Every timing row shows the provider each of the four sessions really got (TRT, CUDA, CPU), so a GPU run
that silently fell back to the CPU cannot pass for a GPU figure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from loguru import logger  # noqa: E402

from bot.config import ConfigError, load_config  # noqa: E402
from bot.modelfiles.standin import build_standin_model  # noqa: E402
from bot.stages.supertonic import SupertonicEngine, TTSModelMissingError, TTSProviderError  # noqa: E402

SENTENCES = {
    "short": ["네, 알겠습니다.", "잠시만 기다려 주세요.", "다시 말씀해 주시겠어요?", "감사합니다."],
    "medium": [
        "주민등록등본은 주민센터에서 발급받으실 수 있습니다.",
        "대형 폐기물은 구청 누리집에서 먼저 신고해 주세요.",
        "불법 주차 신고는 안전신문고 앱으로 하시면 됩니다.",
        "가로등 고장은 위치를 알려 주시면 바로 접수하겠습니다.",
    ],
    "long": [
        "주민등록등본은 가까운 주민센터나 정부 누리집에서 발급받으실 수 있고, 누리집에서는 공동인증서로 "
        "본인 확인을 하신 뒤 무료로 출력하실 수 있습니다.",
        "대형 폐기물은 구청 누리집이나 주민센터에서 배출 신고를 하시고 수수료를 내신 다음, 안내받은 "
        "날짜에 집 앞에 내놓으시면 수거해 갑니다.",
        "상수도 요금은 매달 검침한 사용량에 따라 부과되며, 요금이 갑자기 많이 나왔다면 누수일 수 "
        "있으니 수도사업소에 점검을 요청해 주세요.",
    ],
}
REPLY = [
    "네, 대형 폐기물 배출 방법을 안내해 드리겠습니다.",
    "먼저 구청 누리집에서 품목을 선택하고 수수료를 결제해 주세요.",
    "그다음 안내받은 날짜에 스티커를 붙여 집 앞에 내놓으시면 됩니다.",
]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default=None, help="config file (default: config.toml)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="K=V", help="override, e.g. tts.total_steps=8"
    )
    parser.add_argument(
        "--standin", action="store_true", help="build a stand-in model in a temp dir and use it"
    )
    parser.add_argument("--runs", type=int, default=20, help="runs per sentence group (default 20)")
    parser.add_argument("--device", choices=["cpu", "cuda", "tensorrt"], default=None,
                        help="providers to ask for: cpu; cuda (cuda, cpu); tensorrt (tensorrt, cuda, cpu). The run "
                        "goes on with whatever the sessions get (fallback allowed) and prints it")
    parser.add_argument("--rate", type=int, default=8000, help="output sample rate (default 8000, Twilio)")
    parser.add_argument("--verbose", action="store_true", help="show DEBUG logs")
    args = parser.parse_args(argv)

    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if args.verbose else "INFO")

    with tempfile.TemporaryDirectory(prefix="supertonic-standin-") as tmp:
        overrides = list(args.set)
        if args.device:
            chain = {"cpu": ["cpu"], "cuda": ["cuda", "cpu"], "tensorrt": ["tensorrt", "cuda", "cpu"]}[args.device]
            overrides += [f"tts.providers={chain!r}", f"tts.require_provider='{args.device}'",
                          f"tts.allow_fallback={'true' if args.device != 'cpu' else 'false'}"]
        if args.standin:
            build_standin_model(Path(tmp))
            overrides.append(f'tts.model_dir="{tmp}"')
        try:
            config = load_config(args.config, overrides)
            engine = SupertonicEngine(config.tts, base_dir=config.base_dir)
        except (ConfigError, TTSModelMissingError, TTSProviderError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        engine.warmup()
        warmup_s = time.perf_counter() - t0
        return run(engine, config.tts, args.runs, args.rate, warmup_s)


SHORT_PROVIDER = {"TensorrtExecutionProvider": "TRT", "CUDAExecutionProvider": "CUDA", "CPUExecutionProvider": "CPU"}


def providers_of(engine: SupertonicEngine) -> str:
    """The provider each session really got, in session order: e.g. TRT/TRT/TRT/CUDA."""
    return "/".join(SHORT_PROVIDER.get(p[0], p[0]) if p else "none" for p in engine.session_providers.values())


def run(engine: SupertonicEngine, cfg, runs: int, rate: int, warmup_s: float) -> int:
    print()
    standin = "  (STAND-IN: random weights, not speech)" if engine.is_standin else ""
    print(f"model      {engine.model_dir}{standin}")
    for name, providers in engine.session_providers.items():
        print(f"provider   {name:<19} {providers}")
    if engine.fallback_active:
        print("WARNING    provider fallback active: not the required provider")
    print(f"settings   voice={cfg.voice} steps={cfg.total_steps} speed={cfg.speed} out={rate} Hz")
    print(f"warmup     {warmup_s:.2f} s for lengths {cfg.warmup_lengths}")
    print()
    ran_on = providers_of(engine)
    print(f"{'group':<8} {'chars':>5} {'audio s':>7} {'p50 ms':>8} {'p90 ms':>8} {'RTF p50':>8}  "
          f"{'providers (dp/te/ve/voc)':<24} (n={runs})")
    for group, sentences in SENTENCES.items():
        ms, audio, rtf = [], [], []
        for i in range(runs):
            r = engine.synthesize(sentences[i % len(sentences)], rate, seed=i)
            ms.append(r.synth_ms)
            audio.append(r.duration_s)
            rtf.append(r.rtf)
        chars = np.mean([len(s) for s in sentences])
        print(
            f"{group:<8} {chars:>5.0f} {np.mean(audio):>7.2f} {pct(ms, 50):>8.1f} {pct(ms, 90):>8.1f} "
            f"{pct(rtf, 50):>8.4f}  {ran_on}"
        )

    # Sentences are synthesized one after another (as the service does): the caller hears the
    # first one as soon as it is ready, while the rest are synthesized during its playback.
    first, full, audio_total = [], [], []
    for i in range(runs):
        t0 = time.perf_counter()
        audio = 0.0
        for j, sentence in enumerate(REPLY):
            r = engine.synthesize(sentence, rate, seed=i)
            if j == 0:
                first.append((time.perf_counter() - t0) * 1000)
            audio += r.duration_s
        full.append((time.perf_counter() - t0) * 1000)
        audio_total.append(audio)
    print()
    chars = sum(len(s) for s in REPLY)
    print(f"3-sentence reply ({chars} chars, {np.mean(audio_total):.1f} s of audio, n={runs}, providers {ran_on})")
    print(f"  first audio ready   p50 {pct(first, 50):8.1f} ms   p90 {pct(first, 90):8.1f} ms")
    print(f"  full reply ready    p50 {pct(full, 50):8.1f} ms   p90 {pct(full, 90):8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
