"""Figures for ``audio.noise_filter`` (issue 26): Silero VAD on street noise with and without RNNoise.

    python scripts/noise_filter_figures.py

(a) VAD false starts: street-noise clips (sox: brown/pink noise, a low traffic rumble, passing-vehicle
bursts, a horn) at the phone rate, 8 kHz, fed in 20 ms frames to the product's VAD analyzer
(``SharedSileroVADAnalyzer`` over ``load_silero_session``, ``[vad]`` defaults), raw and through
Pipecat's ``RNNoiseFilter`` the way the input transport applies it. On noise-only clips every speech
start is a false start; on the same noise mixed with espeak-ng Korean speech the speech must still
be detected (a SPEAKING state that overlaps the speech).

(b) CPU: ``time.process_time`` of the filter over a 60 s 8 kHz clip, as a percentage of one core.

Needs sox, espeak-ng and pyrnnoise. Nothing is written outside a temporary directory.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter  # noqa: E402
from pipecat.audio.vad.vad_analyzer import VADState  # noqa: E402

from bot.config import VADConfig  # noqa: E402
from bot.stages.silero_vad import SharedSileroVADAnalyzer, load_silero_session  # noqa: E402

RATE = 8000
FRAME = 160  # 20 ms at 8 kHz, a Twilio media frame
NOISE_SECS = 20
LEAD_SECS = 1.5  # noise before the speech in the mixed clips

SENTENCES = [
    "쓰레기 수거 문의드리려고요",
    "불법주차 신고하려고요",
    "주민등록등본 떼려면 어떻게 해요",
]


def sox(*args: str) -> None:
    subprocess.run(["sox", "-R", *args], check=True, capture_output=True)


def out_fmt(path: Path) -> list[str]:
    return ["-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer", str(path)]


def make_noise(tmp: Path) -> dict[str, Path]:
    """Street-like noise clips, NOISE_SECS long, 8 kHz mono PCM16."""
    n = str(NOISE_SECS)
    rumble = tmp / "rumble.wav"  # engines/tyres: low-passed brown noise, slowly swelling
    sox("-n", *out_fmt(rumble), "synth", n, "brownnoise", "lowpass", "150", "tremolo", "0.15", "70", "vol", "0.9")
    burst = tmp / "burst.wav"  # one vehicle passing: pink noise that rises and falls over 1.6 s
    sox("-n", *out_fmt(burst), "synth", "1.6", "pinknoise", "band", "700", "900", "fade", "q", "0.7", "1.6", "0.8",
        "vol", "0.5", "pad", "0", "2.4")
    bursts = tmp / "bursts.wav"
    sox(str(burst), *out_fmt(bursts), "repeat", str(NOISE_SECS // 4 - 1))
    horn = tmp / "horn.wav"  # a car horn (two square tones) twice in the clip
    sox("-n", *out_fmt(horn), "synth", "0.6", "square", "420", "square", "520", "remix", "-", "lowpass", "2500",
        "fade", "0.02", "0.6", "0.05", "vol", "0.45", "pad", "6", "0", "repeat", "1")

    clips = {}
    clips["brown"] = tmp / "n_brown.wav"
    sox("-n", *out_fmt(clips["brown"]), "synth", n, "brownnoise", "vol", "0.25")
    clips["pink"] = tmp / "n_pink.wav"
    sox("-n", *out_fmt(clips["pink"]), "synth", n, "pinknoise", "vol", "0.08")
    base = tmp / "n_base.wav"
    sox("-n", *out_fmt(base), "synth", n, "brownnoise", "vol", "0.12")
    clips["traffic"] = tmp / "n_traffic.wav"
    sox("-m", "-v", "1", str(base), "-v", "1", str(rumble), "-v", "1", str(bursts), *out_fmt(clips["traffic"]), "trim", "0", n)
    clips["traffic+horn"] = tmp / "n_traffic_horn.wav"
    sox("-m", "-v", "1", str(clips["traffic"]), "-v", "1", str(horn), *out_fmt(clips["traffic+horn"]), "trim", "0", n)
    # Passers-by talking: reversed espeak-ng sentences, overlapped, muffled, under the traffic.
    parts = []
    for i, text in enumerate(SENTENCES * 2):
        raw = tmp / f"bab{i}.wav"
        subprocess.run(["espeak-ng", "-v", "ko", "-s", str(150 + 20 * i), "-p", str(30 + 8 * i), "-w", str(raw), text],
                       check=True, capture_output=True)
        part = tmp / f"babr{i}.wav"
        sox(str(raw), *out_fmt(part), "reverse", "lowpass", "1800", "reverb", "60", "pad", f"{i * 2.7:.1f}", "0")
        parts.append(part)
    babble = tmp / "babble.wav"
    sox("-m", *[a for p in parts for a in ("-v", "0.25", str(p))], *out_fmt(babble), "pad", "0", n, "trim", "0", n)
    clips["traffic+voices"] = tmp / "n_traffic_voices.wav"
    sox("-m", "-v", "1", str(clips["traffic"]), "-v", "1", str(babble), *out_fmt(clips["traffic+voices"]), "trim", "0", n)
    return clips


def make_speech(tmp: Path) -> list[tuple[Path, float]]:
    """espeak-ng Korean sentences at 8 kHz with LEAD_SECS of silence before; (path, speech seconds)."""
    out = []
    for i, text in enumerate(SENTENCES):
        raw = tmp / f"raw{i}.wav"
        subprocess.run(["espeak-ng", "-v", "ko", "-w", str(raw), text], check=True, capture_output=True)
        wav = tmp / f"s{i}.wav"
        sox(str(raw), *out_fmt(wav), "pad", str(LEAD_SECS), "1.0")
        speech = float(subprocess.run(["soxi", "-D", str(raw)], check=True, capture_output=True, text=True).stdout)
        out.append((wav, speech))
    return out


def read(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)


def mix(speech: np.ndarray, noise: np.ndarray) -> np.ndarray:
    total = speech.astype(np.int32) + noise[: len(speech)].astype(np.int32)
    return np.clip(total, -32768, 32767).astype(np.int16)


def dbfs(x: np.ndarray) -> float:
    return 20 * np.log10(max(float(np.sqrt(np.mean((x.astype(np.float64) / 32768) ** 2))), 1e-9))


async def filtered(audio: np.ndarray) -> np.ndarray:
    """The audio through a fresh RNNoiseFilter in 20 ms frames, as the input transport applies it."""
    f = RNNoiseFilter()
    await f.start(RATE)
    out = [await f.filter(audio[i:i + FRAME].tobytes()) for i in range(0, len(audio) - FRAME + 1, FRAME)]
    await f.stop()
    return np.frombuffer(b"".join(out), dtype=np.int16)


async def vad_segments(session, audio: np.ndarray) -> list[tuple[float, float]]:
    """(start, end) seconds of each SPEAKING stretch from a fresh per-call analyzer."""
    vad = SharedSileroVADAnalyzer(session=session, config=VADConfig(), sample_rate=RATE)
    vad.set_sample_rate(RATE)
    segments, start, prev = [], None, VADState.QUIET
    for i in range(0, len(audio) - FRAME + 1, FRAME):
        state = await vad.analyze_audio(audio[i:i + FRAME].tobytes())
        t = i / RATE
        if state == VADState.SPEAKING and prev in (VADState.QUIET, VADState.STARTING):
            start = t
        if state == VADState.QUIET and prev != VADState.QUIET and start is not None:
            segments.append((start, t))
            start = None
        prev = state
    if start is not None:
        segments.append((start, len(audio) / RATE))
    return segments


async def main() -> int:
    session = load_silero_session()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        noises = {name: read(p) for name, p in make_noise(tmp).items()}
        speeches = [(read(p), secs) for p, secs in make_speech(tmp)]

        rows = []
        for name, noise in noises.items():
            row = {"noise": name, "level": dbfs(noise)}
            for label, prep in (("raw", None), ("rnnoise", filtered)):
                audio = noise if prep is None else await prep(noise)
                row[f"fs_{label}"] = len(await vad_segments(session, audio))
                found = 0
                for speech, secs in speeches:
                    clip = mix(speech, noise)
                    if prep is not None:
                        clip = await prep(clip)
                    segs = await vad_segments(session, clip)
                    if any(s < LEAD_SECS + secs and e > LEAD_SECS for s, e in segs):
                        found += 1
                row[f"sp_{label}"] = found
            rows.append(row)

        # (b) CPU of the filter alone, over 60 s of the traffic noise (tiled).
        long = np.tile(noises["traffic"], 60 // NOISE_SECS)
        assert len(long) == 60 * RATE
        t0 = time.process_time()
        out = await filtered(long)
        cpu = time.process_time() - t0

    n = len(SENTENCES)
    print(f"(a) Silero VAD ([vad] defaults) on {NOISE_SECS} s noise-only clips and {n} Korean sentences mixed into each noise, 8 kHz")
    print(f"{'noise':<14}{'level dBFS':>11}{'false starts raw':>18}{'false starts rnnoise':>22}"
          f"{'speech found raw':>18}{'speech found rnnoise':>22}")
    for r in rows:
        print(f"{r['noise']:<14}{r['level']:>11.1f}{r['fs_raw']:>18}{r['fs_rnnoise']:>22}"
              f"{r['sp_raw']:>15}/{n}{r['sp_rnnoise']:>19}/{n}")
    tot = {k: sum(r[k] for r in rows) for k in ("fs_raw", "fs_rnnoise", "sp_raw", "sp_rnnoise")}
    print(f"{'total':<14}{'':>11}{tot['fs_raw']:>18}{tot['fs_rnnoise']:>22}"
          f"{tot['sp_raw']:>15}/{n * len(rows)}{tot['sp_rnnoise']:>19}/{n * len(rows)}")
    print()
    print(f"(b) RNNoiseFilter CPU over a 60 s 8 kHz clip (20 ms frames, 8k<->48k soxr QQ inside): "
          f"{cpu:.2f} s CPU = {cpu / 60 * 1000:.1f} ms per audio second = {cpu / 60 * 100:.1f}% of one core per call "
          f"(output {len(out) / RATE:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
