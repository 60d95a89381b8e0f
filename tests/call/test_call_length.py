"""Issue 47: the longest call (call.max_minutes): two minutes before, one sentence offering a callback
or a text, in the call's language; at the limit, the polite end (end_reason "max_minutes")."""

from __future__ import annotations

from pipecat.frames.frames import EndWorkerFrame, TTSSpeakFrame

from bot.call.assets import DialogAssets
from bot.call.length import CallLengthLimit
from bot.call.wiring import make_policy
from bot.config import load_config
from bot.dialog.policy import CALLBACK, SMS_OFFER, BookCallback, TextTicket
from bot.dialog.state import DialogState


def _line(*extra: str):
    config = load_config(overrides=["line.languages=['ko','en']", *extra])
    assets = DialogAssets.load(config)
    return config, assets, make_policy(config, assets)


async def _run(policy, dialog, minutes=20.0):
    slept, said = [], []

    async def sleep(s):
        slept.append(s)

    async def push(frame):
        said.append(frame)

    await CallLengthLimit(policy=policy, dialog=dialog, max_minutes=minutes, push=push, sleep=sleep).run()
    return slept, said


def test_the_default_limit_is_twenty_minutes():
    assert load_config().call.max_minutes == 20.0


async def test_two_minutes_before_a_callback_is_offered_and_at_the_limit_the_call_ends():
    _config, assets, policy = _line()
    dialog = DialogState()
    slept, said = await _run(policy, dialog)
    assert slept == [18 * 60.0, 2 * 60.0]
    texts = [f.text for f in said if isinstance(f, TTSSpeakFrame)]
    assert texts == [assets.canned.time_limit_callback, assets.canned.time_limit_end]
    assert isinstance(said[-1], EndWorkerFrame)
    assert dialog.ended and dialog.end_reason == "max_minutes"


async def test_a_yes_to_the_offer_books_the_callback():
    _config, _assets, policy = _line()
    dialog = DialogState()
    near = policy.time_limit_near(dialog)
    near.change.apply(dialog, near.reply)
    assert dialog.awaiting == CALLBACK
    assert isinstance(policy.decide("네", dialog), BookCallback)


async def test_a_caller_with_a_ticket_is_offered_its_number_by_text():
    _config, assets, policy = _line("sms.enabled=true", "sms.from_number='+821012345678'")
    dialog = DialogState(textable=True, tickets=["20260042"])
    near = policy.time_limit_near(dialog)
    assert near.sentences == (assets.canned.time_limit_text,)
    near.change.apply(dialog, near.reply)
    assert dialog.awaiting == SMS_OFFER and policy.decide("네", dialog) == TextTicket("20260042")


async def test_a_pending_read_back_is_not_replaced_and_an_english_call_hears_english():
    _config, assets, policy = _line()
    dialog = DialogState(language="en", awaiting="confirmation")
    _slept, said = await _run(policy, dialog)
    en = assets.languages["en"].canned
    assert [f.text for f in said if isinstance(f, TTSSpeakFrame)] == [en.time_limit_warning, en.time_limit_end]


async def test_a_call_that_ended_already_hears_nothing_and_zero_is_no_limit():
    _config, _assets, policy = _line()
    dialog = DialogState(ended=True)
    assert (await _run(policy, dialog))[1] == []
    assert await _run(policy, DialogState(), minutes=0) == ([], [])


async def test_a_call_pipeline_hears_the_offer_and_ends_at_the_limit():
    """The guard's clock in a real Pipecat worker: the sentences go down the pipeline, then the end."""
    import asyncio
    from types import SimpleNamespace

    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.processors.frame_processor import FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    from bot.call.guard import CallGuard
    from bot.telemetry.turns import CallRecorder

    class Sink(FrameProcessor):  # stands where the TTS stands (and, unlistening, for the user aggregator)
        def __init__(self):
            super().__init__()
            self.said = []

        async def process_frame(self, frame, direction):
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSSpeakFrame):
                self.said.append(frame.text)
            await self.push_frame(frame, direction)

    config, assets, policy = _line("call.max_minutes=0.01")  # 0.6 s: the offer at once, the end after it
    user_agg, sink = Sink(), Sink()
    worker = PipelineWorker(Pipeline([user_agg, sink]), enable_rtvi=False)
    dialog = DialogState()
    session = SimpleNamespace(worker=worker, dialog=dialog, policy=policy,
                              stt=FrameProcessor(), tts=FrameProcessor(), recorder=CallRecorder("CAlength"))
    CallGuard(session, config, None).attach(user_agg)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.wait_for(runner.run(), timeout=10)
    assert sink.said == [assets.canned.time_limit_callback, assets.canned.time_limit_end]
    assert dialog.ended and dialog.end_reason == "max_minutes"
