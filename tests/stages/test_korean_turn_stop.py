"""Korean end-of-turn waits and the speculative reply, through Pipecat's real user aggregator."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pipecat.frames.frames import (
    AggregatedTextFrame,
    STTMetadataFrame,
    SystemFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy, VADUserTurnStartStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.utils.time import time_now_iso8601

from bot.call.assets import DialogAssets
from bot.call.wiring import make_llm
from bot.config import load_config
from bot.stages.korean_turn_stop import EndOfTurnRules, KoreanEndOfTurnStopStrategy
from bot.telemetry.turns import CallRecorder, TurnObserver
from bot.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parents[2]
CONFIG = load_config()
RULES = EndOfTurnRules.load(CONFIG.path(CONFIG.turn.endpointing_file))
WAITS = {"final": 0.25, "continuing": 1.0, "default": 0.6}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("쓰레기 수거 문의드리려고요.", "final"),
        ("접수하고 싶습니다", "final"),
        ("언제 수거하나요?", "final"),
        ("확인할 수 있습니까", "final"),
        ("네 맞아요", "final"),
        ("그렇죠", "final"),
        ("내일 가능할까요", "final"),
        ("여기 가로등이 고장 났네요", "final"),
        ("Hello, how are you today?", "final"),
        ("어제부터 소음이 심한데", "continuing"),
        ("집 앞에 가로등이 고장 나서", "continuing"),
        ("불법 주차 신고하려고", "continuing"),
        ("쓰레기랑", "continuing"),
        ("대형 폐기물을 버리고", "continuing"),
        ("주차장에서", "continuing"),
        ("그리고", "continuing"),
        ("음...", "continuing"),
        ("저기", "continuing"),
        ("역삼동 123", "default"),
        ("hello", "default"),
    ],
)
def test_endings_choose_the_wait(text, kind):
    assert RULES.classify(text)[0] == kind


class _Sink(FrameProcessor):
    """Records what reaches TTS and when the caller's turn ended."""

    def __init__(self):
        super().__init__()
        self.sentences: list[str] = []
        self.turn_ends = 0

    async def process_frame(self, frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, AggregatedTextFrame):
            self.sentences.append(frame.text)
        elif isinstance(frame, UserStoppedSpeakingFrame) and direction == FrameDirection.DOWNSTREAM:
            self.turn_ends += 1
        await self.push_frame(frame, direction)


def _transcript(text: str) -> TranscriptionFrame:
    frame = TranscriptionFrame(text, "caller", time_now_iso8601())
    frame.finalized = True
    return frame


def _pipeline(llm=None, speculate=True):
    decisions: list[tuple[str, float]] = []
    stop = KoreanEndOfTurnStopStrategy(rules=RULES, waits=WAITS, speculate=speculate,
                                       on_decision=lambda k, w: decisions.append((k, w)))
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(start=[VADUserTurnStartStrategy()], stop=[stop])))
    sink = _Sink()
    stages = [user_agg, *([llm] if llm else []), sink]
    return Pipeline(stages), sink, decisions, context


async def _speak(text: str, pause_after: float) -> list:
    return [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
            SleepFrame(0.05), _transcript(text), SleepFrame(pause_after)]


async def test_a_final_ending_ends_the_turn_after_the_short_wait():
    pipeline, sink, decisions, _ = _pipeline(speculate=False)
    down, _ = await run_test(pipeline, frames_to_send=await _speak("접수하고 싶습니다.", 0.4), expected_down_frames=None)
    assert decisions == [("final", 0.25)]
    assert sink.turn_ends == 1


async def test_a_continuing_ending_waits_longer_than_the_default():
    # 0.7 s after speech: past the default 0.6 s wait, inside the 1.0 s one.
    pipeline, sink, decisions, _ = _pipeline(speculate=False)
    await run_test(pipeline, frames_to_send=await _speak("어제부터 소음이 심한데", 0.6), expected_down_frames=None)
    assert decisions == [("continuing", 1.0)]
    assert sink.turn_ends == 0
    pipeline, sink, _, _ = _pipeline(speculate=False)
    await run_test(pipeline, frames_to_send=await _speak("어제부터 소음이 심한데", 1.2), expected_down_frames=None)
    assert sink.turn_ends == 1


def _turn(reply: str) -> dict:
    return {"reply": reply, "intent": "report_problem", "category": "noise", "location": None, "time": None,
            "flow": "continue"}


@pytest.fixture
def fake():
    with FakeLLM(first_token_delay=0.05, token_delay=0.005) as server:
        yield server


