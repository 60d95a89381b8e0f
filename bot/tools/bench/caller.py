"""One simulated Twilio caller: speaks a script's clips, waits for the bot, times what it hears."""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from dataclasses import dataclass, field

import httpx

from bot.core.bearer import bearer_header
from bot.tools.bench.turnset import BenchError, Turn

BOT_QUIET_GAP = 0.3  # the bot counts as finished after this long without audible audio
HANG_UP_GRACE_S = 3.0  # then the caller waits this long for the bot's hang-up before hanging up itself
PAUSE_RANGE = (0.3, 1.0)  # caller's pause after the bot finished, before speaking
FRAME_SECS = 0.02


@dataclass
class CallerTurn:
    """What the caller saw of one of its turns (times: wall clock, seconds)."""

    call_id: str
    turn: int  # 1-based within the call
    turn_id: str
    label: str
    expected_route: str
    wav: str
    speech_start: float | None = None  # the first speech frame was sent
    speech_end: float | None = None  # the last speech frame was sent
    pause_ms: float | None = None  # bot went quiet -> caller's first speech frame
    first_audio: float | None = None  # first audible bot media after this turn's speech began
    caller_ttfa_ms: float | None = None  # first_audio - speech_end (negative: cut off early)
    cut_off_early: bool = False
    no_answer: bool = False
    bot_resumed: int = 0  # the bot started talking again during the caller's pause
    send_lag_ms: float = 0.0  # the line's worst lateness while this turn's speech was being sent (overload)


@dataclass
class CallResult:
    call_id: str
    script: list[str]
    turns: list[CallerTurn] = field(default_factory=list)
    ended_by: str = "caller"  # caller (stop) | bot (closed the stream) | rejected | error
    error: str | None = None
    max_send_lag_ms: float = 0.0
    send_stalls: list[tuple[float, float]] = field(default_factory=list)  # (wall time, worst lag ms) over 20 ms
    stream_started: float | None = None  # wall time the stream's start message went out
    greeting_ms: float | None = None  # stream start -> first audible greeting audio


@dataclass
class Target:
    """A server to call: where to POST the webhook, what URL the signature covers, the media URL."""

    base_url: str
    public_url: str
    ws_url: str
    auth_token: str | None
    records_token: str | None = None  # RECORDS_API_TOKEN: /api/turns answers 401/404 without it
    admin_url: str | None = None  # the operations listener (/healthz figures for the soak)

    @property
    def records_headers(self) -> dict[str, str]:
        return bearer_header(self.records_token)


class _Clock:
    """Monotonic (what the simulator stamps) to wall clock (what the server records)."""

    def __init__(self):
        self.offset = time.time() - time.monotonic()

    def wall(self, mono: float | None) -> float | None:
        return None if mono is None else mono + self.offset


async def _pause_after_bot(call, rng: random.Random, timeout: float) -> tuple[float, int]:
    """Wait for the bot to finish, then pause 0.3-1.0 s; start over if the bot resumes. Returns (quiet, resumed)."""
    resumed = 0
    while True:
        quiet = await call.wait_for_silence_from_bot(gap=BOT_QUIET_GAP, timeout=timeout)
        if call.closed:
            return quiet, resumed
        target = quiet + rng.uniform(*PAUSE_RANGE)
        await asyncio.sleep(max(0.0, target - time.monotonic()))
        heard = call.audible_media_times
        if heard and heard[-1] > quiet:
            resumed += 1
            continue
        return quiet, resumed


