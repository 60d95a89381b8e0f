"""The installed runtimes: the onnxruntime wheels, the provider each ONNX session really got, ctranslate2's CUDA."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from bot.config import Config
from bot.ops.preflight.report import FAIL, OK, WARN, CheckReport

if TYPE_CHECKING:
    from bot.stages.supertonic import SupertonicEngine


def installed_onnxruntime_wheels() -> list[tuple[str, str]]:
    """(name, version) of every installed distribution whose name starts with onnxruntime."""
    out = set()
    for d in importlib.metadata.distributions():
        name = (d.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("onnxruntime"):
            out.add((name, d.version))
    return sorted(out)


def wheel_rows(report: CheckReport, config: Config, wheels: Iterable[tuple[str, str]] | None = None) -> None:
    wheels = list(installed_onnxruntime_wheels() if wheels is None else wheels)
    names = {n for n, _ in wheels}
    listed = ", ".join(f"{n} {v}" for n, v in wheels) or "none"
    gpu_wheels = sorted(n for n in names if n != "onnxruntime")
    if "onnxruntime" in names and gpu_wheels:
        report.add("wheels", "onnxruntime", FAIL, f"{listed}: the CPU wheel and {gpu_wheels[0]} share the module "
                   "`onnxruntime` and the CPU one can win (every TTS session on the CPU); run scripts/setup.sh --gpu, "
                   "which removes `onnxruntime`")  # fmt: skip
    elif not names:
        report.add("wheels", "onnxruntime", FAIL, "no onnxruntime wheel installed (pip install -r requirements.txt)")
    elif config.tts.require_provider in ("cuda", "tensorrt") and not gpu_wheels:
        report.add("wheels", "onnxruntime", FAIL, f"{listed}: tts.require_provider = {config.tts.require_provider!r} "
                   "needs onnxruntime-gpu (scripts/setup.sh --gpu)")  # fmt: skip
    else:
        try:
            import onnxruntime as ort

            available = ", ".join(ort.get_available_providers())
        except Exception as e:  # noqa: BLE001 - a broken wheel is worth a row, not a traceback
            report.add("wheels", "onnxruntime", FAIL, f"{listed}: import fails: {e}")
            return
        report.add("wheels", "onnxruntime", OK, f"{listed} (providers: {available})")


def provider_rows(report: CheckReport, config: Config, tts_engine: SupertonicEngine | None = None,
                  vad_session: Any = None) -> SupertonicEngine | None:
    """The provider each ONNX session really got. Loads the TTS when no engine is given; returns it."""
    from bot.stages.supertonic import PROVIDER_NAMES

    if tts_engine is None:
        from bot.stages.supertonic import SupertonicEngine

        try:
            tts_engine = SupertonicEngine(config.tts, base_dir=config.base_dir)
        except Exception as e:  # noqa: BLE001 - model missing, provider refused: a failed row
            report.add("ONNX", "tts sessions", FAIL, f"{type(e).__name__}: {e}")
            tts_engine = None
    if tts_engine is not None:
        required = PROVIDER_NAMES.get(config.tts.require_provider, config.tts.require_provider)
        for name, providers in tts_engine.session_providers.items():
            got = providers[0] if providers else "nothing"
            if got == required:
                report.add("ONNX", f"tts {name}", OK, f"{got} (required {config.tts.require_provider})")
            elif config.tts.allow_fallback:
                report.add("ONNX", f"tts {name}", WARN, f"{got}, not the required {required} "
                           "(tts.allow_fallback = true: escape hatch)")  # fmt: skip
            else:
                report.add("ONNX", f"tts {name}", FAIL, f"{got}, not the required {required} (all: {providers})")
    if vad_session is None:
        try:
            from bot.stages.silero_vad import load_silero_session

            vad_session = load_silero_session()
        except Exception as e:  # noqa: BLE001
            report.add("ONNX", "silero_vad", FAIL, f"{type(e).__name__}: {e}")
    if vad_session is not None:
        report.add("ONNX", "silero_vad", OK, f"{vad_session.get_providers()[0]} (by design: tiny, per 32 ms frame)")
    return tts_engine


def ctranslate2_row(report: CheckReport, config: Config) -> None:
    try:
        import ctranslate2
    except ImportError as e:
        report.add("STT", "ctranslate2", FAIL, f"not importable: {e}")
        return
    try:
        cuda = ctranslate2.get_cuda_device_count()
    except Exception:  # noqa: BLE001 - a CPU-only build may raise instead of answering 0
        cuda = 0
    device = config.stt.device
    if device == "cpu":
        report.add("STT", "ctranslate2", OK, f"{ctranslate2.__version__}, stt.device = cpu "
                   f"({config.stt.compute_type}; {cuda} CUDA device(s) visible, not used)")  # fmt: skip
        return
    if cuda < 1:
        status = FAIL if device == "cuda" else WARN
        report.add("STT", "ctranslate2", status, f"{ctranslate2.__version__} sees no CUDA device "
                   f"(stt.device = {device!r}): Whisper would run on the CPU")  # fmt: skip
        return
    try:
        types = sorted(ctranslate2.get_supported_compute_types("cuda"))
    except Exception as e:  # noqa: BLE001
        report.add("STT", "ctranslate2", FAIL, f"{ctranslate2.__version__}: CUDA compute types unavailable: {e}")
        return
    if config.stt.compute_type not in types:
        report.add("STT", "ctranslate2", FAIL, f"stt.compute_type {config.stt.compute_type!r} is not supported on "
                   f"CUDA here ({types})")  # fmt: skip
        return
    report.add("STT", "ctranslate2", OK, f"{ctranslate2.__version__}, {cuda} CUDA device(s), {config.stt.compute_type} "
               f"supported ({', '.join(types)})")  # fmt: skip
