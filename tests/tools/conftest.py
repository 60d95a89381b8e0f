"""Helpers the bench, baseline and capacity tests share: a synthetic run and the goodbye's STT window."""

from __future__ import annotations

from bot.telemetry.latency import TurnRecord
from bot.tools.bench import CallerTurn, CallResult, RunResult

HATCHES = ["STT on CPU (int8); production runs float16 on CUDA", "TTS model is a STAND-IN (random weights, not a voice)"]
ENV = {
    "stt": {"model": "models/whisper-base", "device": "cpu", "compute_type": "int8", "beam_size": 1},
    "tts": {"providers": {"vocoder": ["CPUExecutionProvider"], "text_encoder": ["CPUExecutionProvider"]},
            "voice": "F1", "steps": 5, "standin": True},
    "llm": {"model": "fake-model", "dialect": "openai", "base_url": "http://127.0.0.1:1/v1"},
    "escape_hatches": HATCHES,
}  # fmt: skip


def _turn(call_id: str, index: int, route: str, t0: float, *, llm_calls: int | None = None, v2v: float = 0.9,
          interrupted: bool = False) -> dict:
    rec = TurnRecord(call_id=call_id, index=index, route=route)
    if route == "greeting":
        rec.stream_start = t0 - 0.04
        rec.first_sentence, rec.tts_first_audio, rec.first_audio_out = t0, t0 + 0.05, t0 + 0.06
        return rec.to_dict()
    rec.speech_end, rec.vad_stop, rec.stt_done, rec.turn_end = t0, t0 + 0.2, t0 + 0.5, t0 + 0.8
    if route == "llm":
        rec.llm_request, rec.llm_first_token = t0 + 0.8, t0 + 0.85
    rec.first_sentence = t0 + (0.88 if route == "llm" else 0.8)
    rec.tts_first_audio = t0 + v2v - 0.01
    rec.first_audio_out = t0 + v2v
    rec.tts_first_audible, rec.lead_silence_ms = rec.tts_first_audio, 30.0  # 30 ms of leading silence
    rec.llm_calls = (1 if route == "llm" else 0) if llm_calls is None else llm_calls
    rec.interrupted = interrupted
    return rec.to_dict()


def _synthetic_run(system: str = "ours", *, llm_calls: int = 1, extra_turn: bool = False, scale: float = 1.0) -> RunResult:
    """Two calls: A (llm, llm, shortcut goodbye) and B (llm, then a turn the server never recorded)."""
    t = 1_000_000.0
    calls, turns = [], []
    for name, script in (("CA" + "a" * 32, ["trash", "bulky", "bye"]), ("CA" + "b" * 32, ["parking", "water"])):
        call = CallResult(name, script, greeting_ms=150.0 * scale)
        turns.append(_turn(name, 0, "greeting", t))
        for i, tid in enumerate(script, 1):
            start = t + 10 * i
            expected = "shortcut" if tid == "bye" else "llm"
            ct = CallerTurn(name, i, tid, tid, expected, f"{tid}.wav", speech_start=start, speech_end=start + 1.5,
                            pause_ms=500.0, first_audio=start + 1.5 + scale, caller_ttfa_ms=1000.0 * scale)
            call.turns.append(ct)
            if name.endswith("b" * 32) and i == 2:
                ct.no_answer, ct.first_audio, ct.caller_ttfa_ms = True, None, None
                continue
            actual = "shortcut" if tid == "bye" else "llm"
            turns.append(_turn(name, i, actual, start + 1.5, v2v=0.95 * scale,
                               llm_calls=llm_calls if (i == 1 and actual == "llm") else None))
        if extra_turn and name.startswith("CAa"):
            turns.append(_turn(name, 4, "llm", t + 10 * 3 + 4.0))  # after the last spoken turn
        calls.append(call)
    return RunResult(system, "http://127.0.0.1:9", calls, turns, ENV,
                     {"n": 3000, "p50_ms": 0.2, "p99_ms": 3.5, "max_ms": 41.0}, {"p99_ms": 5.0, "max_ms": 41.0},
                     started=t, wall_secs=42.0)


# The real runs need the bot to hear the goodbye and hang up. bench/turns.toml's "안녕히 계세요" was
# picked as the clip Whisper base reads right through the phone path with the 30 s window; with the
# 10 s default it reads it in about half the calls (docs/production.md), so these runs keep 30 s.
GOODBYE_WINDOW_S = 30