async def _speak(call, turn: Turn) -> tuple[float, float]:
    """Send the clip up to its speech end; returns monotonic (first speech frame sent, last speech frame sent)."""
    end_samples = min(len(turn.pcm) // 2, math.ceil(turn.speech_end_s / FRAME_SECS) * round(FRAME_SECS * turn.rate))
    await call.send_audio(turn.pcm[: end_samples * 2], turn.rate)
    done = time.monotonic()
    frames = math.ceil(end_samples / (FRAME_SECS * turn.rate))
    first_speech_frame = int(turn.speech_start_s / FRAME_SECS)  # 0-based index of the frame holding it
    return done - (frames - 1 - first_speech_frame) * FRAME_SECS, done


def _note_send_lag(result: CallResult, call, clock: _Clock) -> None:
    """The line's lateness on the call and on each turn's speech (a stall [at, at + lag] over it)."""
    result.max_send_lag_ms = round(call.max_send_lag * 1000, 1)
    if not call.started_at:
        return
    result.stream_started = clock.wall(call.started_at)
    result.send_stalls = [(clock.wall(call.started_at + at), round(lag * 1000, 1))
                          for at, lag in call.send_stalls(min_lag=0.02)]
    for ct in result.turns:
        if ct.speech_start is None or ct.speech_end is None:
            continue
        ct.send_lag_ms = max((lag for at, lag in result.send_stalls
                              if at <= ct.speech_end and at + lag / 1000 >= ct.speech_start), default=0.0)


async def run_call(target: Target, script: list[Turn], *, clock: _Clock, rng: random.Random,
                   answer_timeout: float, on_turn=None) -> CallResult:
    """One simulated caller: webhook, stream, greeting, the scripted turns, hang up."""
    from bot.testing.twilio_sim import (
        CallClosed,
        TwilioCallSimulator,
        new_sid,
        parse_twiml_stream,
        post_voice_webhook,
        voice_webhook_params,
    )

    call_sid = new_sid("CA")
    result = CallResult(call_sid, [t.id for t in script])
    try:
        resp = await post_voice_webhook(target.base_url, target.public_url, voice_webhook_params(call_sid), target.auth_token)
        if resp.status_code != 200:
            raise BenchError(f"webhook answered {resp.status_code}: {resp.text[:200]}")
        try:
            _, params = parse_twiml_stream(resp.text)
        except ValueError as e:
            result.ended_by, result.error = "rejected", f"{e}: {resp.text[:200]}"
            return result
    except (httpx.HTTPError, BenchError) as e:
        result.ended_by, result.error = "error", str(e)
        return result

    done = 0
    call = None
    try:
        async with TwilioCallSimulator(target.ws_url, call_sid=call_sid, custom_parameters=params) as call:
            greeting = await call.wait_for_media(timeout=answer_timeout)
            result.greeting_ms = round((greeting - call.started_at) * 1000, 1)
            for i, turn in enumerate(script, 1):
                ct = CallerTurn(call_sid, i, turn.id, turn.label, turn.route, str(turn.wav.name))
                result.turns.append(ct)
                quiet, ct.bot_resumed = await _pause_after_bot(call, rng, timeout=answer_timeout * 3)
                if call.closed:
                    result.ended_by = "bot"
                    break
                start, end = await _speak(call, turn)
                ct.speech_start, ct.speech_end = clock.wall(start), clock.wall(end)
                ct.pause_ms = round((start - quiet) * 1000, 1)
                try:
                    first = await call.wait_for_media(timeout=answer_timeout, after=start)
                except TimeoutError:
                    ct.no_answer = True
                else:
                    ct.first_audio = clock.wall(first)
                    ct.caller_ttfa_ms = round((first - end) * 1000, 1)
                    ct.cut_off_early = first <= end
                done += 1
                if on_turn:
                    on_turn()
            if not call.closed:
                await call.wait_for_silence_from_bot(gap=BOT_QUIET_GAP, timeout=answer_timeout * 3)
            if not call.closed:
                # After its last words the bot may be hanging up (goodbye -> end -> close): a caller
                # gives it a moment before putting the phone down, however busy the machine is.
                with contextlib.suppress(TimeoutError):
                    await call.wait_closed(timeout=HANG_UP_GRACE_S)
            if call.closed:
                result.ended_by = "bot"
            else:
                await call.stop()
    except CallClosed as e:
        result.ended_by, result.error = "bot", f"stream closed early: {e}"
    except (TimeoutError, OSError) as e:
        result.ended_by, result.error = "error", f"{type(e).__name__}: {e}"
    finally:
        if call is not None:  # an errored call's lag counts too: overload is what errors it
            _note_send_lag(result, call, clock)
        if on_turn:
            for _ in range(len(script) - done):
                on_turn()
    return result


# --------------------------------------------------------------------------------- servers
