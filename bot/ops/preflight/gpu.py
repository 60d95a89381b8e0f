"""The GPU memory budget: the card (NVML), what vLLM's share must hold (weights, KV cache, linear-attention
state, runtime) and what the bot's share must hold (Whisper, the TTS sessions, the CUDA context)."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from bot.config import Config, LLMConfig
from bot.ops.preflight.report import FAIL, NO_GPU, OK, SKIP, CheckReport

GB = 1e9

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


def weight_bytes(total_params_b: float, dtype: str) -> float:
    """Bytes of an LLM's weights: total parameters (billions) x bytes per parameter."""
    if dtype not in BYTES_PER_PARAM:
        raise ValueError(f"unknown weight dtype {dtype!r} (one of {list(BYTES_PER_PARAM)})")
    return total_params_b * 1e9 * BYTES_PER_PARAM[dtype]


def kv_cache_bytes(tokens: int, kv_layers: int, kv_heads: int, head_dim: int, bytes_per_value: float = 2) -> float:
    """K and V for ``tokens`` tokens in every layer that holds a KV cache."""
    return 2.0 * kv_layers * kv_heads * head_dim * bytes_per_value * tokens


class KVGeometry(NamedTuple):
    """The shape of a model's KV cache, ``kv_cache_bytes``'s three numbers (0: unknown): the layers that hold
    one (a hybrid model's full-attention layers only), KV heads, head dimension."""

    layers: int = 0
    heads: int = 0
    head_dim: int = 0


@dataclass
class LLMSize:
    """What the LLM needs on the card; ``problems`` says what is unknown."""

    weight_bytes: float = 0.0
    total_params: float = 0.0
    dtype: str = ""
    source: str = ""
    kv: KVGeometry = KVGeometry()
    #: Recurrent state per sequence of a hybrid model's linear-attention layers (fixed size).
    state_bytes_per_seq: float = 0.0
    problems: list[str] = field(default_factory=list)

    def kv_bytes(self, llm: LLMConfig) -> float:
        tokens = llm.max_model_len * llm.max_num_seqs
        return kv_cache_bytes(tokens, *self.kv, KV_BYTES[llm.kv_cache_dtype])

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
    size = LLMSize(kv=KVGeometry(llm.kv_layers, llm.kv_heads, llm.head_dim),
                   source="declared: llm.total_params_b, llm.weight_dtype")  # fmt: skip
    if llm.total_params_b > 0 and llm.weight_dtype:
        size.dtype = llm.weight_dtype
        size.total_params = llm.total_params_b * 1e9
        size.weight_bytes = weight_bytes(llm.total_params_b, llm.weight_dtype)
    else:
        size.problems.append(f"{llm.model!r} is not a local directory: declare llm.total_params_b (MoE: total) "
                             "and llm.weight_dtype")  # fmt: skip
    if not all(size.kv):
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
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or (int(cfg.get("hidden_size") or 0) // heads if heads else 0))
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        kv_layers = sum(1 for t in types if "attention" in str(t) and "linear" not in str(t))
        linear = sum(1 for t in types if "linear" in str(t))
    elif cfg.get("full_attention_interval"):
        kv_layers = layers // int(cfg["full_attention_interval"])
        linear = layers - kv_layers
    else:
        kv_layers, linear = layers, 0
    size.kv = KVGeometry(kv_layers, kv_heads, head_dim)
    if linear:  # gated-delta-net state: value heads x key dim x value dim, fp32 (conservative)
        vh = int(cfg.get("linear_num_value_heads") or 0)
        kd, vd = int(cfg.get("linear_key_head_dim") or 0), int(cfg.get("linear_value_head_dim") or 0)
        size.state_bytes_per_seq = linear * vh * kd * vd * 4.0
    if not all(size.kv):
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
    from bot.stages.supertonic.files import SESSION_NAMES, session_file

    graphs = [session_file(config.path(tts.model_dir), name) for name in SESSION_NAMES]
    size = sum(p.stat().st_size for p in graphs) if all(p.is_file() for p in graphs) else 0.3 * GB
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
            per_token = kv_cache_bytes(1, *size.kv, KV_BYTES[llm.kv_cache_dtype])
            parts = [f"weights {_gb(size.weight_bytes)} ({size.total_params / 1e9:.1f}B params x "
                     f"{BYTES_PER_PARAM.get(size.dtype, 0):g} B {size.dtype}; {size.source})",
                     f"KV {_gb(kv)} ({llm.max_model_len} tok x {llm.max_num_seqs} seqs x {per_token / 1024:.0f} KB)"]
            if state:
                parts.append(f"linear-attention state {_gb(state)}")
            parts.append(f"runtime ~{_gb(VLLM_RUNTIME_BYTES)}")
            have = "" if share is None or total is None else (
                f" of {llm.gpu_memory_utilization:g} x {_gb(total)} = {_gb(share)}")
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
