"""Silero VAD whose ONNX session is loaded once per process and shared by every call.

Pipecat's ``SileroVADAnalyzer`` opens its own ONNX session per instance. The session is
stateless (the recurrent state is passed in and out on every call), so all calls can share one
and keep only their own state arrays.
"""

from __future__ import annotations

from importlib import resources

import onnxruntime
from pipecat.audio.vad.silero import SileroOnnxModel, SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState

from bot.config import VADConfig


def load_silero_session() -> onnxruntime.InferenceSession:
    """Load pipecat's bundled ``silero_vad.onnx`` (blocking; call once at startup)."""
    path = str(resources.files("pipecat.audio.vad.data").joinpath("silero_vad.onnx"))
    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=opts)


class SharedSileroVADAnalyzer(SileroVADAnalyzer):
    """A per-call Silero analyzer (own state) over a process-wide ONNX session."""

    def __init__(self, *, session: onnxruntime.InferenceSession, config: VADConfig, sample_rate: int | None = None):
        params = VADParams(
            confidence=config.confidence, start_secs=config.start_secs,
            stop_secs=config.stop_secs, min_volume=config.min_volume,
        )  # fmt: skip
        # Skip SileroVADAnalyzer.__init__ (it would load another session); set what it sets.
        VADAnalyzer.__init__(self, sample_rate=sample_rate, params=params)
        model = SileroOnnxModel.__new__(SileroOnnxModel)
        model.session = session
        model.sample_rates = [8000, 16000]
        model.reset_states()
        self._model = model
        self._windows_since_reset = 0
        self._low_confidence_windows = 0
        self._quiet_secs = 0.0  # audio analysed since the analyzer last heard speech
        self._analysed_secs = 0.0  # all the audio analysed in the call

    async def analyze_audio(self, buffer: bytes) -> VADState:
        state = await super().analyze_audio(buffer)
        heard = len(buffer) / (2 * self.sample_rate)
        self._quiet_secs = self._quiet_secs + heard if state == VADState.QUIET else 0.0
        self._analysed_secs += heard
        return state

    def audio_heard(self) -> float:
        """Seconds of the call's audio analysed so far (the STT's lead-in reads it: WhisperSTTProcessor)."""
        return self._analysed_secs

    def silence_heard(self) -> float:
        """Seconds of audio analysed since the analyzer last heard speech (0 while it hears some).

        The audio clock, beside the turn stop's wall clock: when the pipeline falls behind (a loaded
        machine; audio queued before the analyzer), a wait can run out on silence not yet heard while
        the caller's next words are still in the queue. The turn stop holds until this catches up."""
        return self._quiet_secs
