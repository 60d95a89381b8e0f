"""Sentences synthesized once at startup and played from memory (greeting, shortcuts, apology)."""

from __future__ import annotations

import dataclasses
import time

from loguru import logger

from bot import languages
from bot.stages.supertonic.engine import SupertonicEngine, SynthResult


class CannedAudio:
    """Sentences synthesized once at startup and played from memory (greeting, shortcuts, apology).

    Keyed by the exact text the dialog pushes, the output rate, the voice and the language tag
    (a multilingual line's other languages are built with theirs). Synthesis is seeded, so a cached
    sentence sounds exactly like a fresh one.
    """

    def __init__(self):
        self._items: dict[tuple[str, int, str, str], SynthResult] = {}

    def __len__(self) -> int:
        return len(self._items)

    def build(self, engine: SupertonicEngine, texts: list[str], *, voice: str, sample_rates: list[int],
              language: str | None = None) -> CannedAudio:
        """Synthesize every text once and keep it at every rate (blocking; startup only); ``language``:
        the TTS tag (None: the engine's default, Korean)."""
        t0 = time.perf_counter()
        before = len(self._items)
        for text in dict.fromkeys(t.strip() for t in texts if t.strip()):
            made = engine.synthesize_rates(text, sample_rates, voice=voice, language=language or languages.FIRST)
            for rate, result in made.items():
                self._items[(text, rate, voice, language or languages.FIRST)] = result
        logger.info(
            "canned audio: {} sentences ({} texts x {} Hz, voice {}, language {}) in {:.0f} ms", len(self._items) - before, len(texts), sample_rates, voice, language or languages.FIRST, (time.perf_counter() - t0) * 1000
        )
        return self

    def get(self, text: str, sample_rate: int, voice: str, language: str = languages.FIRST) -> SynthResult | None:
        hit = self._items.get((text.strip(), sample_rate, voice, language))
        return dataclasses.replace(hit, synth_ms=0.0) if hit else None
