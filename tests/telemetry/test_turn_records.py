"""TurnObserver fills turn records from frames: the dialog stage's turn facts, late ones included."""

import asyncio

from pipecat.frames.frames import (
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test

from bot.stages.whisper import UnclearSpeechFrame
from bot.telemetry.turn_facts import (
    DialogTurnFrame,
    FactsFoundFrame,
    KeypadTurnFrame,
    LLMRequestFrame,
    LLMRequestWithdrawnFrame,
    SentenceReadyFrame,
    SpeechReadFrame,
    TurnAnsweredFrame,
    TurnMarkFrame,
)
from bot.telemetry.turns import CallRecorder, TurnObserver

_STAGE, _NEXT = object(), object()


def _pushed(frame, direction=FrameDirection.DOWNSTREAM, source=_STAGE) -> FramePushed:
    return FramePushed(source=source, destination=_NEXT, frame=frame, direction=direction, timestamp=0)


async def _see(observer: TurnObserver, *frames, source=_STAGE) -> None:
    for frame in frames:
        await observer.on_push_frame(_pushed(frame, source=source))


def _recorder():
    saved: list[dict] = []
    return CallRecorder("CAturns", sink=saved.append), saved


async def test_a_run_of_the_dialog_fills_the_record_of_the_turn_it_answers():
    rec, saved = _recorder()
    obs = TurnObserver(rec)
    await _see(obs, UserStartedSpeakingFrame())
    await _see(obs, DialogTurnFrame(run=1, transcript="가로등이 고장났어요", line_open=True, language="ko"),
               FactsFoundFrame(run=1, retrieval_ms=0.4, facts=["faq-1", "faq-2"]),
               LLMRequestFrame(run=1, t=100.0),
               TurnMarkFrame(run=1, mark="llm_first_token", overwrite=True, t=100.3),
               TurnMarkFrame(run=1, mark="first_sentence", overwrite=True, t=100.5),
               TurnMarkFrame(run=1, mark="first_sentence", overwrite=False, t=100.9),
               TurnAnsweredFrame(run=1, route="llm", reply="네, 접수해 드릴게요.", intent="report", flow="continue",
                                 answer_source="none", slots={"category": "streetlight"}))
    turn = rec.records[1]
    assert (turn.transcript, turn.line_open, turn.language) == ("가로등이 고장났어요", True, "ko")
    assert turn.retrieval_ms == 0.4 and turn.facts == ["faq-1", "faq-2"]
    assert turn.llm_calls == 1 and turn.llm_request == 100.0 and turn.llm_first_token == 100.3
    assert turn.first_sentence == 100.5  # the frame's own time, and the first one wins
    assert (turn.route, turn.intent, turn.flow, turn.answer_source) == ("llm", "report", "continue", "none")
    assert turn.slots == {"category": "streetlight"} and turn.error is None and turn.escalation is None
    assert turn.reply == "네, 접수해 드릴게요." and turn.reply_chars == len(turn.reply)
    assert saved[-1]["index"] == 1 and saved[-1]["route"] == "llm"  # answered: saved


async def test_a_fact_that_arrives_after_the_next_turn_opened_lands_in_its_own_turn_and_is_saved_again():
    rec, saved = _recorder()
    obs = TurnObserver(rec)
    await _see(obs, UserStartedSpeakingFrame(), DialogTurnFrame(run=1, transcript="첫 번째", line_open=True,
                                                                language="ko"))
    await _see(obs, UserStartedSpeakingFrame())  # the caller's next turn opens: turn 1 is closed and saved
    assert [s["route"] for s in saved if s["index"] == 1] == ["no_reply"]
    await _see(obs, TurnMarkFrame(run=1, mark="first_sentence", overwrite=True, t=5.0),
               TurnAnsweredFrame(run=1, route="rule", reply="네.", intent="yes", flow="continue"))
    first, second = rec.records[1], rec.records[2]
    assert first.route == "rule" and first.reply == "네." and first.first_sentence == 5.0
    assert second.route == "pending" and second.reply is None and second.first_sentence is None
    assert rec.current is second
    assert saved[-1]["index"] == 1 and saved[-1]["route"] == "rule"  # the closed turn, saved again


async def test_a_withdrawn_speculative_call_is_counted_as_cancelled_in_its_run():
    rec, _ = _recorder()
    obs = TurnObserver(rec)
    await _see(obs, UserStartedSpeakingFrame(), DialogTurnFrame(run=1, transcript="어제부터"),
               LLMRequestFrame(run=1), LLMRequestWithdrawnFrame(run=1),
               DialogTurnFrame(run=2, transcript="어제부터 소음이 심해요"), LLMRequestFrame(run=2))
    turn = rec.records[-1]
    assert turn.llm_calls == 1 and turn.llm_cancelled_calls == 1
    assert turn.transcript == "어제부터 소음이 심해요"


async def test_keys_on_the_pad_open_a_turn_of_their_own():
    rec, saved = _recorder()
    obs = TurnObserver(rec)
    await _see(obs, KeypadTurnFrame(run=1, transcript="[keypad] 2026#", line_open=False),
               TurnAnsweredFrame(run=1, route="rule", reply="접수 상태입니다.", intent="status"))
    assert [r.route for r in rec.records] == ["greeting", "rule"]
    assert rec.records[1].transcript == "[keypad] 2026#" and rec.records[1].line_open is False
    assert rec.records[1].language is None  # a keypad turn says nothing of the language
    assert saved[0]["route"] == "greeting"


async def test_a_directory_answer_names_its_entry_as_the_source():
    rec, _ = _recorder()
    obs = TurnObserver(rec)
    await _see(obs, UserStartedSpeakingFrame(), DialogTurnFrame(run=1, transcript="청소과 번호"),
               FactsFoundFrame(run=1, retrieval_ms=0.2, facts=[], directory_hit="dept-clean"))
    assert rec.current.answer_source == "dept-clean" and rec.current.retrieval_ms == 0.2


async def test_unclear_speech_and_stock_services_are_read_off_pipecat_frames():
    rec, _ = _recorder()
    stt, llm = object(), object()
    obs = TurnObserver(rec, stock_stt=stt, stock_llm=llm)
    await _see(obs, UserStartedSpeakingFrame(), VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=50.0))
    await _see(obs, UnclearSpeechFrame(reason="no_speech", audio_secs=2.0), source=stt)
    assert rec.current.route == "unclear" and rec.current.speech_end == 49.8
    await _see(obs, UserStartedSpeakingFrame())
    await _see(obs, TranscriptionFrame("안녕하세요", "u", "now"), source=stt)
    await _see(obs, LLMFullResponseStartFrame(), LLMTextFrame("네"), source=llm)
    turn = rec.current
    assert turn.stt_done is not None and turn.llm_calls == 1 and turn.route == "llm"
    assert turn.llm_request is not None and turn.llm_first_token is not None


