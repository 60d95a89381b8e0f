"""``run_bot.py chat``: the dialog stage without audio, one JSON line per caller line.

It runs the same dialog stage (``DialogLLMService``) as a call, in a real Pipecat pipeline, so shortcuts,
slots, the single structured call and every failure path behave exactly as on the phone.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO
from zoneinfo import ZoneInfo

from pipecat.audio.dtmf.types import KeypadEntry
from pipecat.frames.frames import AggregatedTextFrame, InputDTMFFrame, LLMContextFrame, LLMFullResponseEndFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from bot.call.assets import DialogAssets
from bot.call.language import new_dialog_state
from bot.call.wiring import make_llm
from bot.config import Config, Secrets
from bot.dialog.policy import KeyBuffer
from bot.stages.keypad import KeypadProcessor
from bot.telemetry.latency import TurnRecord
from bot.telemetry.turns import CallRecorder, TurnObserver

# Longest wait for the answer to a complete keypad entry (they are answered by rule: no model call).
KEY_ANSWER_SECS = 30.0


class _ReplyCollector(FrameProcessor):
    """Stands where the TTS stands: collects the sentences it would speak, with arrival times."""

    def __init__(self):
        super().__init__()
        self.sentences: list[tuple[float, str]] = []
        self.ended_at = 0.0
        self.end: LLMFullResponseEndFrame | None = None
        self.done = asyncio.Event()

    async def process_frame(self, frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, AggregatedTextFrame):
            self.sentences.append((time.monotonic(), frame.text))
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.ended_at = time.monotonic()
            self.end = frame
            self.done.set()
        await self.push_frame(frame, direction)


@dataclass
class ChatTurn:
    """One caller line and everything the dialog stage did with it (``record`` None: keys that made no
    entry yet, which the phone does not answer either; ``keys_held`` are the keys waiting for more)."""

    record: TurnRecord | None
    sentences: list[tuple[float, str]] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0
    keys_held: str = ""

    @property
    def reply(self) -> str:
        return " ".join(text for _, text in self.sentences)


class DialogSession:
    """A text-only call: ``async with DialogSession(config) as s: await s.turn("...")``."""

    def __init__(self, config: Config, secrets: Secrets | None = None, *, records=None, call_id: str = "chat",
                 at: datetime | None = None):
        self._config = config
        self._recorder = CallRecorder("chat")  # its turn records (turn 0 stands for the greeting)
        self._observer = TurnObserver(self._recorder)
        assets = DialogAssets.load(config)
        self.llm = make_llm(  # the call's own state: its language menu keys work as on the phone
            config, secrets or Secrets.from_env(config), assets, dialog=new_dialog_state(config, assets),
            end_call_on_end_flow=False,
            records=records, call_id=call_id, clock=(lambda: at) if at else None,
        )  # fmt: skip
        self._collector = _ReplyCollector()
        # The keypad stage's buffer, foreseen: pressed with the same dialog state (it changes only with an
        # answer, which is awaited), it says which keys make an entry and so whether an answer will come.
        self._keys = KeyBuffer()
        stages = [KeypadProcessor(dialog=self.llm.dialog), self.llm, self._collector]
        self._worker = PipelineWorker(Pipeline(stages), params=PipelineParams(), observers=[self._observer],
                                      enable_rtvi=False)
        self._context = LLMContext()
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> DialogSession:
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(self._worker)
        self._task = asyncio.create_task(runner.run())
        return self

    async def __aexit__(self, *exc):
        await self._worker.cancel()
        if self._task:
            await self._task

    async def _answered(self) -> None:
        """The reply is complete, and the observer has written the turn's record."""
        await self._collector.done.wait()
        await self._observer.caught_up(self._collector.end)

    async def turn(self, text: str) -> ChatTurn:
        """One caller line; a line of phone-pad keys ("20260001#", "0") is pressed, not said."""
        if text and all(c in "0123456789*#" for c in text):
            return await self.keys(text)
        rec = self._recorder.next_turn()
        rec.mark("turn_end")
        self._collector.sentences = []
        self._collector.done.clear()
        turn = ChatTurn(record=rec, started_at=time.monotonic())
        self._context.add_message({"role": "user", "content": text})
        await self._worker.queue_frame(LLMContextFrame(self._context))
        await self._answered()
        rec.mark("first_audio_out")  # no audio here: the answer is complete
        turn.sentences, turn.ended_at = list(self._collector.sentences), self._collector.ended_at
        self._context.add_message({"role": "assistant", "content": turn.reply})
        return turn

    def _answers(self, entry: str | None) -> bool:
        """Whether the dialog stage answers this keypad entry (the policy is pure: asking twice is safe)."""
        dialog = self.llm.dialog
        return entry is not None and self.llm.policy.for_language(dialog.language).keypad(entry, dialog) is not None

    async def keys(self, keys: str) -> ChatTurn:
        """Press keys on the phone pad (Twilio's dtmf events become the same frames). Waits only for the
        answers the keys' entries get: keys that make no entry yet (or one the line does not answer) return
        at once with no record and the keys held, as the phone stays silent."""
        self._collector.sentences = []
        started, pressed = time.monotonic(), time.time()
        rec = None
        for key in keys:
            answered = self._answers(self._keys.press(key, self.llm.dialog))
            self._collector.done.clear()
            await self._worker.queue_frame(InputDTMFFrame(KeypadEntry(key)))
            if answered:
                await asyncio.wait_for(self._answered(), KEY_ANSWER_SECS)
                rec = self._recorder.records[-1]  # the observer opened it for the keys (KeypadTurnFrame)
                rec.mark("turn_end", pressed)
        turn = ChatTurn(record=rec, sentences=list(self._collector.sentences), started_at=started,
                        ended_at=self._collector.ended_at if rec else time.monotonic(), keys_held=self._keys.keys)
        if rec is None:
            return turn
        self._context.add_message({"role": "assistant", "content": turn.reply})
        return turn


