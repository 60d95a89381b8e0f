"""A scripted phone call over the bot's replies: 10 backchannels and 5 barge-ins, measured as the caller hears it.

The lab (``BackchannelLab``): a fake vLLM whose every answer is a long reply, and the product server
as ``python -m bot.testing.lab_server`` with the fixed-delay STT, so the words of each sound are the
script's (the call's ``stt_script`` parameter) after a delay the lab sets, whatever the machine.
The caller (``scripted_call``) asks a question; over each of the 5 replies that follow it says two
backchannels ("네", "음", "그렇죠" ...; espeak clips Silero hears as 0.2-0.35 s of speech) and then
barges in, alternately long ("아니요 잠깐만요 다른 거 여쭤볼게요", 2.4 s: the length decides) and short
("아니요", 0.46 s: the words decide); after the sixth reply has ended it says "네" to the silent bot,
which must be a turn (a yes to "맞으신가요?").

Measured on the caller's side (the simulator's playback clock): replies lost to a backchannel (a
``clear``, i.e. the bot stopping, before that round's barge-in), the longest pause in the reply's
audio around each backchannel, barge-ins honoured (a ``clear`` after the barge-in began) and the
time from the barge-in's first speech to that ``clear`` (Twilio drops its buffer: the bot is quiet).
``tests/call/test_backchannel.py`` asserts the counts; ``scripts/backchannel_figures.py`` prints them.
"""

from __future__ import annotations

import asyncio
import json
import secrets as pysecrets
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.wav import read_wav
from bot.testing.fake_llm import FakeLLM
from bot.testing.lab import Lab
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
ACCOUNT_SID = "AC" + "3" * 32
AUTH_TOKEN = "backchannel-lab-" + pysecrets.token_hex(8)

LONG_REPLY = {
    "reply": "네, 대형 폐기물 배출 방법을 안내해 드릴게요. 먼저 구청 누리집이나 주민센터에서 배출 신고를 하셔야 합니다. "
    "신고하실 때 품목과 크기에 따라 수수료를 내시면 됩니다. 신고 번호를 적은 스티커를 붙여 두시면 됩니다. "
    "정해진 수거일 아침에 집 앞에 내놓으시면 수거해 갑니다. 더 궁금하신 점이 있으시면 말씀해 주세요.",
    "intent": "ask_info", "category": "waste", "location": None, "time": None, "flow": "continue",
}  # fmt: skip

QUESTION = ("대형 폐기물은 어떻게 버리나요?", "ko_trash.wav")
BACKCHANNELS = [("네", "ko_nene.wav"), ("예", "ko_nene.wav"), ("네네", "ko_nene.wav"), ("음", "ko_nene.wav"),
                ("그렇죠", "ko_majayo.wav"), ("맞아요", "ko_majayo.wav"), ("아", "ko_nene.wav"), ("어", "ko_nene.wav"),
                ("네 네", "ko_nene.wav"), ("아 그렇죠", "ko_majayo.wav")]
BARGE_INS = [("아니요 잠깐만요 다른 거 여쭤볼게요", "ko_wait.wav"), ("아니요", "ko_aniyo.wav"),
             ("잠깐만요 하나만 더 여쭤볼게요", "ko_wait.wav"), ("아니요 그게 아니고요", "ko_aniyo.wav"),
             ("잠깐만요 주소가 바뀌었어요", "ko_wait.wav")]
FINAL_YES = ("네", "ko_nene.wav")
# When, after a reply became audible, the caller makes each sound of its round (s).
AT_BACKCHANNEL = (1.2, 3.0)
AT_BARGE_IN = 4.8


def stt_script() -> list[str]:
    """Each segment's words, in the order the caller says them."""
    texts = [QUESTION[0]]
    for r in range(len(BARGE_INS)):
        texts += [BACKCHANNELS[2 * r][0], BACKCHANNELS[2 * r + 1][0], BARGE_INS[r][0]]
    return [*texts, FINAL_YES[0]]


@dataclass
class Sound:
    """One thing the caller said over (or after) a reply, and what the bot did."""

    kind: str  # backchannel | barge_in | yes
    text: str
    start: float  # monotonic: its first speech on the line
    end: float  # ... and its last
    clear_at: float | None = None  # the bot's clear that followed (barge-in), or one that should not have
    longest_pause_s: float | None = None  # backchannel: the longest gap in the bot's audio around it


