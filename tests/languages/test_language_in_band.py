"""Issue 45 part 3: the caller's language travels in band. The STT says what it heard
(``LanguageHeardFrame``) and touches no dialog state; the dialog stage's policy decides (a ``Change``,
applied like every other); STT and TTS are told by Pipecat's settings frames."""

from __future__ import annotations

from types import SimpleNamespace

from pipecat.frames.frames import (
    AggregatedTextFrame,
    InputAudioRawFrame,
    STTUpdateSettingsFrame,
    TranscriptionFrame,
    TTSUpdateSettingsFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.services.settings import STTSettings
from pipecat.tests.utils import SleepFrame, run_test

from bot.call.assets import DialogAssets
from bot.call.language import new_dialog_state
from bot.call.wiring import make_llm
from bot.config import Secrets, load_config
from bot.dialog.language_switch import LanguageGuess
from bot.stages.keypad import KeypadEntryFrame
from bot.stages.language_heard import LanguageHeardFrame
from bot.stages.whisper import TranscriptResult, WhisperSTTProcessor

AUTO = ["line.languages=['ko','en']", "stt.language='auto'"]


class FakeEngine:
    """Whisper's engine as the STT stage uses it: says it heard English, records what it was asked."""

    model_path = "fake"
    warmup_ms = None
    cfg = SimpleNamespace(language="ko")

    def __init__(self, heard: str | None = "en", heard_p: float | None = 0.9):
        self.asked: list[str] = []
        self.heard, self.heard_p = heard, heard_p

    async def transcribe_async(self, audio, rate, *, language, detect=None, decode_p=0.5):
        self.asked.append(language)
        return TranscriptResult("hello I would like to report a problem", 2.5, 50.0, 0.02, None, language,
                                detected="en", language_p=0.91, heard=self.heard, heard_p=self.heard_p)


def segment() -> list:
    audio = [InputAudioRawFrame(audio=bytes(640), sample_rate=16000, num_channels=1) for _ in range(40)]
    return [VADUserStartedSpeakingFrame(), *audio, VADUserStoppedSpeakingFrame(), SleepFrame(0.1)]


async def test_the_stt_says_what_it_heard_in_a_frame_before_the_transcript():
    engine = FakeEngine()
    stt = WhisperSTTProcessor(engine=engine, language="ko", detect=("ko", "en"))
    down, _ = await run_test(stt, frames_to_send=segment(), expected_down_frames=None)
    (heard,) = [f for f in down if isinstance(f, LanguageHeardFrame)]
    (text,) = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert down.index(heard) < down.index(text)
    assert heard.guess == LanguageGuess("en", 0.91, 8, 2.5)
    assert heard.heard == LanguageGuess("en", 0.9, 8, 2.5, served_p=0.91)
    assert engine.asked == ["ko"]  # decoded in the call's language: Korean until told otherwise


async def test_the_stt_decodes_in_the_language_a_settings_frame_tells_it():
    engine = FakeEngine()
    stt = WhisperSTTProcessor(engine=engine, language="ko", detect=("ko", "en"))
    await run_test(stt, frames_to_send=[STTUpdateSettingsFrame(delta=STTSettings(language="en")), SleepFrame(0.05), *segment()],
                   expected_down_frames=None)
    assert engine.asked == ["en"]


async def test_a_forced_stt_language_holds_while_the_call_is_in_the_lines_first_language():
    # The CI fault of old: English audio decoded as Korean because the call's language was used.
    engine = FakeEngine()
    stt = WhisperSTTProcessor(engine=engine, language="ko", decode_as={"ko": "en"})
    await run_test(stt, frames_to_send=segment(), expected_down_frames=None)
    assert engine.asked == ["en"]
    engine = FakeEngine()
    stt = WhisperSTTProcessor(engine=engine, language="ko", decode_as={"ko": "ko"})
    await run_test(stt, frames_to_send=[STTUpdateSettingsFrame(delta=STTSettings(language="en")), SleepFrame(0.05), *segment()],
                   expected_down_frames=None)
    assert engine.asked == ["en"]  # the keypad menu: later turns in English


def _stage(*extra: str):
    config = load_config(overrides=[*AUTO, *extra])
    assets = DialogAssets.load(config)
    dialog = new_dialog_state(config, assets)
    return make_llm(config, Secrets(None, None, "EMPTY"), assets, dialog=dialog), dialog


def _told(down, up) -> tuple[list, list]:
    stt = [f.delta.language for f in up if isinstance(f, STTUpdateSettingsFrame)]
    tts = [f.delta.language for f in down if isinstance(f, TTSUpdateSettingsFrame)]
    return stt, tts


async def test_the_policy_moves_the_call_and_stt_and_tts_are_told_by_settings_frames():
    stage, dialog = _stage()
    sure = LanguageHeardFrame(guess=LanguageGuess("en", 0.95, 6, 2.5))
    down, up = await run_test(stage, frames_to_send=[sure], expected_down_frames=None)
    assert dialog.language == "en" and dialog.switcher is not None and dialog.switcher.current == "en"
    assert _told(down, up) == (["en"], ["en"])
    assert not any(isinstance(f, LanguageHeardFrame) for f in down)  # the stage's to decide, not to pass on


async def test_a_plain_guess_changes_nothing_and_tells_nobody():
    stage, dialog = _stage()
    plain = LanguageHeardFrame(guess=LanguageGuess("en", 0.6, 6, 2.5))
    down, up = await run_test(stage, frames_to_send=[plain], expected_down_frames=None)
    assert dialog.language == "ko" and _told(down, up) == ([], [])
    # Two such turns in a row do switch (the rule of issue 38).
    down, up = await run_test(stage, frames_to_send=[plain], expected_down_frames=None)
    assert dialog.language == "en" and _told(down, up) == (["en"], ["en"])


async def test_an_unserved_language_is_held_for_the_policy_only_on_evidence():
    stage, dialog = _stage()

    def zh() -> LanguageHeardFrame:
        return LanguageHeardFrame(guess=LanguageGuess("ko", 0.01, 5, 2.6),
                                  heard=LanguageGuess("zh", 0.97, 5, 2.6, served_p=0.01))

    await run_test(stage, frames_to_send=[zh()], expected_down_frames=None)
    assert dialog.heard_unserved is None  # one turn is no evidence (issue 47)
    down, up = await run_test(stage, frames_to_send=[zh()], expected_down_frames=None)
    assert dialog.heard_unserved == "zh" and dialog.language == "ko" and _told(down, up) == ([], [])


async def test_the_keypad_switch_tells_the_tts_before_the_switched_sentence():
    stage, dialog = _stage()
    down, up = await run_test(stage, frames_to_send=[KeypadEntryFrame(keys="9"), SleepFrame(0.3)],
                              expected_down_frames=None)
    assert dialog.language == "en"
    assert _told(down, up) == (["en"], ["en"])
    told = next(i for i, f in enumerate(down) if isinstance(f, TTSUpdateSettingsFrame))
    first = next(i for i, f in enumerate(down) if isinstance(f, AggregatedTextFrame))
    assert told < first and "English" in down[first].text
