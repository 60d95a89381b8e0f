"""An STT whose time the test controls: a fixed delay, then the clip's known text.

Real Whisper on 2 CPU cores takes 0.3 s or 1.5 s for the same clip depending on the machine and
its load, so a test that holds the bot to a silence limit with real Whisper in the path measures
the machine. ``FixedDelayEngine`` has the ``WhisperEngine`` interface the product's STT stage
uses (``transcribe_async``) and answers every segment long enough to be speech with ``text``
after exactly ``delay_s`` (an ``asyncio`` sleep: it never occupies a core); a scripted call
gives each accepted segment its own text instead (``script``, in order). The product's
``WhisperSTTProcessor`` (guards, unclear speech, final-transcript marking) runs unchanged on it;
``FixedDelaySTTService`` is that processor on this engine, for tests that build a pipeline.

Real-Whisper figures are the benchmarks' (``run_bot.py faults``, ``run_bot.py bench``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Iterable

from bot.config import STTConfig
from bot.stages.whisper import TranscriptResult, WhisperSTTProcessor


class FixedDelayEngine:
    """``WhisperEngine``'s async interface with a fixed, configured transcription time.

    Args:
        text: What every accepted segment transcribes to (the clip's known words).
        delay_s: Seconds each transcription takes.
        min_speech_s: Shorter segments come back rejected as ``empty`` (as Whisper's guards
            reject a click), so a stray VAD blip does not open a turn.
        cfg: The ``[stt]`` section (the processor reads its language from it).
        script: Texts for the accepted segments, one each in order (a scripted call: "네" over the
            reply, then "아니요 잠깐만요"); ``text`` once they are used up. An item may also be
            ``{"text": ..., "language": "vi", "p": 0.93}``: on a line with auto detection, what
            Whisper's language probabilities would say of that segment (robot voices of vi, ru and
            zh are not recognized by Whisper base, so tests of detection fix its answer here).
    """

    device = "fixed-delay"
    is_fixed_delay = True

    def __init__(self, text: str, delay_s: float, *, min_speech_s: float = 0.25, cfg: STTConfig | None = None,
                 script: Iterable[str | dict] = ()):
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        if not text.strip():
            raise ValueError("text must not be empty")
        self.text = text.strip()
        self.delay_s = delay_s
        self.min_speech_s = min_speech_s
        self.cfg = cfg or STTConfig()
        self.model_path = f"fixed-delay-{round(delay_s * 1000)}ms"
        self.warmup_ms = delay_s * 1000
        self.calls = 0
        self.script = collections.deque(
            ({"text": t.strip()} if isinstance(t, str) else {**t, "text": str(t.get("text", "")).strip()}) for t in script)
        if any(not t["text"] for t in self.script):
            raise ValueError("script texts must not be empty")

    def scripted(self, script: Iterable[str | dict]) -> FixedDelayEngine:
        """A copy for one call whose segments say ``script`` in order (the engine is shared by calls)."""
        return FixedDelayEngine(self.text, self.delay_s, min_speech_s=self.min_speech_s, cfg=self.cfg, script=script)

    def warmup(self) -> float:
        return self.warmup_ms

    def transcribe(self, pcm16: bytes, sample_rate: int, *, language: str | None = None) -> TranscriptResult:
        """Blocking form (``run_bot.py transcribe``-style callers): the same answer, slept in place."""
        time.sleep(self.delay_s)
        return self._result(pcm16, sample_rate, language)

    async def transcribe_async(self, pcm16: bytes, sample_rate: int, *, language: str | None = None,
                               detect: tuple[str, ...] | None = None, decode_p: float = 0.5) -> TranscriptResult:
        await asyncio.sleep(self.delay_s)
        return self._result(pcm16, sample_rate, language, detect, decode_p)

    def _result(self, pcm16: bytes, sample_rate: int, language: str | None,
                detect: tuple[str, ...] | None = None, decode_p: float = 0.5) -> TranscriptResult:
        self.calls += 1
        secs = len(pcm16) / 2 / sample_rate if sample_rate else 0.0
        ms = self.delay_s * 1000
        rtf = ms / 1000 / secs if secs else 0.0
        lang = language or self.cfg.language
        if secs < self.min_speech_s:
            return TranscriptResult("", secs, ms, rtf, "empty", lang)
        item = self.script.popleft() if self.script else {"text": self.text}
        if not detect:
            return TranscriptResult(item["text"], secs, ms, rtf, None, lang, avg_logprob=-0.1, no_speech_prob=0.0)
        # Whisper's language probabilities, as the item fixes them (the current language, sure, by default).
        heard, p = item.get("language", lang), float(item.get("p", 1.0))
        served = heard in detect
        detected, language_p = (heard, p) if served else (lang, round(1.0 - p, 3))
        decoded = heard if served and p >= decode_p else lang
        return TranscriptResult(item["text"], secs, ms, rtf, None, decoded, avg_logprob=-0.1, no_speech_prob=0.0,
                                detected=detected, language_p=language_p, heard=heard, heard_p=p)

    def close(self) -> None:
        pass


class FixedDelaySTTService(WhisperSTTProcessor):
    """The product's segmented STT stage on a ``FixedDelayEngine`` (a real Pipecat STT service)."""

    def __init__(self, *, text: str, delay_s: float, language: str = "ko", min_speech_s: float = 0.25, **kwargs):
        self.fixed_engine = FixedDelayEngine(text, delay_s, min_speech_s=min_speech_s)
        super().__init__(engine=self.fixed_engine, language=language, **kwargs)


def parse_script(value: str) -> list[str | dict]:
    """A stream's ``stt_script`` custom parameter: a JSON list of texts, or of
    ``{"text": ..., "language": ..., "p": ...}`` objects (the language Whisper would hear)."""
    items = json.loads(value)

    def ok(t) -> bool:
        if isinstance(t, str):
            return bool(t.strip())
        return (isinstance(t, dict) and isinstance(t.get("text"), str) and bool(t["text"].strip())
                and isinstance(t.get("language", ""), str) and isinstance(t.get("p", 1.0), (int, float)))

    if not isinstance(items, list) or not all(ok(t) for t in items):
        raise ValueError("stt_script must be a JSON list of non-empty strings or {text, language, p} objects")
    return items
