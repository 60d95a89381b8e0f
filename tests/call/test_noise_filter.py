"""audio.noise_filter: RNNoise on the caller's audio before VAD (issue 26)."""

from __future__ import annotations

import asyncio
import builtins

import numpy as np
import pytest
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams

from bot.call.noise_filter import check_noise_filter, make_audio_in_filter
from bot.config import ConfigError, load_config
from bot.core.errors import StartupError
from tests.conftest import ROOT

RNNOISE = ["audio.noise_filter='rnnoise'"]


def test_default_is_off_and_no_filter_is_wired():
    config = load_config()
    assert config.audio.noise_filter == "none"
    assert make_audio_in_filter(config) is None
    params = FastAPIWebsocketParams(audio_in_enabled=True, audio_in_filter=make_audio_in_filter(config))
    assert params.audio_in_filter is None


def test_rnnoise_is_wired_into_the_transport_params():
    pytest.importorskip("pyrnnoise")
    from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter

    config = load_config(None, RNNOISE)
    phone = FastAPIWebsocketParams(audio_in_enabled=True, audio_in_filter=make_audio_in_filter(config))
    qa = TransportParams(audio_in_enabled=True, audio_in_filter=make_audio_in_filter(config))
    assert isinstance(phone.audio_in_filter, RNNoiseFilter)
    assert isinstance(qa.audio_in_filter, RNNoiseFilter)
    # One filter per call: it keeps the resamplers' and RNNoise's state.
    assert phone.audio_in_filter is not qa.audio_in_filter
    # The phone and QA entries build their transports' params this way.
    for path in ("bot/app/phone.py", "bot/app/browser.py"):
        assert "audio_in_filter=make_audio_in_filter(config)" in (ROOT / path).read_text(), path


def test_filter_keeps_length_and_rate_of_noise_frames():
    pytest.importorskip("pyrnnoise")
    config = load_config(None, RNNOISE)

    async def run() -> list[bytes]:
        f = make_audio_in_filter(config)
        await f.start(8000)
        rng = np.random.default_rng(0)
        frames = [rng.normal(0, 3000, 160).clip(-32768, 32767).astype(np.int16).tobytes() for _ in range(100)]
        out = [await f.filter(frame) for frame in frames]
        await f.stop()
        return out

    out = asyncio.run(run())
    # 20 ms at 8 kHz in, 20 ms at 8 kHz out once the 48 kHz resampler has filled (one 10 ms lag).
    assert all(len(o) == 320 for o in out[1:])
    total = sum(len(o) for o in out) // 2
    assert 100 * 160 - 80 <= total <= 100 * 160
    samples = np.frombuffer(b"".join(out), dtype=np.int16)
    assert np.abs(samples).max() > 0  # audio, not silence padding


def test_bad_value_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"audio\.noise_filter"):
        load_config(None, ["audio.noise_filter='speex'"])


def test_startup_without_pyrnnoise_is_a_clear_error(monkeypatch):
    config = load_config(None, RNNOISE)
    real_import = builtins.__import__

    def no_pyrnnoise(name, *args, **kwargs):
        if name == "pyrnnoise":
            raise ModuleNotFoundError("No module named 'pyrnnoise'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyrnnoise)
    with pytest.raises(StartupError, match=r"audio\.noise_filter.*pyrnnoise"):
        check_noise_filter(config)
    check_noise_filter(load_config())  # off: nothing to check