class _Stage(FrameProcessor):
    """Pushes a turn fact after the next turn opened (the late-frame case, through a real pipeline)."""

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, DialogTurnFrame):
            self.create_task(self._later(frame.run))

    async def _later(self, run):
        await asyncio.sleep(0.2)
        await self.push_frame(TurnAnsweredFrame(run=run, route="llm", reply="늦은 답"))


async def test_late_facts_find_their_turn_in_a_running_pipeline():
    rec, _ = _recorder()
    obs = TurnObserver(rec)
    frames = [UserStartedSpeakingFrame(), SleepFrame(0.05), DialogTurnFrame(run=7, transcript="하나"),
              SleepFrame(0.05), UserStartedSpeakingFrame(), SleepFrame(0.4)]
    await run_test(Pipeline([_Stage()]), frames_to_send=frames, expected_down_frames=None, observers=[obs])
    assert [r.route for r in rec.records] == ["greeting", "llm", "pending"]
    assert rec.records[1].reply == "늦은 답" and rec.records[1].transcript == "하나"
    assert rec.records[2].reply is None


async def test_caught_up_waits_until_the_frame_has_been_handled():
    rec, _ = _recorder()
    obs = TurnObserver(rec)
    frame = TurnAnsweredFrame(run=0, route="rule", reply="네.")
    waiting = asyncio.create_task(obs.caught_up(frame))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    await _see(obs, frame)
    await asyncio.wait_for(waiting, 1)
    await asyncio.wait_for(obs.caught_up(frame), 1)  # already handled: at once


async def test_the_stt_and_tts_say_what_they_measured_and_the_observer_names_canned_sentences():
    rec, _ = _recorder()
    obs = TurnObserver(rec, sentence_names={"잠시만 기다려 주세요.": "filler"})
    await _see(obs, UserStartedSpeakingFrame(),
               SpeechReadFrame(audio_secs=1.5, transcribe_ms=300.0, rtf=0.2, t=50.0),
               SpeechReadFrame(audio_secs=2.0, transcribe_ms=420.0, rtf=0.21, language_p=0.9123, t=51.0))
    turn = rec.current
    assert (turn.stt_done, turn.stt_audio_secs, turn.stt_ms, turn.stt_rtf) == (51.0, 2.0, 420.0, 0.21)  # the latest
    assert turn.language_p == 0.912
    await _see(obs, SentenceReadyFrame(synth_ms=0.0, text="잠시만 기다려 주세요."),
               SentenceReadyFrame(synth_ms=12.34, text="가로등 위치를 말씀해 주세요."))
    assert turn.tts_synth_ms == [0.0, 12.3] and turn.heard == ["filler", "reply"]
    # Speech over the reply once it is heard does not re-time the turn's STT.
    turn.first_audio_out = 52.0
    await _see(obs, SpeechReadFrame(audio_secs=0.4, transcribe_ms=90.0, rtf=0.2, t=53.0))
    assert turn.stt_done == 51.0 and turn.stt_audio_secs == 2.0
    # The stock baseline keeps no names: its records list no sentences heard.
    stock, _ = _recorder()
    await _see(TurnObserver(stock), SentenceReadyFrame(synth_ms=5.0, text="x"))
    assert stock.current.tts_synth_ms == [5.0] and stock.current.heard == []
