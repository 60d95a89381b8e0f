"""Backchannels are not interruptions: the decision, the turn-taking in Pipecat's real user aggregator,
and a scripted phone call in the test lab (4 backchannels and 2 barge-ins over the bot's replies; the
lab's whole call, 10 and 5, is scripts/backchannel_figures.py's)."""

from __future__ import annotations

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    InterruptionFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
    UserBackchannelFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.utils.time import time_now_iso8601

from bot.call.turn_taking import user_turn_params
from bot.config import load_config
from bot.stages.backchannel_turn_start import Backchannels, BackchannelTurnStartStrategy, held_speech
from bot.stages.korean_turn_stop import EndOfTurnRules
from bot.stages.whisper import UnclearSpeechFrame
from bot.telemetry.latency import TurnRecord

CONFIG = load_config()
RULES = EndOfTurnRules.load(CONFIG.path(CONFIG.turn.endpointing_file))
WORDS = Backchannels.load(CONFIG.path(CONFIG.turn.backchannels_file))


# --- the words ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["네", "예", "네네", "네 네 네", "네.", "음", "아", "어", "음...", "아 네", "그렇죠",
                                  "그렇죠.", "맞아요", "음 맞아요", "네, 그렇죠", "네 맞아요", "알겠습니다", "넵", "맞 아요"])
def test_acknowledgements_are_backchannels(text):
    assert WORDS.is_backchannel(text)


@pytest.mark.parametrize("text", ["아니요", "아니요 잠깐만요", "잠깐만요", "네?", "뭐라고요?", "네 근데 하나만 여쭤볼게요",
                                  "쓰레기 수거 문의드리려고요", "네 맞아요 그런데 주소가 틀렸어요", "", "  "])
def test_anything_more_is_not(text):
    assert not WORDS.is_backchannel(text)


def test_a_backchannel_counts_only_while_the_bot_is_audible():
    assert held_speech("네", bot_audible=True, backchannels=WORDS) == "backchannel"
    # The reply ended before the words came: "네" may answer its last question ("맞으신가요?").
    assert held_speech("네", bot_audible=False, backchannels=WORDS) == "turn"
    assert held_speech("아니요 잠깐만요", bot_audible=True, backchannels=WORDS) == "turn"


