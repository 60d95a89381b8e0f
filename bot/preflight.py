"""``run_bot.py check``: is this machine ready to take a call? One table, non-zero exit on a failure.

Rows (each ``ok``, ``FAIL``, ``warn``, ``no GPU``, ``skip`` or ``hatch``):

* **GPU**: the card (``nvidia-ml-py``) and the memory budget on it. vLLM takes
  ``llm.gpu_memory_utilization`` of the card for the LLM's weights (total parameters x bytes per
  parameter: a MoE's *total*, not active, parameters), its KV cache for ``llm.max_model_len`` x
  ``llm.max_num_seqs`` tokens and its runtime; Whisper and the TTS sessions live in the rest. Sizes
  come from the model directory (``config.json``, quantization config, safetensors headers) when
  ``llm.model`` is a local path, else from ``llm.total_params_b``, ``llm.weight_dtype``,
  ``llm.kv_layers``, ``llm.kv_heads`` and ``llm.head_dim``. GB here is 10^9 bytes.
* **Wheels**: CPU ``onnxruntime`` and ``onnxruntime-gpu`` installed together fail (the CPU one
  can shadow the GPU one); the providers each ONNX session really got; ctranslate2's CUDA support
  when ``stt.device = "cuda"``.
* **LLM**: the server at ``llm.base_url`` answers, ``/v1/models`` lists ``llm.model``, one
  structured request with the real dialog schema returns schema-valid JSON (first-token time).
* **Escape hatches** in effect (``bot/hatches.py``).

``serve`` runs the same check at startup (with the models it loaded) and refuses to start on a
failure, unless a declared escape hatch covers it (``llm.start_without_llm``).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlparse

import httpx

from bot.config import Config, LLMConfig

GB = 1e9

OK, FAIL, WARN, NO_GPU, SKIP, HATCH = "ok", "FAIL", "warn", "no GPU", "skip", "hatch"

#: Bytes per parameter of each ``llm.weight_dtype``.
BYTES_PER_PARAM: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5}
#: Bytes per KV-cache element of each ``llm.kv_cache_dtype`` ("auto": the model's 16-bit dtype).
KV_BYTES: dict[str, float] = {"auto": 2, "fp8": 1}
#: vLLM's own use beside weights and KV cache: activations, CUDA graphs, sampler (estimate).
VLLM_RUNTIME_BYTES = 2.0 * GB
#: The bot process's CUDA context and allocator slack when Whisper or the TTS run on the GPU.
BOT_CONTEXT_BYTES = 0.5 * GB
#: Whisper's working memory per CTranslate2 replica on the GPU (beam 1, 30 s window; estimate).
WHISPER_WORK_BYTES = 0.3 * GB
#: Parameters of the faster-whisper models by name, for a model that is not on disk yet.
WHISPER_PARAMS = {"tiny": 39e6, "base": 74e6, "small": 244e6, "medium": 769e6, "large-v1": 1550e6,
                  "large-v2": 1550e6, "large-v3": 1550e6, "large": 1550e6, "large-v3-turbo": 809e6,
                  "turbo": 809e6, "distil-large-v3": 756e6, "distil-large-v2": 756e6}  # fmt: skip
_SAFETENSORS_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "BF16": 2, "F16": 2, "I16": 2,
                      "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}  # fmt: skip


@dataclass
class Row:
    area: str
    item: str
    status: str
    detail: str
    #: The declared escape hatch that lets ``serve`` start despite this failure.
    hatch: str | None = None


@dataclass
class CheckReport:
    rows: list[Row] = field(default_factory=list)
    #: Lines printed loudly under the table (the ways out of an unreachable LLM server).
    notes: list[str] = field(default_factory=list)
    #: Figures other checks reuse (the LLM's first token, for the startup self-timing).
    figures: dict[str, float] = field(default_factory=dict)

    def add(self, area: str, item: str, status: str, detail: str, hatch: str | None = None) -> Row:
        row = Row(area, item, status, detail, hatch)
        self.rows.append(row)
        return row

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.status == FAIL]

    @property
    def blocking(self) -> list[Row]:
        """Failures no declared escape hatch covers: ``serve`` refuses to start on these."""
        return [r for r in self.failures if not r.hatch]

    def table(self) -> str:
        w_area = max(len("area"), *(len(r.area) for r in self.rows))
        w_item = max(len("check"), *(len(r.item) for r in self.rows))
        w_status = max(len("status"), *(len(r.status) for r in self.rows))
        lines = [f"{'area':<{w_area}}  {'check':<{w_item}}  {'status':<{w_status}}  detail"]
        lines.append("-" * (w_area + w_item + w_status + 6 + 40))
        for r in self.rows:
            detail = r.detail + (f"  [declared escape hatch {r.hatch}: serve starts anyway]" if r.hatch else "")
            lines.append(f"{r.area:<{w_area}}  {r.item:<{w_item}}  {r.status:<{w_status}}  {detail}")
        n, h = len(self.failures), len(self.failures) - len(self.blocking)
        if n:
            names = ", ".join(f"{r.area} {r.item}" for r in self.failures)
            lines.append(f"result: {n} FAILED ({names})" + (f"; {h} covered by a declared escape hatch" if h else ""))
        else:
            warns = sum(r.status == WARN for r in self.rows)
            lines.append("result: all checks passed" + (f" ({warns} warning{'s' * (warns != 1)})" if warns else ""))
        if self.notes:
            bar = "!" * 78
            lines += [bar, *self.notes, bar]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# GPU memory budget


def weight_bytes(total_params_b: float, dtype: str) -> float:
    """Bytes of an LLM's weights: total parameters (billions) x bytes per parameter."""
    if dtype not in BYTES_PER_PARAM:
        raise ValueError(f"unknown weight dtype {dtype!r} (one of {list(BYTES_PER_PARAM)})")
    return total_params_b * 1e9 * BYTES_PER_PARAM[dtype]