@dataclass
class Figures:
    sounds: list[Sound]
    records: list[dict] = field(default_factory=list)
    llm_calls: int = 0
    stt_delay_ms: float = 0.0
    barge_in_secs: float = 0.0

    def _of(self, kind: str) -> list[Sound]:
        return [s for s in self.sounds if s.kind == kind]

    @property
    def lost_replies(self) -> int:
        return sum(s.clear_at is not None for s in self._of("backchannel"))

    @property
    def honoured(self) -> int:
        return sum(s.clear_at is not None for s in self._of("barge_in"))

    def quiet_s(self, long: bool | None = None) -> list[float]:
        """Barge-ins: from the first speech to the bot going quiet (its clear)."""
        return [round(s.clear_at - s.start, 3) for s in self._of("barge_in") if s.clear_at is not None
                and (long is None or (s.end - s.start > 1.0) == long)]

    @property
    def backchannels_recorded(self) -> int:
        return sum(r.get("backchannels", 0) for r in self.records)

    @property
    def turn_transcripts(self) -> list[str]:
        return [r["transcript"] for r in self.records if r.get("transcript")]

    def render(self) -> str:
        def span(xs: list[float]) -> str:
            if not xs:
                return "-"
            return f"median {statistics.median(xs):.2f} s (min {min(xs):.2f}, max {max(xs):.2f}, n {len(xs)})"

        pauses = [s.longest_pause_s for s in self._of("backchannel") if s.longest_pause_s is not None]
        bcs, bis = self._of("backchannel"), self._of("barge_in")
        return "\n".join([
            f"backchannel/barge-in call (fixed-delay STT {self.stt_delay_ms:.0f} ms, turn.barge_in_secs {self.barge_in_secs}):",
            f"  replies lost to a backchannel: {self.lost_replies}/{len(bcs)} (target 0)",
            f"  barge-ins honoured: {self.honoured}/{len(bis)} (target {len(bis)})",
            f"  speech start -> bot quiet, barge-ins: {span(self.quiet_s())}",
            f"    long (the length decides): {span(self.quiet_s(long=True))}",
            f"    short (the words decide): {span(self.quiet_s(long=False))}",
            f"  reply never stopped for a backchannel; longest pause in its audio around one: "
            f"{max(pauses) * 1000 if pauses else float('nan'):.0f} ms",
            f"  backchannels in the turn records: {self.backchannels_recorded}; model calls: {self.llm_calls}",
            f"  turns: {self.turn_transcripts}",
        ])  # fmt: skip


def _clip(name: str) -> tuple[bytes, int, float, float]:
    """PCM, rate and the speech's (start, end) in the clip (energy envelope)."""
    import numpy as np

    pcm, rate = read_wav(FIXTURES / name)
    x = np.abs(np.frombuffer(pcm, dtype="<i2").astype(np.float64))
    loud = np.flatnonzero(x > x.max() * 0.01)
    return pcm, rate, loud[0] / rate, (loud[-1] + 1) / rate


async def _say(call: TwilioCallSimulator, kind: str, text: str, clip: str) -> Sound:
    pcm, rate, a, b = _clip(clip)
    await call.send_audio(pcm, rate)
    end = time.monotonic()
    length = len(pcm) / 2 / rate
    return Sound(kind, text, end - length + a, end - length + b)


def _longest_pause(call: TwilioCallSimulator, a: float, b: float) -> float:
    """The longest stretch of [a, b] the caller heard no bot audio in."""
    ivs = [(max(s, a), min(e, b)) for s, e in call.heard_intervals() if e > a and s < b]
    if not ivs:
        return b - a
    gaps = [ivs[0][0] - a, b - ivs[-1][1]] + [n[0] - p[1] for p, n in zip(ivs, ivs[1:])]
    return max(0.0, *gaps)