def test_the_words_file_rejects_unknown_keys_and_words_that_normalize_to_nothing(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text('words = ["네"]\nextra = 1\n', encoding="utf-8")
    with pytest.raises(ValueError, match="b.toml:2: extra: unknown key 'extra'"):
        Backchannels.load(bad)
    bad.write_text('words = ["음"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"b.toml:1: words\[0\]: '음' normalizes to nothing"):
        Backchannels.load(bad)


def test_the_caller_marks_of_a_turn_stop_at_its_answer():
    rec = TurnRecord(call_id="CA", index=1)
    rec.mark("speech_end", 10.0)
    rec.mark("first_audio_out", 11.0)
    rec.mark("speech_end", 12.0, overwrite=True)  # a backchannel's VAD stop over the reply
    rec.mark("stt_done", 12.2)
    assert rec.speech_end == 10.0 and rec.stt_done is None


# --- turn-taking in the user aggregator ----------------------------------------------------------

class _Sink(FrameProcessor):
    """What comes out of the user aggregator: interruptions, turn starts and ends, backchannels, speech."""

    def __init__(self):
        super().__init__()
        self.interruptions = self.turn_starts = self.turn_ends = 0
        self.backchannels: list[str] = []
        self.spoken: list[str] = []

    async def process_frame(self, frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            if isinstance(frame, InterruptionFrame):
                self.interruptions += 1
            elif isinstance(frame, UserStartedSpeakingFrame):
                self.turn_starts += 1
            elif isinstance(frame, UserStoppedSpeakingFrame):
                self.turn_ends += 1
            elif isinstance(frame, UserBackchannelFrame):
                self.backchannels.append(frame.text)
            elif isinstance(frame, TTSSpeakFrame):
                self.spoken.append(frame.text)
        await self.push_frame(frame, direction)


def _transcript(text: str) -> TranscriptionFrame:
    frame = TranscriptionFrame(text, "caller", time_now_iso8601())
    frame.finalized = True
    return frame


def _sound(secs: float, text: str | None, stt_s: float = 0.1) -> list:
    """The caller says something ``secs`` long (VAD start to stop); ``text``: its transcript."""
    frames = [VADUserStartedSpeakingFrame(start_secs=0.2), SleepFrame(secs), VADUserStoppedSpeakingFrame(stop_secs=0.2)]
    return frames + ([SleepFrame(stt_s), _transcript(text)] if text is not None else [])


async def _run(frames: list, *, overrides: tuple[str, ...] = ()) -> tuple[_Sink, LLMContext]:
    config = load_config(overrides=["turn.speculative_reply=false", *overrides])
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(
        context, user_params=user_turn_params(config, RULES, backchannels=WORDS, unclear_reply="다시요?"))
    sink = _Sink()
    await run_test(Pipeline([user_agg, sink]), frames_to_send=[*frames, SleepFrame(1.2)], expected_down_frames=None)
    return sink, context


def _users(context: LLMContext) -> list[str]:
    return [m["content"] for m in context.get_messages() if m["role"] == "user"]


async def test_a_backchannel_over_the_bot_is_neither_an_interruption_nor_a_turn():
    sink, context = await _run([BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(0.3, "네네")])
    assert sink.interruptions == 0 and sink.turn_starts == 0
    assert sink.backchannels == ["네네"] and _users(context) == []


async def test_short_words_over_the_bot_that_are_not_a_backchannel_interrupt_and_are_answered():
    sink, context = await _run([BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(0.3, "아니요")])
    assert sink.interruptions == 1 and sink.turn_starts == 1 and sink.turn_ends == 1
    assert sink.backchannels == [] and _users(context) == ["아니요"]


async def test_long_speech_over_the_bot_interrupts_before_its_words_are_known():
    # 1.2 s of speech: the interruption comes while the caller still speaks, the words make the turn.
    frames = [BotStartedSpeakingFrame(), SleepFrame(0.1), VADUserStartedSpeakingFrame(start_secs=0.2), SleepFrame(0.9)]
    sink, _ = await _run(frames)
    assert sink.interruptions == 1 and sink.turn_starts == 1 and sink.turn_ends == 0
    sink, context = await _run([BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(1.2, "아니요 잠깐만요")])
    assert sink.interruptions == 1 and _users(context) == ["아니요 잠깐만요"]


async def test_even_a_long_backchannel_is_a_barge_in():
    # Longer than turn.barge_in_secs: the bot has stopped already; the words are a turn.
    sink, context = await _run([BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(1.2, "네")])
    assert sink.interruptions == 1 and sink.backchannels == [] and _users(context) == ["네"]


async def test_a_yes_to_a_silent_bot_is_a_turn_at_once():
    # The read-back "맞으신가요?" has been played; the caller's "네" is the answer.
    sink, context = await _run([BotStartedSpeakingFrame(), SleepFrame(0.1), BotStoppedSpeakingFrame(), SleepFrame(0.1),
                                *_sound(0.3, "네")])
    assert sink.turn_starts == 1 and sink.backchannels == [] and _users(context) == ["네"]


async def test_a_backchannel_whose_words_come_after_the_reply_ended_is_a_turn():
    frames = [BotStartedSpeakingFrame(), SleepFrame(0.1), VADUserStartedSpeakingFrame(start_secs=0.2), SleepFrame(0.3),
              VADUserStoppedSpeakingFrame(stop_secs=0.2), BotStoppedSpeakingFrame(), SleepFrame(0.1), _transcript("네")]
    sink, context = await _run(frames)
    assert sink.backchannels == [] and _users(context) == ["네"]


async def test_a_backchannel_leaves_the_next_turn_alone():
    # "네" over the reply, then (the bot done) a request: the request alone is the turn.
    frames = [BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(0.3, "네"), SleepFrame(0.3), BotStoppedSpeakingFrame(),
              SleepFrame(0.2), *_sound(0.8, "쓰레기 수거 문의드리려고요")]
    sink, context = await _run(frames)
    assert sink.backchannels == ["네"] and sink.turn_starts == 1 and _users(context) == ["쓰레기 수거 문의드리려고요"]


async def test_unreadable_short_speech_over_the_bot_is_ignored_not_asked_again():
    frames = [BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(0.3, None), SleepFrame(0.1),
              UnclearSpeechFrame(reason="no_speech", audio_secs=2.5)]
    sink, context = await _run(frames)
    assert sink.interruptions == 0 and sink.turn_starts == 0 and sink.spoken == [] and _users(context) == []


async def test_the_phone_lines_unplayed_audio_counts_as_the_bot_speaking():
    # The pipeline says the bot stopped (it sends at twice real time); Twilio is still playing.
    config = load_config(overrides=["turn.speculative_reply=false"])
    strategy_params = user_turn_params(config, RULES, backchannels=WORDS, line_playing=lambda: True)
    start = strategy_params.user_turn_strategies.start[0]
    assert isinstance(start, BackchannelTurnStartStrategy) and start.bot_audible
    context = LLMContext()
    user_agg, _ = LLMContextAggregatorPair(context, user_params=strategy_params)
    sink = _Sink()
    await run_test(Pipeline([user_agg, sink]), frames_to_send=[*_sound(0.3, "음"), SleepFrame(1.0)],
                   expected_down_frames=None)
    assert sink.interruptions == 0 and sink.backchannels == ["음"]


async def test_barge_in_secs_0_interrupts_at_once_as_before():
    sink, context = await _run([BotStartedSpeakingFrame(), SleepFrame(0.1), *_sound(0.3, "네")],
                               overrides=("turn.barge_in_secs=0",))
    assert sink.interruptions == 1 and sink.backchannels == [] and _users(context) == ["네"]


# --- a scripted call in the test lab ---------------------------------------------------------------

STT_DELAY_MS = 300  # a GPU Whisper's time for a short clip, on the safe side
# Rounds of the lab's call: the first is a long barge-in (its length decides), the second a short one
# (its words decide), each after two backchannels over the reply.
ROUNDS = 2


@pytest.fixture(scope="module")
def figures(tmp_path_factory, whisper_dir, standin_tts_dir):
    import asyncio

    from bot.testing import backchannel_call
    from bot.testing.backchannel_call import BackchannelLab
    from tests.conftest import offline_bot_overrides

    work = tmp_path_factory.mktemp("backchannel")
    overrides = offline_bot_overrides(whisper_dir, standin_tts_dir, "http://127.0.0.1:9/v1", work / "records")
    with pytest.MonkeyPatch.context() as mp, BackchannelLab(overrides, work, stt_delay_ms=STT_DELAY_MS) as lab:
        # The call's script and its rounds follow the barge-ins (stt_script and scripted_call read them).
        mp.setattr(backchannel_call, "BARGE_INS", backchannel_call.BARGE_INS[:ROUNDS])
        result = asyncio.run(lab.run(CONFIG.turn.barge_in_secs))
    print(result.render())
    return result


@pytest.mark.slow
def test_no_reply_is_lost_to_a_backchannel(figures):
    backchannels = [s for s in figures.sounds if s.kind == "backchannel"]
    assert len(backchannels) == 2 * ROUNDS
    assert figures.lost_replies == 0, figures.render()
    assert figures.backchannels_recorded == 2 * ROUNDS, figures.render()  # counted, over the replies they came in


@pytest.mark.slow
def test_every_barge_in_stops_the_bot_and_is_answered(figures):
    from bot.testing.backchannel_call import BARGE_INS, QUESTION

    barge_ins = [s for s in figures.sounds if s.kind == "barge_in"]
    assert sorted(s.end - s.start > 1.0 for s in barge_ins) == [False, True]  # a short one and a long one
    assert figures.honoured == ROUNDS, figures.render()
    # One model call per turn: the question, each barge-in and the final yes; none for a backchannel.
    assert figures.llm_calls == ROUNDS + 2, figures.render()
    assert figures.turn_transcripts == [QUESTION[0], *(t for t, _ in BARGE_INS[:ROUNDS]), "네"], figures.render()


@pytest.mark.slow
def test_a_yes_to_the_silent_bot_is_still_a_turn(figures):
    assert figures.turn_transcripts[-1] == "네"