def kv_cache_bytes(tokens: int, kv_layers: int, kv_heads: int, head_dim: int, bytes_per_value: float = 2) -> float:
    """K and V for ``tokens`` tokens in every layer that holds a KV cache."""
    return 2.0 * kv_layers * kv_heads * head_dim * bytes_per_value * tokens


@dataclass
class LLMSize:
    """What the LLM needs on the card; ``problems`` says what is unknown."""

    weight_bytes: float = 0.0
    total_params: float = 0.0
    dtype: str = ""
    source: str = ""
    kv_layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    #: Recurrent state per sequence of a hybrid model's linear-attention layers (fixed size).
    state_bytes_per_seq: float = 0.0
    problems: list[str] = field(default_factory=list)

    def kv_bytes(self, llm: LLMConfig) -> float:
        tokens = llm.max_model_len * llm.max_num_seqs
        return kv_cache_bytes(tokens, self.kv_layers, self.kv_heads, self.head_dim, KV_BYTES[llm.kv_cache_dtype])

    def state_bytes(self, llm: LLMConfig) -> float:
        return self.state_bytes_per_seq * llm.max_num_seqs


def _dtype_from_model_config(cfg: dict[str, Any]) -> str:
    q = cfg.get("quantization_config") or {}
    method = str(q.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8", "modelopt") and "fp4" not in str(q.get("quant_algo", "")).lower():
        return "fp8"
    if method in ("mxfp4", "nvfp4") or "fp4" in str(q.get("quant_algo", "")).lower():
        return "fp4"
    if method in ("awq", "gptq", "auto-round", "marlin") or q.get("bits") in (4, "4"):
        return "int4" if int(q.get("bits", 4)) == 4 else "int8"
    if method == "bitsandbytes":
        return "int4" if q.get("load_in_4bit") else "int8"
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            weights = (group or {}).get("weights") or {}
            bits, kind = weights.get("num_bits"), str(weights.get("type", "int"))
            if bits == 8:
                return "fp8" if kind == "float" else "int8"
            if bits == 4:
                return "fp4" if kind == "float" else "int4"
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "").lower()
    return {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}.get(dtype, "")


def safetensors_bytes(model_dir: Path) -> tuple[float, float]:
    """(bytes, elements) of every tensor in the directory's safetensors files, from their headers."""
    total_bytes = total_elems = 0.0
    for path in sorted(model_dir.glob("*.safetensors")):
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, t in header.items():
            if name == "__metadata__":
                continue
            start, end = t["data_offsets"]
            total_bytes += end - start
            elems = 1
            for d in t["shape"]:
                elems *= d
            total_elems += elems
    return total_bytes, total_elems


def hf_snapshot(model: str) -> Path | None:
    """The newest snapshot of a hub model id in the Hugging Face cache (where vLLM downloads it), if any."""
    if model.count("/") != 1:
        return None
    hub = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
                                                 / "hub")  # fmt: skip
    snaps = [p for p in (Path(hub) / f"models--{model.replace('/', '--')}" / "snapshots").glob("*")
             if (p / "config.json").is_file()]  # fmt: skip
    return max(snaps, key=lambda p: p.stat().st_mtime) if snaps else None


def llm_size(config: Config) -> LLMSize:
    """The LLM's memory figures: the model directory (a local path or the hub cache), else the declared keys."""
    llm = config.llm
    local = config.path(llm.model)
    if (local / "config.json").is_file():
        return _size_from_dir(local, llm)
    cached = hf_snapshot(llm.model)
    if cached is not None:
        return _size_from_dir(cached, llm)
    size = LLMSize(kv_layers=llm.kv_layers, kv_heads=llm.kv_heads, head_dim=llm.head_dim,
                   source="declared: llm.total_params_b, llm.weight_dtype")  # fmt: skip
    if llm.total_params_b > 0 and llm.weight_dtype:
        size.dtype = llm.weight_dtype
        size.total_params = llm.total_params_b * 1e9
        size.weight_bytes = weight_bytes(llm.total_params_b, llm.weight_dtype)
    else:
        size.problems.append(f"{llm.model!r} is not a local directory: declare llm.total_params_b (MoE: total) "
                             "and llm.weight_dtype")  # fmt: skip
    if not (llm.kv_layers and llm.kv_heads and llm.head_dim):
        size.problems.append("declare llm.kv_layers, llm.kv_heads and llm.head_dim for the KV cache")
    return size


