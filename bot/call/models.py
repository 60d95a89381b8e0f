"""The process-wide models and data every call shares, loaded once at startup (``load_models``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from loguru import logger

from bot import languages
from bot.call.assets import DialogAssets
from bot.call.noise_filter import check_noise_filter
from bot.config import Config
from bot.core.kiwi import load_kiwi
from bot.stages.silero_vad import load_silero_session
from bot.stages.supertonic import CannedAudio, SupertonicEngine
from bot.stages.whisper import WhisperEngine

# Output rates of the phone path (8 kHz) and the WebRTC QA page.
CANNED_RATES = (8000, 24000)


@dataclass
class SharedModels:
    """Loaded once per process at startup, shared by every call. Holds no per-call state."""

    whisper: WhisperEngine
    tts: SupertonicEngine
    vad_session: object
    assets: DialogAssets
    canned_audio: CannedAudio | None = None
    # Normalized text of each canned sentence -> its name (what ``TurnRecord.heard`` lists).
    heard_ids: dict[str, str] = field(default_factory=dict)
    self_timing: object | None = None  # bot.ops.selftime.SelfTiming of this start (serve sets it)


def load_models(config: Config) -> SharedModels:
    """Load every model once (blocking: run at startup, before serving calls)."""
    from bot.modelfiles.manifest import resolve_whisper_model

    check_noise_filter(config)
    logger.info("loading models (once per process)")
    whisper = WhisperEngine(config.stt, resolve_whisper_model(config.stt, config.base_dir), min_avg_logprob=config.stt.min_avg_logprob)
    whisper.warmup()
    tts = SupertonicEngine(config.tts, base_dir=config.base_dir)
    tts.warmup(config.tts.warmup_lengths)
    assets = DialogAssets.load(config)
    if assets.emergency.lemmas is not None:
        load_kiwi()  # the emergency grammar's analyzer, built now rather than in the first caller's first turn
    canned = _canned_audio(config, tts, assets) if config.tts.canned_audio else None
    heard_ids = _heard_ids(config, canned, assets) if canned is not None else {}
    return SharedModels(whisper=whisper, tts=tts, vad_session=load_silero_session(), assets=assets, canned_audio=canned,
                        heard_ids=heard_ids)


def _canned_audio(config: Config, tts: SupertonicEngine, assets: DialogAssets) -> CannedAudio:
    """Every fixed sentence of every language, synthesized at each output rate."""
    canned = CannedAudio().build(tts, assets.fixed_sentences(config.call.greeting, config.call.recording_notice),
                                 voice=config.tts.voice,
                                 sample_rates=list(CANNED_RATES))
    for code, pack in assets.languages.items():
        canned.build(tts, list(assets.language_sentences(code)), voice=config.tts.voice,
                     sample_rates=list(CANNED_RATES), language=pack.tag)
    return canned


def _heard_ids(config: Config, canned: CannedAudio, assets: DialogAssets) -> dict[str, str]:
    """Each canned sentence's normalized text -> the name turn records list it by."""
    heard_ids = {}
    first = languages.get(config.line.languages[0]).tag or config.line.languages[0]  # its canned audio's key
    named = [(first, assets.sentence_ids(config.call.greeting, config.call.recording_notice))]
    named += [(pack.tag, assets.language_sentences(code)) for code, pack in assets.languages.items()]
    for tag, ids in named:
        for text, name in ids.items():
            hit = canned.get(text, CANNED_RATES[0], config.tts.voice, tag)
            if hit is not None:
                heard_ids[hit.normalized_text] = name
    return heard_ids
