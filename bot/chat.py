"""``run_bot.py chat``: the dialog stage without audio, one JSON line per caller line.

It runs the same ``StructuredLLMService`` as a call, in a real Pipecat pipeline, so shortcuts,
slots, the single structured call and every failure path behave exactly as on the phone.
"""

from __future__ import annotations

import asyncio
import json
from typing import TextIO

from pipecat.frames.frames import AggregatedTextFrame, LLMContextFrame, LLMFullResponseEndFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from bot.config import Config, Secrets
from bot.latency import TurnRecord
from bot.pipeline import DialogAssets, make_llm


class _ReplyCollector(FrameProcessor):
    """Collects the sentences the TTS would speak; signals the end of each answer."""

    def __init__(self):
        super().__init__()
        self.sentences: list[str] = []
        self.done = asyncio.Event()

    async def process_frame(self, frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, AggregatedTextFrame):
            self.sentences.append(frame.text)
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.done.set()
        await self.push_frame(frame, direction)


async def run_chat(config: Config, stdin: TextIO, stdout: TextIO) -> int:
    assets = DialogAssets.load(config)
    record: list[TurnRecord] = []
    llm = make_llm(config, Secrets.from_env(config), assets, current_record=lambda: record[-1] if record else None,
                   end_call_on_end_flow=False)
    collector = _ReplyCollector()
    worker = PipelineWorker(Pipeline([llm, collector]), params=PipelineParams(), enable_rtvi=False)
    runner = WorkerRunner(handle_sigint=False)
    run_task = asyncio.create_task(runner.run(worker))
    context = LLMContext()
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, stdin.readline)
            if not line:
                break
            text = line.strip()
            if not text:
                continue
            record.append(TurnRecord(call_id="chat", index=len(record), turn_end=None))
            rec = record[-1]
            rec.mark("turn_end")
            collector.sentences.clear()
            collector.done.clear()
            context.add_message({"role": "user", "content": text})
            await worker.queue_frame(LLMContextFrame(context))
            await collector.done.wait()
            rec.mark("first_audio_out")  # no audio here: the answer is complete
            reply = " ".join(collector.sentences)
            context.add_message({"role": "assistant", "content": reply})
            result = llm.last_result
            stages = {k: v for k, v in rec.stages_ms().items() if k.startswith("llm")}
            out = {
                "route": result.route if result else "error",
                "reply": reply,
                "slots": llm.dialog.known_slots(),
                "flow": result.flow if result else "continue",
                "intent": result.intent if result else None,
                "llm_calls": rec.llm_calls,
                "ms": {**stages, "total": round(((rec.first_audio_out or 0) - (rec.turn_end or 0)) * 1000, 1)},
            }
            if result and result.error:
                out["error"] = result.error
            stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            stdout.flush()
            if result and result.flow == "end":
                break
    finally:
        await worker.cancel()
        await run_task
    return 0
