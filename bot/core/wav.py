"""One WAV reader for every caller: any WAV (PCM, float, 8 kHz μ-law or A-law, mono or more) as mono PCM16."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_FLOAT = 0x0003
_WAVE_FORMAT_ALAW = 0x0006
_WAVE_FORMAT_MULAW = 0x0007
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE


def _mulaw_table() -> np.ndarray:
    """G.711 mu-law byte -> 16-bit linear PCM."""
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


def _alaw_table() -> np.ndarray:
    """G.711 A-law byte -> 16-bit linear PCM."""
    a = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (a >> 4) & 0x07
    mantissa = a & 0x0F
    magnitude = np.where(
        exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0)
    )
    return np.where(a & 0x80, magnitude, -magnitude).astype(np.int16)


_MULAW = _mulaw_table()
_ALAW = _alaw_table()


def read_wav(path: str | Path) -> tuple[bytes, int]:
    """Read a WAV file as mono 16-bit PCM.

    Handles PCM (8/16/24/32-bit), 32/64-bit float, G.711 mu-law and A-law (Twilio
    recordings), including WAVE_FORMAT_EXTENSIBLE; stereo and more channels are averaged.

    Returns:
        (pcm16 mono bytes, sample rate)

    Raises:
        ValueError: Not a WAV file, or an encoding it can't decode.
    """
    data = Path(path).read_bytes()
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a RIFF/WAVE file")
    fmt: tuple[int, int, int, int] | None = None
    samples: bytes | None = None
    pos = 12
    while pos + 8 <= len(data):
        chunk_id, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + size]
        if chunk_id == b"fmt ":
            tag, channels, rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", body[:16])
            if tag == _WAVE_FORMAT_EXTENSIBLE and len(body) >= 26:
                tag = struct.unpack("<H", body[24:26])[0]  # first two bytes of the sub-format GUID
            fmt = (tag, channels, rate, bits)
        elif chunk_id == b"data":
            samples = body
        pos += 8 + size + (size & 1)
    if fmt is None or samples is None:
        raise ValueError(f"{path}: WAV file without fmt or data chunk")
    tag, channels, rate, bits = fmt
    if channels < 1 or rate <= 0:
        raise ValueError(f"{path}: bad WAV header ({channels} channels, {rate} Hz)")

    if tag == _WAVE_FORMAT_MULAW and bits == 8:
        x = _MULAW[np.frombuffer(samples, dtype=np.uint8)].astype(np.float64)
    elif tag == _WAVE_FORMAT_ALAW and bits == 8:
        x = _ALAW[np.frombuffer(samples, dtype=np.uint8)].astype(np.float64)
    elif tag == _WAVE_FORMAT_PCM and bits == 8:
        x = (np.frombuffer(samples, dtype=np.uint8).astype(np.float64) - 128) * 256
    elif tag == _WAVE_FORMAT_PCM and bits == 16:
        x = np.frombuffer(samples[: len(samples) // 2 * 2], dtype="<i2").astype(np.float64)
    elif tag == _WAVE_FORMAT_PCM and bits == 24:
        raw = np.frombuffer(samples[: len(samples) // 3 * 3], dtype=np.uint8).reshape(-1, 3)
        v = raw[:, 0].astype(np.int32) | (raw[:, 1].astype(np.int32) << 8) | (raw[:, 2].astype(np.int32) << 16)
        x = (np.where(v >= 1 << 23, v - (1 << 24), v) / 256).astype(np.float64)
    elif tag == _WAVE_FORMAT_PCM and bits == 32:
        x = np.frombuffer(samples[: len(samples) // 4 * 4], dtype="<i4").astype(np.float64) / 65536
    elif tag == _WAVE_FORMAT_FLOAT and bits in (32, 64):
        dt = "<f4" if bits == 32 else "<f8"
        n = len(samples) // (bits // 8) * (bits // 8)
        x = np.frombuffer(samples[:n], dtype=dt).astype(np.float64) * 32768
    else:
        raise ValueError(f"{path}: unsupported WAV encoding (format tag {tag:#06x}, {bits} bits)")
    if channels > 1:
        x = x[: x.size // channels * channels].reshape(-1, channels).mean(axis=1)
    pcm = np.clip(np.round(x), -32768, 32767).astype("<i2")
    return pcm.tobytes(), rate


def ulaw_round_trip(pcm: bytes) -> bytes:
    """8 kHz 16-bit PCM -> G.711 μ-law -> PCM: what a Twilio call delivers of it."""
    import audioop  # deprecated, still in 3.11; pipecat's codecs use it too

    return audioop.ulaw2lin(audioop.lin2ulaw(pcm, 2), 2)