def _llm(fake, recorder):
    config = load_config(overrides=[f"llm.base_url='{fake.base_url}'"])
    return make_llm(config, _secrets(), DialogAssets.load(config), speech_end=lambda: recorder.current.speech_end,
                    end_call_on_end_flow=False)


def _secrets():
    from bot.config import Secrets

    return Secrets(None, None, "EMPTY")


async def test_speculative_reply_starts_before_the_turn_ends_and_is_used_as_is(fake):
    recorder = CallRecorder("CAtest")
    fake.script(_turn("네, 소음 민원 접수해 드릴게요."))
    llm = _llm(fake, recorder)
    pipeline, sink, _, context = _pipeline(llm)
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("어제부터 소음이 심한데"),
              SleepFrame(0.4)]  # the 1.0 s wait is still running...
    await run_test(pipeline, frames_to_send=frames + [SleepFrame(1.0)], expected_down_frames=None,
                   observers=[TurnObserver(recorder)])
    assert fake.calls == 1  # ...and the model call was made during it
    assert sink.sentences == ["네, 소음 민원 접수해 드릴게요."]
    rec = recorder.records[-1]
    assert rec.llm_calls == 1 and rec.llm_cancelled_calls == 0 and rec.route == "llm"
    assert rec.llm_request < rec.turn_end  # speculative: requested before the turn ended
    assert llm.dialog.known_slots() == {"category": "noise"}
    assert [m["content"] for m in context.get_messages() if m["role"] == "user"] == ["어제부터 소음이 심한데"]


async def test_caller_going_on_withdraws_the_speculative_reply(fake):
    recorder = CallRecorder("CAtest")
    fake.script(_turn("첫 번째 답은 말하면 안 됩니다."), first_token_delay=0.2, token_delay=0.05)
    fake.script(_turn("네, 밤마다 소음이 심하시군요."))
    llm = _llm(fake, recorder)
    pipeline, sink, _, context = _pipeline(llm)
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("어제부터 소음이 심한데"), SleepFrame(0.3),
              # the caller goes on before the 1.0 s wait ends
              VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("밤마다 그래요."), SleepFrame(1.5)]
    await run_test(pipeline, frames_to_send=frames, expected_down_frames=None, observers=[TurnObserver(recorder)])
    assert fake.calls == 2
    assert sink.sentences == ["네, 밤마다 소음이 심하시군요."]  # the withdrawn text never reached TTS
    rec = recorder.records[-1]
    assert rec.llm_calls == 1 and rec.llm_cancelled_calls == 1
    user_turns = [m["content"] for m in context.get_messages() if m["role"] == "user"]
    assert user_turns == ["어제부터 소음이 심한데 밤마다 그래요."]
    assert llm.dialog.last_reply == "네, 밤마다 소음이 심하시군요."


async def test_a_transcript_later_than_the_stop_timeout_is_its_own_turn_not_part_of_the_next():
    # STT overloaded: the turn closes (stop timeout) before its transcript arrives.
    from bot.call.turn_taking import user_turn_params

    config = load_config(overrides=["turn.stop_timeout_secs=0.5", "turn.speculative_reply=false"])
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=user_turn_params(config, RULES))
    sink = _Sink()
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(1.0), _transcript("늦게 도착한 말입니다."), SleepFrame(1.0),
              *(await _speak("다음 말입니다.", 0.8))]
    await run_test(Pipeline([user_agg, sink]), frames_to_send=frames, expected_down_frames=None)
    users = [m["content"] for m in context.get_messages() if m["role"] == "user"]
    assert users == ["늦게 도착한 말입니다.", "다음 말입니다."]


async def test_a_failed_speculative_call_speaks_the_apology_once_the_turn_ends(fake):
    recorder = CallRecorder("CAtest")
    fake.script(_turn("x"), mode="http_error")
    llm = _llm(fake, recorder)
    pipeline, sink, _, _ = _pipeline(llm)
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("어제부터 소음이 심한데"), SleepFrame(1.6)]
    await run_test(pipeline, frames_to_send=frames, expected_down_frames=None, observers=[TurnObserver(recorder)])
    assert fake.calls == 1
    assert len(sink.sentences) == 1 and sink.sentences[0].startswith("죄송합니다")
    rec = recorder.records[-1]
    assert rec.route == "error" and rec.error.startswith("http_500") and rec.llm_calls == 1


