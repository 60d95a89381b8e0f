"""Canned sentences are synthesized once at startup and played from memory."""

import dataclasses

from pipecat.frames.frames import (
    AggregatedTextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TTSAudioRawFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.services.settings import TTSSettings
from pipecat.tests.utils import run_test
from pipecat.utils.text.base_text_aggregator import TextType

from bot.call.assets import DialogAssets
from bot.config import TTSConfig, load_config
from bot.stages.supertonic import CannedAudio, SupertonicEngine, SupertonicTTSService


async def test_canned_sentences_play_from_memory_and_match_fresh_synthesis(standin_tts_dir):
    engine = SupertonicEngine(dataclasses.replace(TTSConfig(), model_dir=str(standin_tts_dir)))
    config = load_config()
    assets = DialogAssets.load(config)
    texts = assets.fixed_sentences(config.call.greeting)
    assert assets.canned.apology in texts and any("감사" in t for t in texts)
    canned = CannedAudio().build(engine, texts, voice="F1", sample_rates=[8000])
    greeting = canned.get(config.call.greeting, 8000, "F1")
    assert greeting is not None and greeting.synth_ms == 0.0
    assert greeting.pcm == engine.synthesize(config.call.greeting, 8000, voice="F1").pcm  # same voice, same audio
    assert canned.get(config.call.greeting, 24000, "F1") is None  # other rate: not prepared

    calls = []
    real = engine.synthesize
    engine.synthesize = lambda *a, **kw: calls.append(a[0]) or real(*a, **kw)
    tts = SupertonicTTSService(engine=engine, voice="F1", canned=canned, sample_rate=8000)
    down, _ = await run_test(tts, frames_to_send=[
        LLMFullResponseStartFrame(),
        AggregatedTextFrame(assets.canned.apology, TextType.SENTENCE),
        AggregatedTextFrame("처음 듣는 문장입니다.", TextType.SENTENCE),
        LLMFullResponseEndFrame(),
    ], expected_down_frames=None)
    assert calls == ["처음 듣는 문장입니다."]  # only the new sentence was synthesized
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert audio.startswith(canned.get(assets.canned.apology, 8000, "F1").pcm[:1600])


async def test_an_english_calls_fixed_sentences_are_synthesized_at_startup_with_the_english_tag(standin_tts_dir):
    engine = SupertonicEngine(dataclasses.replace(TTSConfig(), model_dir=str(standin_tts_dir)))
    config = load_config(None, ["line.languages=['ko','en']"])
    assets = DialogAssets.load(config)
    english = assets.language_sentences("en")
    canned_en = assets.languages["en"].canned
    assert english[canned_en.idle_prompt] == "idle_prompt" and english[canned_en.apology] == "apology"
    assert "{hours}" not in canned_en.closing_hours and "9 AM" in canned_en.closing_hours
    assert english[canned_en.closing_hours] == "closing_hours"
    assert english["Sure, once more."].startswith("shortcut:")
    built = []
    real_rates = engine.synthesize_rates
    engine.synthesize_rates = lambda *a, **kw: built.append(kw.get("language")) or real_rates(*a, **kw)
    canned = CannedAudio().build(engine, list(english), voice="F1", sample_rates=[8000], language="en")
    assert set(built) == {"en"} and len(built) == len(english)
    del engine.synthesize_rates
    real = engine.synthesize
    engine.synthesize = lambda *a, **kw: built.append(kw.get("language")) or real(*a, **kw)
    assert canned.get(canned_en.apology, 8000, "F1", "en") is not None
    assert canned.get(canned_en.apology, 8000, "F1") is None  # a Korean call never plays English audio

    built.clear()
    # A Korean call of a ko/en line; the dialog stage tells the TTS when the call moves (a settings frame).
    tts = SupertonicTTSService(engine=engine, voice="F1", canned=canned, sample_rate=8000, language="ko")
    frames = [LLMFullResponseStartFrame(), AggregatedTextFrame(canned_en.apology, TextType.SENTENCE),
              LLMFullResponseEndFrame()]
    await run_test(tts, frames_to_send=frames, expected_down_frames=None)
    assert built == ["ko"]  # in a Korean call: synthesized live with the call's tag
    built.clear()
    down, _ = await run_test(tts, frames_to_send=[TTSUpdateSettingsFrame(delta=TTSSettings(language="en")), *frames],
                             expected_down_frames=None)
    assert built == []  # in an English call: from memory
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert audio.startswith(canned.get(canned_en.apology, 8000, "F1", "en").pcm[:1600])


def test_each_canned_sentence_is_synthesized_once_for_every_rate_and_each_rate_is_a_fresh_synthesis(standin_tts_dir):
    # Startup time: the phone's 8 kHz and the QA page's 24 kHz come from one model run, resampled.
    engine = SupertonicEngine(dataclasses.replace(TTSConfig(), model_dir=str(standin_tts_dir)))
    texts = ["네, 말씀하세요.", "접수되었습니다. 감사합니다."]
    runs = []
    real = engine._synthesize_chunk
    engine._synthesize_chunk = lambda *a, **kw: runs.append(1) or real(*a, **kw)
    canned = CannedAudio().build(engine, texts, voice="F1", sample_rates=[8000, 24000])
    assert len(runs) == len(texts) and len(canned) == 2 * len(texts)
    for text in texts:
        for rate in (8000, 24000):
            hit = canned.get(text, rate, "F1")
            fresh = engine.synthesize(text, rate, voice="F1")
            assert hit is not None and hit.sample_rate == rate and hit.pcm == fresh.pcm
            assert hit.normalized_text == fresh.normalized_text and hit.model_duration_s == fresh.model_duration_s
