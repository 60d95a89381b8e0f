"""Escape hatches: every setting that trades speed or safety for compatibility, said out loud.

They are logged in a banner at startup and printed in the header of every latency report, so a
figure is never read without knowing what was switched off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger

from bot.config import Config, Secrets

if TYPE_CHECKING:
    from bot.stages.supertonic import SupertonicEngine
    from bot.stages.whisper import WhisperEngine


def escape_hatches(config: Config, *, tts_engine: SupertonicEngine | None = None,
                   whisper_engine: WhisperEngine | None = None, secrets: Secrets | None = None) -> list[str]:
    """What is running in a degraded or unsafe mode right now."""
    hatches = []
    if not config.twilio.validate_signature:
        hatches.append("twilio.validate_signature=false: webhook signatures are NOT checked")
    if config.server.qa_page and secrets is not None and not secrets.qa_access_token:
        hatches.append("QA page open without a token (QA_ACCESS_TOKEN unset): anyone reaching this host can open calls")
    if config.llm.server_enforce_eager:
        hatches.append("vLLM --enforce-eager: CUDA graphs are off on the LLM server")
    if "tensorrt" not in config.tts.providers:
        hatches.append(f"TensorRT disabled for TTS (tts.providers={config.tts.providers})")
    if config.tts.allow_fallback:
        hatches.append("tts.allow_fallback=true: TTS sessions may run on a slower provider than required")
    if tts_engine is not None:
        if getattr(tts_engine, "fallback_active", False):
            hatches.append(f"TTS provider FALLBACK active: {tts_engine.session_providers}")
        if getattr(tts_engine, "is_standin", False):
            hatches.append("TTS model is a STAND-IN (random weights, not a voice): run `run_bot.py models`")
    if whisper_engine is not None and getattr(whisper_engine, "is_fixed_delay", False):
        hatches.append(f"STT is a FIXED-DELAY TEST ENGINE ({whisper_engine.model_path}): no speech is recognised")
    elif config.stt.device == "cpu":
        hatches.append(f"STT on CPU ({config.stt.compute_type}); production runs float16 on CUDA")
    elif whisper_engine is not None and getattr(whisper_engine, "device", None) == "cpu":
        hatches.append(f"STT asked for {config.stt.device} but runs on CPU")
    return hatches


def log_banner(hatches: list[str]) -> None:
    if not hatches:
        logger.info("no escape hatches active")
        return
    bar = "!" * 78
    logger.warning(bar)
    logger.warning("ESCAPE HATCHES ACTIVE (speed/safety traded for compatibility):")
    for h in hatches:
        logger.warning("  - {}", h)
    logger.warning(bar)