async def test_a_turn_of_unclear_speech_ends_with_a_request_to_repeat_not_silence():
    from pipecat.frames.frames import TTSSpeakFrame

    from bot.call.turn_taking import user_turn_params
    from bot.stages.whisper import UnclearSpeechFrame

    config = load_config(overrides=["turn.stop_timeout_secs=5.0"])
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=user_turn_params(config, RULES, unclear_reply="다시요?"))
    sink = _Sink()
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), UnclearSpeechFrame(reason="no_speech", audio_secs=2.8), SleepFrame(1.0)]
    down, _ = await run_test(Pipeline([user_agg, sink]), frames_to_send=frames, expected_down_frames=None)
    assert sink.turn_ends == 1  # after the default wait, not the 5 s stop timeout
    assert [f.text for f in down if isinstance(f, TTSSpeakFrame)] == ["다시요?"]
    assert not [m for m in context.get_messages() if m["role"] == "user"]  # nothing for the model


async def test_unclear_speech_next_to_a_transcript_is_answered_normally():
    from pipecat.frames.frames import TTSSpeakFrame

    from bot.call.turn_taking import user_turn_params
    from bot.stages.whisper import UnclearSpeechFrame

    config = load_config(overrides=["turn.speculative_reply=false"])
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=user_turn_params(config, RULES, unclear_reply="다시요?"))
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("접수하고 싶습니다."), UnclearSpeechFrame(reason="no_speech", audio_secs=2.5),
              SleepFrame(1.0)]
    down, _ = await run_test(Pipeline([user_agg, _Sink()]), frames_to_send=frames, expected_down_frames=None)
    assert not [f for f in down if isinstance(f, TTSSpeakFrame)]
    assert [m["content"] for m in context.get_messages() if m["role"] == "user"] == ["접수하고 싶습니다."]


class _AudioClock(FrameProcessor):
    """The VAD analyzer's audio clock (``silence_heard``), moved by the frames a test sends: quiet from
    the VAD's stop or a ``_Speech(False)``, at ``rate`` seconds of audio per second (below 1: audio
    queued before the analyzer), 0 while ``_Speech(True)`` or after a VAD start."""

    def __init__(self, rate: float = 1.0):
        super().__init__()
        self.rate = rate
        self.quiet_since: float | None = None

    def silence_heard(self) -> float:
        return 0.0 if self.quiet_since is None else (time.monotonic() - self.quiet_since) * self.rate

    async def process_frame(self, frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, _Speech):
            self.quiet_since = None if frame.on else time.monotonic()
            return
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            self.quiet_since = time.monotonic()
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            self.quiet_since = None
        await self.push_frame(frame, direction)


class _Speech(SystemFrame):
    def __init__(self, on: bool):
        super().__init__()
        self.on = on


def _held_pipeline(hold_secs: float = 0.4, rate: float = 1.0):
    clock = _AudioClock(rate)
    stop = KoreanEndOfTurnStopStrategy(rules=RULES, waits=WAITS, speculate=False, silence_heard=clock.silence_heard,
                                       resume_hold_secs=hold_secs)
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(
        user_turn_strategies=UserTurnStrategies(start=[VADUserTurnStartStrategy()], stop=[stop])))
    sink = _Sink()
    return Pipeline([clock, user_agg, sink]), sink, context


async def test_a_caller_who_resumes_within_the_wait_is_not_cut_off_before_the_vad_confirms_the_start():
    # "…났어요" (final: 0.25 s), then speech again 0.15 s after the stop: the VAD's start frame needs
    # start_secs (0.2 s) of it, so it comes at 0.35 s, after the wait. Under load the old stop ended
    # the turn there and the rest of the sentence became a turn of its own (issue 45's CI failures).
    pipeline, sink, context = _held_pipeline()
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("여기 불이 났어요"), SleepFrame(0.1), _Speech(True), SleepFrame(0.2),
              VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("빨리 와 주세요"), SleepFrame(0.5)]
    await run_test(pipeline, frames_to_send=frames, expected_down_frames=None)
    assert sink.turn_ends == 1
    assert [m["content"] for m in context.get_messages() if m["role"] == "user"] == ["여기 불이 났어요 빨리 와 주세요"]