async def scripted_call(call: TwilioCallSimulator) -> list[Sound]:
    """Greeting, question, 5 rounds over the replies, then "네" to the silent bot (see the module doc)."""
    sounds: list[Sound] = []
    await call.wait_for_media(timeout=30)
    await call.wait_for_silence_from_bot(gap=0.8, timeout=30)
    await _say(call, "question", *QUESTION)
    since = time.monotonic()
    for r, (text, clip) in enumerate(BARGE_INS):
        t0 = await call.wait_for_media(timeout=30, after=since)
        for at, (bc_text, bc_clip) in zip(AT_BACKCHANNEL, BACKCHANNELS[2 * r: 2 * r + 2]):
            await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
            sounds.append(await _say(call, "backchannel", bc_text, bc_clip))
        await asyncio.sleep(max(0.0, t0 + AT_BARGE_IN - time.monotonic()))
        barge = await _say(call, "barge_in", text, clip)
        sounds.append(barge)
        try:
            barge.clear_at, _ = await call.wait_for_event("clear", timeout=5, after=barge.start)
        except TimeoutError:
            pass
        for bc in sounds[-3:-1]:
            clears = [c for c in call.clears if bc.start <= c < barge.start]
            bc.clear_at = clears[0] if clears else None
            bc.longest_pause_s = round(_longest_pause(call, bc.start, min(bc.end + 1.0, barge.start)), 3)
        since = barge.end  # the next reply starts after the caller stopped
    # The last reply plays to its end; then a yes to the silent bot.
    await call.wait_for_media(timeout=30, after=since)
    await call.wait_for_silence_from_bot(gap=1.0, timeout=60)
    yes = await _say(call, "yes", *FINAL_YES)
    sounds.append(yes)
    await call.wait_for_media(timeout=30, after=yes.end)
    return sounds


class BackchannelLab(Lab):
    """The fake vLLM and one lab bot; ``with BackchannelLab(overrides, work, stt_delay_ms) as lab:``."""

    def __init__(self, overrides: list[str], work: Path, *, stt_delay_ms: float, config_path: str | None = None,
                 verbose: bool = False):
        super().__init__(work)
        self.stt_delay_ms = stt_delay_ms
        self._overrides = overrides
        self._config_path = config_path
        self._verbose = verbose
        self.public_host = "voice-bc.example.org"

    def _start_parts(self) -> None:
        self.llm = self._stack.enter_context(FakeLLM(responder=lambda body: LONG_REPLY, first_token_delay=0.15,
                                                     token_delay=0.01))
        sets = [*self._overrides, f"llm.base_url='{self.llm.base_url}'", f"server.public_host='{self.public_host}'",
                "call.greeting='네, 말씀하세요.'", "call.idle_prompt_secs=0", "twilio.auto_hang_up=false"]
        entry = ("-m", "bot.testing.lab_server", "--stt-text", "네", "--stt-delay-ms", str(self.stt_delay_ms))
        self.bot = BotProcess(sets, {"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT_SID},
                              self.work / "bot.log", entry=entry, config_path=self._config_path,
                              extra_args=("-v",) if self._verbose else ())
        self._stack.callback(self.bot.stop)
        self.bot.wait_ready(300)

    async def open_call(self) -> TwilioCallSimulator:
        call_sid = new_sid("CA")
        resp = await post_voice_webhook(self.bot.base_url, f"https://{self.public_host}/twilio/voice",
                                        voice_webhook_params(call_sid, account_sid=ACCOUNT_SID), AUTH_TOKEN)
        resp.raise_for_status()
        _, params = parse_twiml_stream(resp.text)
        params["stt_script"] = json.dumps(stt_script(), ensure_ascii=False)
        return TwilioCallSimulator(self.bot.ws_url, call_sid=call_sid, custom_parameters=params, account_sid=ACCOUNT_SID)

    async def run(self, barge_in_secs: float) -> Figures:
        """One scripted call; its figures with the server's turn records of it."""
        self.llm.reset()
        call = await self.open_call()
        async with call:
            sounds = await scripted_call(call)
        records: list[dict] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            records = [t for t in self.bot.turns() if t.get("call_id") == call.call_sid]
            if records and all(r.get("route") != "pending" for r in records):
                break
            await asyncio.sleep(0.25)
        return Figures(sounds, sorted(records, key=lambda r: r.get("index", 0)), self.llm.calls,
                       self.stt_delay_ms, barge_in_secs)