def _size_from_dir(model_dir: Path, llm: LLMConfig) -> LLMSize:
    raw = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    cfg = {**raw, **(raw.get("text_config") or {})}  # multimodal checkpoints nest the LM's config
    if "quantization_config" in raw and "quantization_config" not in (raw.get("text_config") or {}):
        cfg["quantization_config"] = raw["quantization_config"]
    size = LLMSize(source=f"{model_dir}/config.json + safetensors headers")
    size.dtype = _dtype_from_model_config(cfg) or llm.weight_dtype
    nbytes, _elems = safetensors_bytes(model_dir)
    if nbytes:
        size.weight_bytes = nbytes
        if size.dtype:
            size.total_params = nbytes / BYTES_PER_PARAM[size.dtype]
    elif llm.total_params_b > 0 and size.dtype:
        size.total_params = llm.total_params_b * 1e9
        size.weight_bytes = weight_bytes(llm.total_params_b, size.dtype)
        size.source = f"{model_dir}/config.json + llm.total_params_b (no safetensors files)"
    else:
        size.problems.append(f"{model_dir} has no safetensors files: declare llm.total_params_b and llm.weight_dtype")
    layers = int(cfg.get("num_hidden_layers") or 0)
    heads = int(cfg.get("num_attention_heads") or 0)
    size.kv_heads = int(cfg.get("num_key_value_heads") or heads)
    size.head_dim = int(cfg.get("head_dim") or (int(cfg.get("hidden_size") or 0) // heads if heads else 0))
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        size.kv_layers = sum(1 for t in types if "attention" in str(t) and "linear" not in str(t))
        linear = sum(1 for t in types if "linear" in str(t))
    elif cfg.get("full_attention_interval"):
        size.kv_layers = layers // int(cfg["full_attention_interval"])
        linear = layers - size.kv_layers
    else:
        size.kv_layers, linear = layers, 0
    if linear:  # gated-delta-net state: value heads x key dim x value dim, fp32 (conservative)
        vh = int(cfg.get("linear_num_value_heads") or 0)
        kd, vd = int(cfg.get("linear_key_head_dim") or 0), int(cfg.get("linear_value_head_dim") or 0)
        size.state_bytes_per_seq = linear * vh * kd * vd * 4.0
    if not (size.kv_layers and size.kv_heads and size.head_dim):
        size.problems.append(f"{model_dir}/config.json lacks layers/KV heads/head dim")
    return size


def whisper_gpu_bytes(config: Config) -> tuple[float, str]:
    """Estimated GPU memory of the Whisper engine (0 on the CPU) and how it was estimated."""
    stt = config.stt
    if stt.device == "cpu":
        return 0.0, "Whisper on CPU"
    scales = {"float16": 1.0, "int8_float16": 0.5, "int8": 0.5, "float32": 2.0, "bfloat16": 1.0}
    scale = scales.get(stt.compute_type, 1.0)
    workers = 2  # WhisperEngine runs 2 replicas on CUDA
    path = config.path(stt.model)
    if (path / "model.bin").is_file():
        weights = (path / "model.bin").stat().st_size * scale  # CTranslate2 conversions store float16
        how = f"model.bin {weights / GB:.1f} GB ({stt.compute_type})"
    else:
        name = Path(stt.model).name.removeprefix("whisper-").removeprefix("faster-whisper-")
        params = WHISPER_PARAMS.get(name, WHISPER_PARAMS["large-v3"])
        weights = params * 2 * scale
        how = f"~{params / 1e6:.0f}M params {stt.compute_type}"
    return weights + workers * WHISPER_WORK_BYTES, how


def tts_gpu_bytes(config: Config) -> tuple[float, str]:
    """Estimated GPU memory of the TTS sessions: ONNX weights plus their TensorRT engines."""
    tts = config.tts
    if tts.require_provider == "cpu" and not any(p in ("cuda", "tensorrt") for p in tts.providers):
        return 0.0, "TTS on CPU"
    onnx_dir = config.path(tts.model_dir) / "onnx"
    size = sum(p.stat().st_size for p in onnx_dir.glob("*.onnx")) if onnx_dir.is_dir() else 0.3 * GB
    return 2 * size + 0.25 * GB, f"4 sessions ~{size / GB:.2f} GB of ONNX x2 (+engines) + arena"


def needs_gpu(config: Config) -> bool:
    """Whether this config cannot run without a GPU (the LLM server may live elsewhere)."""
    return config.stt.device == "cuda" or config.tts.require_provider in ("cuda", "tensorrt")


def card_memory() -> tuple[str, float] | str:
    """(name, total bytes) of GPU 0, or why there is none."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (pip install -r requirements.txt)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return f"NVML: {e}"
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return "NVML sees no device"
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        return name, float(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    except pynvml.NVMLError as e:
        return f"NVML: {e}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


def budget_rows(report: CheckReport, config: Config, card: tuple[str, float] | str) -> None:
    """The card row and the two budget rows (vLLM's share, the bot's share)."""
    llm = config.llm
    gpu_required = needs_gpu(config)
    if isinstance(card, str):
        report.add("GPU", "card", FAIL if gpu_required else NO_GPU,
                   card + (" (this config runs STT/TTS on the GPU)" if gpu_required else ""))  # fmt: skip
        total = None
    else:
        name, total = card
        report.add("GPU", "card", OK, f"{name}, {_gb(total)}")

    def verdict(need: float, have: float | None) -> tuple[str, str]:
        if have is None:
            return (FAIL if gpu_required else NO_GPU), "no card to compare with"
        left = have - need
        return (OK, f"headroom {_gb(left)}") if left >= 0 else (FAIL, f"OVER by {_gb(-left)}")

    if llm.backend == "local":
        report.add("GPU", "vLLM share", SKIP, "llm.backend = local: llama.cpp on the CPU, nothing on the GPU")
    else:
        size = llm_size(config)
        if size.problems:
            report.add("GPU", "vLLM share", FAIL if total is not None else NO_GPU, "; ".join(size.problems))
        else:
            kv, state = size.kv_bytes(llm), size.state_bytes(llm)
            need = size.weight_bytes + kv + state + VLLM_RUNTIME_BYTES
            share = None if total is None else llm.gpu_memory_utilization * total
            status, tail = verdict(need, share)
            per_token = kv_cache_bytes(1, size.kv_layers, size.kv_heads, size.head_dim, KV_BYTES[llm.kv_cache_dtype])
            parts = [f"weights {_gb(size.weight_bytes)} ({size.total_params / 1e9:.1f}B params x "
                     f"{BYTES_PER_PARAM.get(size.dtype, 0):g} B {size.dtype}; {size.source})",
                     f"KV {_gb(kv)} ({llm.max_model_len} tok x {llm.max_num_seqs} seqs x {per_token / 1024:.0f} KB)"]
            if state:
                parts.append(f"linear-attention state {_gb(state)}")
            parts.append(f"runtime ~{_gb(VLLM_RUNTIME_BYTES)}")
            have = "" if share is None else f" of {llm.gpu_memory_utilization:g} x {_gb(total)} = {_gb(share)}"
            report.add("GPU", "vLLM share", status, f"needs {_gb(need)}{have}: {tail}; " + " + ".join(parts))
    w, w_how = whisper_gpu_bytes(config)
    t, t_how = tts_gpu_bytes(config)
    bot = w + t + (BOT_CONTEXT_BYTES if (w or t) else 0.0)
    if not bot:
        report.add("GPU", "bot share", OK if total is not None else NO_GPU, "nothing on the GPU (Whisper and TTS on CPU)")
        return
    rest = None if total is None else (1 - llm.gpu_memory_utilization) * total
    status, tail = verdict(bot, rest)
    have = "" if rest is None else f" of the other {1 - llm.gpu_memory_utilization:.2f} = {_gb(rest)}"
    report.add("GPU", "bot share", status, f"needs {_gb(bot)}{have}: {tail}; Whisper {_gb(w)} ({w_how}) + "
               f"TTS {_gb(t)} ({t_how}) + CUDA context {_gb(BOT_CONTEXT_BYTES)}")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Wheels and providers


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


def provider_rows(report: CheckReport, config: Config, tts_engine=None, vad_session=None) -> Any:
    """The provider each ONNX session really got. Loads the TTS when no engine is given; returns it."""
    from processors.supertonic_tts import PROVIDER_NAMES

    if tts_engine is None:
        from processors.supertonic_tts import SupertonicEngine

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
            from processors.silero_vad import load_silero_session

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


# ---------------------------------------------------------------------------------------------
# The LLM server


@dataclass
class Probe:
    """What one look at the LLM server found."""

    reachable: bool = False
    error: str = ""
    models: list[str] = field(default_factory=list)
    turn: dict | None = None
    problem: str = ""  # why the structured answer is not usable ("" = it is)
    first_token_ms: float | None = None
    total_ms: float | None = None


PROBE_CALLER_LINE = "집 앞 가로등이 어젯밤부터 꺼져 있어요."


def probe_llm(config: Config, api_key: str = "EMPTY", *, timeout_s: float | None = None) -> Probe:
    """GET /models, then one streamed structured request with the real dialog schema and prompt."""
    from bot.dialog.domain import load_domain, render_system_prompt
    from bot.dialog.reply_stream import TurnParseError, parse_turn

    llm = config.llm
    base = llm.base_url.rstrip("/")
    probe = Probe()
    read_timeout = timeout_s or max(30.0, llm.total_timeout_ms / 1000.0)
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(timeout=httpx.Timeout(read_timeout, connect=3.0), headers=headers) as client:
        try:
            r = client.get(f"{base}/models")
            r.raise_for_status()
            probe.models = [m.get("id", "") for m in r.json().get("data", [])]
            probe.reachable = True
        except (httpx.HTTPError, ValueError) as e:
            probe.error = f"{type(e).__name__}: {e}"
            return probe
        domain = load_domain(config.path(llm.domain_file))
        template = config.path(llm.prompt_file).read_text(encoding="utf-8")
        body: dict[str, Any] = {
            "model": llm.model,
            "messages": [{"role": "system", "content": render_system_prompt(template, domain, {})},
                         {"role": "user", "content": PROBE_CALLER_LINE}],
            "stream": True,
            "max_tokens": llm.max_tokens,
            "temperature": llm.temperature,
            "response_format": domain.response_format(llm.dialect, llm.reply_max_chars),
        }  # fmt: skip
        if llm.dialect == "openai":
            body["chat_template_kwargs"] = {"enable_thinking": llm.enable_thinking}
        text, finish = [], None
        t0 = time.monotonic()
        try:
            with client.stream("POST", f"{base}/chat/completions", json=body) as resp:
                if resp.status_code != 200:
                    probe.problem = f"HTTP {resp.status_code}: {resp.read().decode(errors='replace')[:300]}"
                    return probe
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            if probe.first_token_ms is None:
                                probe.first_token_ms = (time.monotonic() - t0) * 1000
                            text.append(piece)
                        finish = choice.get("finish_reason") or finish
        except (httpx.HTTPError, ValueError) as e:
            probe.problem = f"stream failed: {type(e).__name__}: {e}"
            return probe
        probe.total_ms = (time.monotonic() - t0) * 1000
    raw = "".join(text)
    if finish == "length":
        probe.problem = f"cut off (finish_reason=length after {len(raw)} chars; raise llm.max_tokens?)"
        return probe
    if not raw.strip():
        probe.problem = "empty answer"
        return probe
    try:
        turn = parse_turn(raw)
    except TurnParseError as e:
        probe.problem = f"invalid JSON: {e}: {raw[:120]!r}"
        return probe
    errors = domain.validate(turn, llm.reply_max_chars)
    if errors:
        probe.problem = "not schema-valid: " + "; ".join(errors)[:300]
        return probe
    probe.turn = turn
    return probe


def ways_out(config: Config) -> list[str]:
    """The three ways out of 'no LLM server', as commands."""
    vllm = llm_command_line(config)
    if installed_vllm() is None:
        vllm = f"scripts/setup.sh --vllm && {vllm}   (or: run_bot.py llm-command --docker)"
    return [
        f"  1. start vLLM (GPU):         {vllm}",
        f"  2. a fake for plumbing:       .venv/bin/python -m bot.testing.fake_llm --port {_port(config.llm.base_url)} "
        f"--model {shlex.quote(config.llm.model)}",
        "  3. the local 0.5B model (CPU): scripts/setup.sh --local-llm && .venv/bin/python run_bot.py --llm local",
    ]


def llm_rows(report: CheckReport, config: Config, api_key: str = "EMPTY", probe: Probe | None = None) -> Probe:
    llm = config.llm
    hatch = "llm.start_without_llm" if llm.start_without_llm else None
    probe = probe or probe_llm(config, api_key)
    where = f"{llm.base_url} (llm.base_url" + (", the local llama.cpp child" if llm.backend == "local" else "") + ")"
    if not probe.reachable:
        report.add("LLM", "server", FAIL, f"NO LLM SERVER at {where}: {probe.error}", hatch)
        report.add("LLM", "model", SKIP, "no server")
        report.add("LLM", "structured answer", SKIP, "no server")
        report.notes += [f"NO LLM SERVER at {llm.base_url} (llm.base_url): every model turn would be an apology.",
                         "Three ways out:", *ways_out(config)]  # fmt: skip
        if hatch:
            report.notes.append("llm.start_without_llm = true: `serve` starts anyway "
                                "(shortcuts answer, the rest apologises).")
        return probe
    report.add("LLM", "server", OK, f"{llm.base_url} answers /models")
    if llm.model in probe.models:
        report.add("LLM", "model", OK, f"{llm.model} listed")
    else:
        report.add("LLM", "model", FAIL, f"llm.model {llm.model!r} is not served there (it serves {probe.models})", hatch)
    if probe.turn is not None:
        ft = probe.first_token_ms or 0.0
        report.figures["llm_first_token_ms"] = ft
        slow = ft > llm.first_token_timeout_ms
        detail = (f"schema-valid turn (intent {probe.turn['intent']}, category {probe.turn['category']}); "
                  f"first token {ft:.0f} ms, whole answer {probe.total_ms:.0f} ms")  # fmt: skip
        if slow:
            detail += f": slower than llm.first_token_timeout_ms = {llm.first_token_timeout_ms} (cold cache?)"
        report.add("LLM", "structured answer", WARN if slow else OK, detail)
    else:
        report.add("LLM", "structured answer", FAIL, probe.problem or "no answer", hatch)
    return probe


def vllm_processes() -> list[tuple[int, list[str]]]:
    """(pid, command line) of the ``vllm serve`` processes on this host (from /proc; empty elsewhere)."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            args = [a.decode(errors="replace") for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        head = [Path(a).name for a in args[:3]]
        if ("vllm" in head and "serve" in args[:4]) or any("vllm.entrypoints.openai.api_server" in a for a in args[:4]):
            out.append((int(d.name), args))
    return out


def vllm_cmdlines() -> list[list[str]]:
    """Command lines of the ``vllm serve`` processes on this host (from /proc; empty elsewhere)."""
    return [args for _, args in vllm_processes()]


def _flags(args: list[str]) -> dict[str, str | None]:
    flags: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
                value, i = args[i + 1], i + 1
            flags[name] = value if (eq or value) else None
        i += 1
    return flags


def vllm_process_row(report: CheckReport, config: Config, cmdlines: list[list[str]] | None = None) -> None:
    """The running vLLM (same host): CUDA graphs on unless declared, and no drift from `llm-command`."""
    llm = config.llm
    if llm.backend == "local":
        return
    port = str(_port(llm.base_url))
    found = [c for c in (vllm_cmdlines() if cmdlines is None else cmdlines) if _flags(c).get("--port", "8000") == port]
    if not found:
        report.add("LLM", "vLLM process", SKIP, f"no `vllm serve` on port {port} of this host (remote, fake or "
                   "local model): its flags cannot be compared with `run_bot.py llm-command`")  # fmt: skip
        return
    running = _flags(found[0])
    wanted = _flags(llm_command(config)[3:])
    eager = "--enforce-eager" in running
    if eager and not llm.server_enforce_eager:
        report.add("LLM", "vLLM process", FAIL, "vLLM runs with --enforce-eager (CUDA graphs OFF: slower decoding) "
                   "but llm.server_enforce_eager = false; restart it with `run_bot.py llm-command`")  # fmt: skip
        return
    drift = [f"{k} {running.get(k) or ('absent' if k not in running else 'set')} (config: {v or 'set'})"
             for k, v in wanted.items() if k not in ("--host", "--enforce-eager") and running.get(k, "absent") != v]
    if drift:
        report.add("LLM", "vLLM process", WARN, "the running vLLM differs from `run_bot.py llm-command`: "
                   + "; ".join(drift))  # fmt: skip
    else:
        report.add("LLM", "vLLM process", OK, f"its flags match `run_bot.py llm-command`; CUDA graphs "
                   f"{'OFF (declared: llm.server_enforce_eager)' if eager else 'on'}")  # fmt: skip


def _port(url: str) -> int:
    parsed = urlparse(url)
    return parsed.port or (443 if parsed.scheme == "https" else 80)


def llm_command(config: Config) -> list[str]:
    """``vllm serve`` for the configured model, built from ``[llm]`` (one source of truth)."""
    llm = config.llm
    host = urlparse(llm.base_url).hostname or "127.0.0.1"
    cmd = ["vllm", "serve", llm.model]
    if host in ("localhost", "127.0.0.1", "::1"):
        cmd += ["--host", "127.0.0.1"]
    cmd += ["--port", str(_port(llm.base_url)),
            "--max-model-len", str(llm.max_model_len),
            "--gpu-memory-utilization", f"{llm.gpu_memory_utilization:g}",
            "--max-num-seqs", str(llm.max_num_seqs)]  # fmt: skip
    if llm.enable_prefix_caching:
        cmd.append("--enable-prefix-caching")
    cmd += ["--structured-outputs-config", json.dumps({"backend": llm.structured_output_backend}, separators=(",", ":"))]
    if llm.kv_cache_dtype != "auto":
        cmd += ["--kv-cache-dtype", llm.kv_cache_dtype]
    if llm.server_enforce_eager:
        cmd.append("--enforce-eager")  # declared escape hatch: CUDA graphs off
    return cmd


def llm_command_line(config: Config, *, docker: bool = False, venv: Path | None = None) -> str:
    """The command that starts the vLLM the bot is written for: its own venv's ``vllm serve``
    (``scripts/setup.sh --vllm``), or with ``docker`` the pinned container image."""
    return " ".join(shlex.quote(x) for x in vllm_launch(config, docker=docker, venv=venv))


# ---------------------------------------------------------------------------------------------
# Where vLLM comes from: its own venv (scripts/setup.sh --vllm) or the container image, never the
# bot's .venv (it pins its own torch and an older FastAPI; docs/cuda.md).

#: The vLLM release the bot's ``llm-command`` flags and structured-output requests are written for:
#: requirements/vllm.in, the image tag in deploy/vllm-values.yaml (tests/test_install_sets.py).
VLLM_VERSION = "0.33.0"
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
#: ``scripts/setup.sh --vllm`` makes this venv (requirements-vllm.txt).
VLLM_VENV = Path(__file__).resolve().parent.parent / ".venv-vllm"


def _shown(path: Path) -> str:
    """A path relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def installed_vllm(venv: Path | None = None) -> str | None:
    """The vLLM version installed in the vLLM venv, or None when there is none."""
    venv = venv or VLLM_VENV
    if not (venv / "bin" / "vllm").exists():
        return None
    for meta in sorted(venv.glob("lib/python3*/site-packages/vllm-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown version"


def vllm_launch(config: Config, *, docker: bool = False, venv: Path | None = None) -> list[str]:
    """``llm_command`` with the vLLM to run it: the venv's ``bin/vllm``, or ``docker run`` of the
    pinned image (its entrypoint is ``vllm serve``; inside the container vLLM listens on every
    address and the port is published on the host's side instead)."""
    llm = config.llm
    cmd = llm_command(config)
    if not docker:
        return [_shown((venv or VLLM_VENV) / "bin" / "vllm"), *cmd[1:]]
    port = str(_port(llm.base_url))
    local = (urlparse(llm.base_url).hostname or "127.0.0.1") in ("localhost", "127.0.0.1", "::1")
    flags = cmd[3:]
    if "--host" in flags:
        i = flags.index("--host")
        flags = flags[:i] + flags[i + 2:]
    hf_home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return ["docker", "run", "--rm", "--gpus", "all", "--ipc=host",
            "-p", f"127.0.0.1:{port}:{port}" if local else f"{port}:{port}",
            "-v", f"{hf_home}:/root/.cache/huggingface", "--env", "HF_TOKEN",
            VLLM_IMAGE, llm.model, *flags]  # fmt: skip


def vllm_server_version(config: Config, timeout_s: float = 3.0) -> str | None:
    """What the server at ``llm.base_url`` says it is (vLLM answers ``GET /version``), or None."""
    parsed = urlparse(config.llm.base_url)
    try:
        r = httpx.get(f"{parsed.scheme}://{parsed.netloc}/version", timeout=timeout_s)
        r.raise_for_status()
        version = r.json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return str(version) if version else None


def _process_origin(pid: int, args: list[str], venv: Path) -> str:
    """Where a running ``vllm serve`` comes from: this checkout's vLLM venv, a container, or elsewhere."""
    exe = next((a for a in args[:3] if Path(a).name == "vllm"), args[0] if args else "?")
    try:
        if Path(exe).resolve().is_relative_to(venv.resolve()):
            return f"{_shown(venv)} (scripts/setup.sh --vllm)"
    except OSError:
        pass
    try:
        here, there = os.stat("/proc/self/root"), os.stat(f"/proc/{pid}/root")
        if (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            return f"a container ({exe} inside it)"
    except OSError:
        pass
    return f"{exe} (not this checkout's vLLM venv)"


def vllm_source_row(report: CheckReport, config: Config, probe: Probe | None = None, *,
                    processes: list[tuple[int, list[str]]] | None = None, server_version: str | None = None,
                    venv: Path | None = None) -> None:  # fmt: skip
    """``check``: where the vLLM behind ``llm.base_url`` comes from and which release it is. The
    flags of ``llm-command`` and the structured-output requests are written for VLLM_VERSION."""
    llm = config.llm
    if llm.backend == "local":
        return
    venv = venv or VLLM_VENV
    port = str(_port(llm.base_url))
    local = installed_vllm(venv)
    here = (f"{_shown(venv)} holds vLLM {local}" if local else
            f"no {_shown(venv)} here (scripts/setup.sh --vllm, or the image {VLLM_IMAGE})")  # fmt: skip
    if probe is None or not probe.reachable:
        report.add("LLM", "vLLM source", SKIP, f"no server to ask; {here}")
        return
    procs = vllm_processes() if processes is None else processes
    found = [(pid, a) for pid, a in procs if _flags(a).get("--port", "8000") == port]
    # server_version: what GET /version said ("" = nothing); None = ask the server now.
    version = vllm_server_version(config) if server_version is None else (server_version or None)
    if found:
        pid, args = found[0]
        origin = _process_origin(pid, args, venv)
        if version is None and origin.startswith(_shown(venv)):
            version = local
        where = f"this host, pid {pid}: {origin}"
    else:
        where = f"{llm.base_url} (no `vllm serve` of this host on port {port}: remote, a router, or not vLLM)"
    if version is None:
        report.add("LLM", "vLLM source", SKIP, f"{where}; it does not say a vLLM version (GET /version): a fake, "
                   f"a router or another OpenAI-compatible server. {here}")  # fmt: skip
    elif version != VLLM_VERSION:
        report.add("LLM", "vLLM source", WARN, f"{where}: vLLM {version}, but llm-command and the structured "
                   f"requests are written for vLLM {VLLM_VERSION} (requirements-vllm.txt, {VLLM_IMAGE})")  # fmt: skip
    else:
        report.add("LLM", "vLLM source", OK, f"{where}: vLLM {version}, the pinned release")


# ---------------------------------------------------------------------------------------------
# The whole check


def access_rows(report: CheckReport, config: Config, secrets) -> None:
    """Who can read what: the records API and the operations listener (never citizens' data in the open)."""
    if secrets.records_api_token:
        report.add("access", "records API", OK, "/api/turns needs Authorization: Bearer $RECORDS_API_TOKEN")
    else:
        report.add("access", "records API", OK, "off: /api/turns answers 404 (set env RECORDS_API_TOKEN to read "
                   "turn records over HTTP: bench --url, call)")
    host, port = config.server.admin_host, config.server.admin_port
    if port == config.server.port and host in (config.server.host, "0.0.0.0"):
        report.add("access", "operations listener", FAIL, f"server.admin_port {port} is the public port: "
                   "/metrics and /readyz must not share the public listener")
    else:
        where = "this machine only" if host in ("127.0.0.1", "localhost", "::1") else \
            "bound beyond loopback: keep it off the Ingress/public firewall"
        report.add("access", "operations listener", OK, f"http://{host}:{port} (/metrics, /readyz, /healthz "
                   f"figures): {where}")


def line_rows(report: CheckReport, config: Config) -> None:
    """The desk's calendar: a bad hours spec fails here, by key; the year's closed days are counted."""
    from bot.dialog.calendar import LineCalendar

    try:
        cal = LineCalendar.from_config(config.line)
    except ValueError as e:
        report.add("line", "hours", FAIL, str(e))
        return
    now = cal.now()
    state = "open now" if cal.is_open(now) else f"closed now, opens {cal.opening_phrase(now).removesuffix('에')}"
    report.add("line", "hours", OK, f"{cal.hours_phrase()} ({config.line.timezone}); {state}")
    closed = cal.closed_days(now.year)
    desk = "transfers to the desk in hours" if config.call.transfer_number else "no desk (call.transfer_number empty)"
    report.add("line", "closed days", OK, f"{len(closed)} weekdays in {now.year} (Korea's public holidays"
               f"{' + ' + str(len(config.line.extra_closed_days)) + ' extra' if config.line.extra_closed_days else ''}); {desk}")


def timing_row(report: CheckReport, config: Config, secrets) -> None:
    """The last start's self-timing on this host and config (bot/selftime.py), from the records database."""
    from bot.selftime import config_key
    from bot.store.db import open_store

    if not config.records.enabled:
        report.add("timing", "startup self-timing", SKIP, "records.enabled = false: nothing recorded")
        return
    try:
        store = open_store(config, secrets)
    except Exception as e:  # noqa: BLE001 - shown as a row, not raised
        report.add("timing", "startup self-timing", SKIP, f"records database unreachable: {e}")
        return
    try:
        last, good = store.latest_timing(socket.gethostname(), config_key(config))
    finally:
        store.close()
    if last is None:
        report.add("timing", "startup self-timing", SKIP, "no start recorded yet on this host and config")
        return
    figs = ", ".join(f"{k} {v:.0f} ms" for k, v in last["figures"].items())
    when = f"{last['measured_at']:%Y-%m-%d %H:%M} UTC"
    if last["good"]:
        report.add("timing", "startup self-timing", OK, f"last start {when}: {figs}")
    else:
        before = ", ".join(f"{k} {v:.0f} ms" for k, v in (good or {}).items())
        report.add("timing", "startup self-timing", WARN, f"last start {when} was MUCH SLOWER than the last good "
                   f"one: {figs} (last good: {before})")


def run_check(config: Config, *, secrets=None, tts_engine=None, whisper_engine=None, vad_session=None,
              probe: Probe | None = None, card: tuple[str, float] | str | None = None,
              wheels: Iterable[tuple[str, str]] | None = None, timing: bool = True) -> CheckReport:  # fmt: skip
    """Every row. Engines already loaded (``serve``) are reused; otherwise the TTS is loaded here.
    ``timing``: the last start's self-timing row (``serve`` skips it: it times this start itself)."""
    from bot.config import Secrets
    from bot.hatches import escape_hatches

    secrets = secrets or Secrets.from_env(config)
    report = CheckReport()
    budget_rows(report, config, card_memory() if card is None else card)
    wheel_rows(report, config, wheels)
    tts_engine = provider_rows(report, config, tts_engine, vad_session)
    ctranslate2_row(report, config)
    probe = llm_rows(report, config, secrets.llm_api_key, probe)
    vllm_process_row(report, config)
    vllm_source_row(report, config, probe)
    access_rows(report, config, secrets)
    line_rows(report, config)
    if timing:
        timing_row(report, config, secrets)
    for h in escape_hatches(config, tts_engine=tts_engine, whisper_engine=whisper_engine, secrets=secrets):
        report.add("hatch", "escape hatch", HATCH, h)
    return report


def startup_check(config: Config, models, secrets) -> tuple[list[str], dict[str, float]]:
    """``serve``'s check with the loaded models: logs the table, raises ``StartupError`` on a failure
    that no declared hatch covers, returns banner lines for the failures a hatch lets through and
    the figures the self-timing reuses."""
    from loguru import logger

    from bot.errors import StartupError

    report = run_check(config, secrets=secrets, tts_engine=models.tts, whisper_engine=models.whisper,
                       vad_session=models.vad_session, timing=False)  # fmt: skip
    # The hatch rows go into the banner (bot/hatches.py) already; the table shows the rest.
    shown = CheckReport([r for r in report.rows if r.area != "hatch"], report.notes)
    for line in ("startup check (run_bot.py check):\n" + shown.table()).splitlines():
        (logger.warning if report.failures else logger.info)(line)
    if report.blocking:
        names = "; ".join(f"{r.area} {r.item}: {r.detail}" for r in report.blocking)
        raise StartupError(f"startup check failed, not serving: {names}")
    return ([f"STARTED DESPITE A FAILED CHECK ({r.hatch}): {r.area} {r.item}: {r.detail}" for r in report.failures],
            report.figures)


def cmd_check(config: Config) -> int:
    """``run_bot.py check``: print the table; 1 when any row failed (escape hatch or not)."""
    report = run_check(config)
    print(report.table())
    return 1 if report.failures else 0