async def test_a_wait_that_runs_out_on_silence_not_yet_heard_holds_until_the_audio_catches_up():
    # The analyzer hears audio at half speed (a loaded machine: audio queued before it). The 0.25 s
    # wall-clock wait runs out with 0.125 s of silence heard; the end holds until 0.25 s is.
    pipeline, sink, _ = _held_pipeline(hold_secs=1.2, rate=0.5)
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("접수하고 싶습니다."), SleepFrame(0.3)]
    await run_test(pipeline, frames_to_send=frames, expected_down_frames=None)
    assert sink.turn_ends == 0  # 0.35 s on the wall clock, 0.175 s of silence heard: still held
    pipeline, sink, _ = _held_pipeline(hold_secs=1.2, rate=0.5)
    await run_test(pipeline, frames_to_send=[*frames, SleepFrame(0.25)], expected_down_frames=None)
    assert sink.turn_ends == 1  # ended once the wait's silence was heard (about 0.45 s on the wall clock)


async def test_a_blip_that_never_becomes_speech_ends_the_turn_when_it_fades_and_a_stuck_one_at_the_hold():
    pipeline, sink, context = _held_pipeline()
    frames = [VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
              SleepFrame(0.05), _transcript("접수하고 싶습니다."), SleepFrame(0.1), _Speech(True), SleepFrame(0.25)]
    await run_test(pipeline, frames_to_send=[*frames, _Speech(False), SleepFrame(0.35)], expected_down_frames=None)
    assert sink.turn_ends == 1  # held past the 0.25 s wait, ended once the wait's silence followed the blip
    pipeline, sink, _ = _held_pipeline(hold_secs=0.3)
    await run_test(pipeline, frames_to_send=[*frames, SleepFrame(0.2)], expected_down_frames=None)
    assert sink.turn_ends == 1  # an analyzer stuck in "speech again" (audio stopped) holds no longer than the hold


async def test_a_turn_is_not_split_when_the_calls_vad_hears_its_audio_late():
    """The call's own VAD and stop (``user_turn_params``) on real audio fed at half speed, as a loaded
    machine queues it before the analyzer: "…났어요", 0.3 s of quiet, more words. The 0.25 s wait ran
    out on the wall clock before the analyzer had heard the quiet's end; the old stop ended the turn
    there (two turns: the CI's split). Now it holds until the words start a turn of their own."""
    from pipecat.audio.vad.vad_analyzer import VADState
    from pipecat.frames.frames import InputAudioRawFrame
    from pipecat.pipeline.worker import PipelineParams

    from bot.call.turn_taking import user_turn_params
    from bot.core.wav import read_wav
    from bot.stages.silero_vad import SharedSileroVADAnalyzer, load_silero_session

    pcm, rate = read_wav(ROOT / "bench" / "audio" / "hello.wav")
    at = lambda secs: round(secs * rate) * 2  # noqa: E731
    pcm = pcm[: at(1.0)] + bytes(at(0.3)) + pcm[at(0.45):] + bytes(at(0.6))
    chunks = [pcm[i:i + 320] for i in range(0, len(pcm) - 320, 320)]  # 20 ms, as the phone line brings them
    session = load_silero_session()
    probe = SharedSileroVADAnalyzer(session=session, config=CONFIG.vad, sample_rate=rate)
    probe.set_sample_rate(rate)
    states = [await probe.analyze_audio(c) for c in chunks]
    first_stop = states.index(VADState.QUIET, states.index(VADState.SPEAKING))
    assert first_stop + 2 < len(chunks) and VADState.SPEAKING in states[first_stop:]

    config = load_config(overrides=["turn.speculative_reply=false", "call.mute_during_greeting=false"])
    vad = SharedSileroVADAnalyzer(session=session, config=config.vad, sample_rate=rate)
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=user_turn_params(config, RULES, vad=vad))
    second_stop = states.index(VADState.QUIET, states.index(VADState.SPEAKING, first_stop))
    said = {first_stop + 2: "여기 불이 났어요", second_stop + 2: "빨리 와 주세요"}  # the STT's answers, soon after
    frames = []
    for i, chunk in enumerate(chunks):
        frames += [InputAudioRawFrame(audio=chunk, sample_rate=rate, num_channels=1), SleepFrame(0.04)]
        if i in said:
            frames.append(_transcript(said[i]))
    frames.append(SleepFrame(0.6))
    sink = _Sink()
    await run_test(Pipeline([user_agg, sink]), frames_to_send=frames, expected_down_frames=None,
                   pipeline_params=PipelineParams(audio_in_sample_rate=rate))
    assert [m["content"] for m in context.get_messages() if m["role"] == "user"] == ["여기 불이 났어요 빨리 와 주세요"]
    assert sink.turn_ends == 1