def parse_at(text: str, tz: str) -> datetime:
    """``--at``: an ISO time; without an offset it is the line's local time."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError as e:
        raise ValueError(f"--at {text!r}: expected an ISO time like 2026-10-14T10:00+09:00") from e
    return at if at.tzinfo else at.replace(tzinfo=ZoneInfo(tz))


async def run_chat(config: Config, stdin: TextIO, stdout: TextIO, *, at: datetime | None = None,
                   language: str | None = None) -> int:
    """Caller lines from ``stdin``, one JSON line per turn to ``stdout``; ``language``: the dialog's
    language from the first line (one of ``line.languages``), as if chosen on the keypad."""
    from bot.store.calls import CallLog

    loop = asyncio.get_running_loop()
    secrets = Secrets.from_env(config)
    records = await asyncio.to_thread(CallLog.open, config, secrets)  # tickets made in chat are real tickets
    try:
        return await _chat_lines(config, secrets, records, stdin, stdout, loop, at, language)
    finally:
        await records.aclose()


async def _chat_lines(config, secrets, records, stdin, stdout, loop, at=None, language=None) -> int:
    async with DialogSession(config, secrets, records=records, at=at) as session:
        if language:
            session.llm.dialog.set_language(language)
        while True:
            line = await loop.run_in_executor(None, stdin.readline)
            if not line:
                break
            if not line.strip():
                continue
            try:
                turn = await session.turn(line.strip())
            except TimeoutError:  # a keypad entry whose answer never came: said, and the next line is read
                stdout.write(json.dumps({"route": "error", "reply": "", "error": f"no answer within "
                                         f"{KEY_ANSWER_SECS:g} s", "llm_calls": 0}) + "\n")
                stdout.flush()
                continue
            if turn.record is None:  # keys without an entry yet: no answer, as on the phone
                stdout.write(json.dumps({"route": "none", "reply": "", "keys_held": turn.keys_held,
                                         "slots": session.llm.dialog.known_slots(), "flow": "continue",
                                         "llm_calls": 0}, ensure_ascii=False) + "\n")
                stdout.flush()
                continue
            result, rec = session.llm.last_result, turn.record
            ms = {k: v for k, v in rec.stages_ms().items() if k.startswith("llm")}
            ms["total"] = round((turn.ended_at - turn.started_at) * 1000, 1)
            out = {
                "route": result.route if result else "error",
                "reply": turn.reply,
                "slots": session.llm.dialog.known_slots(),
                "flow": result.flow if result else "continue",
                "intent": result.intent if result else None,
                "llm_calls": rec.llm_calls,
                "escalation": rec.escalation,
                "line_open": rec.line_open,
                "language": rec.language or session.llm.dialog.language,  # typed: no detection, the call's
                "ms": ms,
            }
            if result and result.error:
                out["error"] = result.error
            if result and result.flow == "end":  # why the line ended the call, as the call's record says
                out["end_reason"] = session.llm.dialog.end_reason or "completed"
            stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            stdout.flush()
            if result and result.flow == "end":
                break
    return 0
