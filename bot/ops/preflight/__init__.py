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
* **Models**: every STT and TTS file against ``models.toml`` (missing, partial or altered: FAIL with the
  file and both digests; NOT PINNED rows warn and say how to pin), and whether the LLM's revision is pinned.
* **Escape hatches** in effect (``bot/ops/hatches.py``).

``serve`` runs the same check at startup (with the models it loaded) and refuses to start on a
failure, unless a declared escape hatch covers it (``llm.start_without_llm``).

One module per concern; every name stays importable from ``bot.ops.preflight``: ``report`` (statuses,
rows, the table), ``gpu`` (the memory budget, NVML), ``runtime`` (onnxruntime wheels, ONNX
providers, ctranslate2), ``vllm`` (the ``llm-command`` line, where vLLM comes from, the running
process's flags), ``probes`` (the LLM server, model and structured answer), ``service`` (access,
the line's calendar, the last start's timing); this file runs them in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from bot.config import Config, Secrets
from bot.ops.preflight.gpu import (
    BOT_CONTEXT_BYTES,
    BYTES_PER_PARAM,
    GB,
    KV_BYTES,
    VLLM_RUNTIME_BYTES,
    WHISPER_PARAMS,
    WHISPER_WORK_BYTES,
    KVGeometry,
    LLMSize,
    budget_rows,
    card_memory,
    hf_snapshot,
    kv_cache_bytes,
    llm_size,
    needs_gpu,
    safetensors_bytes,
    tts_gpu_bytes,
    weight_bytes,
    whisper_gpu_bytes,  # fmt: skip
)
from bot.ops.preflight.models import model_rows
from bot.ops.preflight.probes import PROBE_CALLER_LINE, llm_rows, probe_llm, ways_out
from bot.ops.preflight.report import FAIL, HATCH, NO_GPU, OK, SKIP, WARN, CheckReport, Probe, Row
from bot.ops.preflight.runtime import ctranslate2_row, installed_onnxruntime_wheels, provider_rows, wheel_rows
from bot.ops.preflight.service import access_rows, line_rows, timing_row
from bot.ops.preflight.vllm import (
    VLLM_IMAGE,
    VLLM_VENV,
    VLLM_VERSION,
    installed_vllm,
    llm_command,
    llm_command_line,
    vllm_cmdlines,
    vllm_launch,
    vllm_process_row,
    vllm_processes,
    vllm_server_version,
    vllm_source_row,  # fmt: skip
)

if TYPE_CHECKING:
    from bot.ops.selftime import LoadedModels
    from bot.stages.supertonic import SupertonicEngine
    from bot.stages.whisper import WhisperEngine

__all__ = [
    "BOT_CONTEXT_BYTES", "BYTES_PER_PARAM", "FAIL", "GB", "HATCH", "KV_BYTES", "NO_GPU", "OK", "PROBE_CALLER_LINE",
    "SKIP", "VLLM_IMAGE", "VLLM_RUNTIME_BYTES", "VLLM_VENV", "VLLM_VERSION", "WARN", "WHISPER_PARAMS",
    "WHISPER_WORK_BYTES", "CheckReport", "KVGeometry", "LLMSize", "Probe", "Row", "access_rows", "budget_rows", "card_memory",
    "cmd_check", "ctranslate2_row", "hf_snapshot", "installed_onnxruntime_wheels", "installed_vllm", "kv_cache_bytes",
    "line_rows", "llm_command", "llm_command_line", "llm_rows", "llm_size", "model_rows", "needs_gpu", "probe_llm", "provider_rows",
    "run_check", "safetensors_bytes", "startup_check", "timing_row", "tts_gpu_bytes", "vllm_cmdlines", "vllm_launch",
    "vllm_process_row", "vllm_processes", "vllm_server_version", "vllm_source_row", "ways_out", "weight_bytes",
    "wheel_rows", "whisper_gpu_bytes",
]  # fmt: skip


def run_check(config: Config, *, secrets: Secrets | None = None, tts_engine: SupertonicEngine | None = None,
              whisper_engine: WhisperEngine | None = None, vad_session: Any = None,
              probe: Probe | None = None, card: tuple[str, float] | str | None = None,
              wheels: Iterable[tuple[str, str]] | None = None, timing: bool = True) -> CheckReport:  # fmt: skip
    """Every row. Engines already loaded (``serve``) are reused; otherwise the TTS is loaded here.
    ``timing``: the last start's self-timing row (``serve`` skips it: it times this start itself)."""
    from bot.ops.hatches import escape_hatches

    secrets = secrets or Secrets.from_env(config)
    report = CheckReport()
    budget_rows(report, config, card_memory() if card is None else card)
    wheel_rows(report, config, wheels)
    model_rows(report, config)
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


def startup_check(config: Config, models: LoadedModels, secrets: Secrets) -> tuple[list[str], dict[str, float]]:
    """``serve``'s check with the loaded models: logs the table, raises ``StartupError`` on a failure
    that no declared hatch covers, returns banner lines for the failures a hatch lets through and
    the figures the self-timing reuses."""
    from loguru import logger

    from bot.core.errors import StartupError

    report = run_check(config, secrets=secrets, tts_engine=models.tts, whisper_engine=models.whisper,
                       vad_session=models.vad_session, timing=False)  # fmt: skip
    # The hatch rows go into the banner (bot/ops/hatches.py) already; the table shows the rest.
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