async def test_the_vads_audio_clock_hears_speech_again_well_before_its_start():
    from pipecat.audio.vad.vad_analyzer import VADState

    from bot.call.turn_taking import user_turn_params
    from bot.core.wav import read_wav
    from bot.stages.silero_vad import SharedSileroVADAnalyzer, load_silero_session

    vad = SharedSileroVADAnalyzer(session=load_silero_session(), config=CONFIG.vad, sample_rate=8000)
    (stop,) = user_turn_params(CONFIG, RULES, vad=vad).user_turn_strategies.stop
    assert stop._resume.silence_heard == vad.silence_heard and vad.silence_heard() == 0.0
    # "hello", 0.3 s of quiet, "hello" again (8 kHz, 20 ms chunks as the phone line brings them).
    pcm, rate = read_wav(ROOT / "bench" / "audio" / "hello.wav")
    at = lambda secs: round(secs * rate) * 2  # noqa: E731
    pcm = pcm[: at(1.0)] + bytes(at(0.3)) + pcm[at(0.45):]
    vad.set_sample_rate(rate)
    states, heard = [], []
    for i in range(0, len(pcm) - 320, 320):
        states.append(await vad.analyze_audio(pcm[i:i + 320]))
        heard.append(vad.silence_heard())
    stopped = states.index(VADState.QUIET, states.index(VADState.SPEAKING))
    started = states.index(VADState.SPEAKING, stopped)
    # Silence is counted in 20 ms chunks from the stop, and drops to 0 as soon as speech is heard again.
    assert heard[stopped] == pytest.approx(0.02) and heard[stopped + 3] == pytest.approx(0.08)
    assert all((heard[i] == 0.0) == (states[i] != VADState.QUIET) for i in range(len(states)))
    # Speech again is heard well before the start (start_secs of it) is confirmed: what the stop holds on.
    first_heard = heard.index(0.0, stopped)
    assert (started - first_heard) * 0.02 >= CONFIG.vad.start_secs - 0.04, (stopped, first_heard, started)


def _stt_paced(*frames_after_stop, ttfs_p99: float = 0.9):
    """A caller's two segments ("…났어요", a pause, more words) with the STT's answers as given after
    the second stop. ``ttfs_p99``: what the product's STT broadcasts after a 0.35 s warm-up."""
    return [STTMetadataFrame(service_name="whisper", ttfs_p99_latency=ttfs_p99),
            VADUserStartedSpeakingFrame(), SleepFrame(0.3), VADUserStoppedSpeakingFrame(stop_secs=0.2),
            SleepFrame(0.05), _transcript("여기 불이 났어요"), VADUserStartedSpeakingFrame(), SleepFrame(0.3),
            VADUserStoppedSpeakingFrame(stop_secs=0.2), *frames_after_stop]


async def test_a_segment_transcribed_late_is_waited_for_not_left_to_open_a_turn_of_its_own():
    # The second segment's transcript comes 1.5 s after its stop (a loaded machine), past Pipecat's
    # p99 net (0.9 - 0.2 s): the old stop ended the turn on "…났어요" and the late words opened a
    # turn of their own (the CI's split: "Hello?", then "How you can aay" answered alone).
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(user_turn_strategies=(
        UserTurnStrategies(start=[VADUserTurnStartStrategy(), TranscriptionUserTurnStartStrategy()],
                           stop=[KoreanEndOfTurnStopStrategy(rules=RULES, waits=WAITS, speculate=False)]))))
    sink = _Sink()
    frames = _stt_paced(SleepFrame(1.5), _transcript("빨리 와 주세요"), SleepFrame(0.5))
    await run_test(Pipeline([user_agg, sink]), frames_to_send=frames, expected_down_frames=None)
    assert [m["content"] for m in context.get_messages() if m["role"] == "user"] == ["여기 불이 났어요 빨리 와 주세요"]
    assert sink.turn_ends == 1


async def test_a_segment_the_stt_could_not_read_ends_the_wait_at_once():
    from bot.stages.whisper import SegmentUnreadFrame

    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(user_turn_strategies=(
        UserTurnStrategies(start=[VADUserTurnStartStrategy()],
                           stop=[KoreanEndOfTurnStopStrategy(rules=RULES, waits=WAITS, speculate=False)]))))
    sink = _Sink()
    # A cough after the words: rejected 0.4 s after its stop; the turn ends then, not at the 4 s net.
    frames = _stt_paced(SleepFrame(0.4), SegmentUnreadFrame(finalized=True), SleepFrame(0.3))
    await run_test(Pipeline([user_agg, sink]), frames_to_send=frames, expected_down_frames=None)
    assert sink.turn_ends == 1
    assert [m["content"] for m in context.get_messages() if m["role"] == "user"] == ["여기 불이 났어요"]
