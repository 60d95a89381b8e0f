"""The model files against models.toml: missing, partial or altered files fail (naming file and digests);
rows NOT PINNED say so and how to pin; the offline set is said as what it is."""

from __future__ import annotations

from bot.config import Config
from bot.ops.preflight.report import FAIL, OK, WARN, CheckReport


def model_rows(report: CheckReport, config: Config) -> None:
    """One row per model: STT and TTS directories checked file by file, the LLM's pin."""
    from bot.modelfiles.manifest import HOW_TO_PIN, ModelCheck, llm_entry, verify_models

    try:
        checks = verify_models(config)
    except Exception as e:  # noqa: BLE001 - a broken manifest is a failed row, not a traceback
        report.add("models", "models.toml", FAIL, f"{type(e).__name__}: {e}")
        return
    for use, check in checks:
        if not isinstance(check, ModelCheck):
            report.add("models", use, WARN, check)
        elif check.problems:
            report.add("models", use, FAIL, check.summary())
        elif not check.pinned:
            report.add("models", use, WARN, check.summary())
        else:
            report.add("models", use, WARN if check.entry.offline else OK, check.summary())
    entry = llm_entry(config)
    if entry is None:
        report.add("models", "llm", WARN, f"llm.model {config.llm.model!r} is not in models.toml: vLLM takes what "
                   "its repository holds")
    elif entry.revision:
        report.add("models", "llm", OK, f"{entry.repo} pinned at {entry.revision} (llm-command passes --revision)")
    else:
        report.add("models", "llm", WARN, f"{entry.repo}: NOT PINNED (vLLM takes its newest commit); {HOW_TO_PIN}")
