"""A phone call's entries for ``CallHost.run``: a Twilio media stream, new or resumed (issue 46).

The entry builds the wire (``PhoneSerializer`` over the stream's socket), says the first words (the
greeting, a placed callback's opening, or the resume's), and hands the call over on a drain. The
serializer asks the call at its edges through one ``PhoneHandover`` (``bot.transports.twilio.Handover``).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from fastapi import WebSocket
from loguru import logger
from pipecat.transports.base_transport import BaseTransport
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport

from bot.app.host import HostedCall
from bot.call.noise_filter import make_audio_in_filter
from bot.call.openings import speak_callback_opening, speak_greeting, speak_resumed
from bot.call.request import CallRequest, Resume
from bot.call.session import CallSession
from bot.config import Config
from bot.core.deadline import in_thread
from bot.dialog.state import DialogState
from bot.line.calls import CallKind
from bot.privacy import mask
from bot.store.db import RECORDS_SECS
from bot.store.segments import HANDOVER, end_segment
from bot.transports.twilio import PhoneSerializer, StreamStart, build_dial_twiml

if TYPE_CHECKING:
    from bot.app.context import AppContext

HANDOVER_WAIT_SECS = 15.0  # drain: the longest wait for the bot to finish a sentence before the hand-over
HANDOVER_ANSWER_SECS = 5.0  # ... and for the answer to a caller's turn (a cough that gets none does not hold it)


@dataclass(eq=False, kw_only=True)
class PhoneStream:
    """A Twilio media stream admitted with its token (``bot.app.routes.media``): a new call."""

    kind: ClassVar[CallKind] = CallKind.PHONE
    connect_timeout_secs: ClassVar[float | None] = None  # the stream is there: its start was read

    websocket: WebSocket
    start: StreamStart
    caller: str | None = None
    serializer: PhoneSerializer | None = field(default=None, init=False)
    auto_hang_up: bool = field(default=False, init=False)  # the REST API hangs up and transfers
    _callback: dict | None = field(default=None, init=False)  # a booked callback we placed

    @property
    def call_id(self) -> str:
        return self.start.call_sid

    @property
    def hold(self) -> str:
        return self.start.call_sid  # the webhook's reservation (one worker without a line limit)

    @property
    def segment(self) -> int:
        return 0

    @property
    def resume(self) -> Resume | None:
        return None

    def closed(self) -> str | None:
        logger.info("call {}: stream closed", mask(self.call_id))
        return "stream_closed"

    def transport(self, ctx: AppContext, call: HostedCall) -> BaseTransport:
        config, secrets = ctx.config, ctx.secrets
        creds = bool(secrets.twilio_account_sid and secrets.twilio_auth_token)
        self.auto_hang_up = creds and config.twilio.auto_hang_up  # without credentials the stream's close ends it
        self.serializer = PhoneSerializer(
            self.start.stream_sid,
            call_sid=self.start.call_sid,
            account_sid=secrets.twilio_account_sid,
            auth_token=secrets.twilio_auth_token,
            base_url=config.twilio.api_base_url or None,
            params=PhoneSerializer.InputParams(auto_hang_up=self.auto_hang_up),
            fast_input_resampler=config.turn.fast_input_resampler,
            handover=PhoneHandover(ctx, call, self),
            api=ctx.twilio_api,
        )
        return FastAPIWebsocketTransport(
            self.websocket,
            FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False,
                                   serializer=self.serializer, audio_in_filter=make_audio_in_filter(config)),
        )

    def request(self, ctx: AppContext, transport: BaseTransport) -> CallRequest:
        return CallRequest(config=ctx.config, secrets=ctx.secrets, models=ctx.models, transport=transport,
                           call_id=self.call_id, records=ctx.records, stream_parameters=self.start.custom_parameters,
                           resume=self.resume)

    async def started(self, ctx: AppContext, call: HostedCall) -> None:
        session = call.built
        # The SMS offer needs a number to text, kept on the call's row (records on).
        session.dialog.textable = bool(self.caller) and ctx.config.records.enabled
        # Each turn's record carries the dialog's snapshot: a worker resuming the call rebuilds it (issue 46).
        session.recorder.snapshot = session.dialog.snapshot
        session.recorder.caller = self.caller  # masked in the call's trace (bot/telemetry/tracing.py)
        ctx.records.segment_started(self.call_id, self.segment)
        if self.start.custom_parameters.get("callback") and self.resume is None:  # our TwiML's hint; the row decides
            self._callback = await _placed_callback(ctx, self.call_id)

    async def greet(self, ctx: AppContext, call: HostedCall) -> None:
        if self._callback is not None:
            await speak_callback_opening(call.built, self._callback["reception_no"], self._callback.get("ticket"))
        else:
            await speak_greeting(call.built, ctx.config.call.greeting, ctx.config.call.recording_notice)

    async def hand_over(self, ctx: AppContext, call: HostedCall, max_wait_secs: float = HANDOVER_WAIT_SECS) -> bool:
        """Drain (``server.drain_handover``): at the next moment the bot is not speaking and no caller's
        turn waits for its answer, close the stream so that Twilio asks the <Connect>'s action, which
        resumes the call on another worker."""
        session, call_sid = call.built, self.call_id
        deadline = time.monotonic() + max_wait_secs

        def busy() -> bool:  # the bot's audio still playing, the caller speaking, or their answer coming
            rec = session.recorder
            turn = rec.current
            waiting = turn.route == "pending" and (turn.turn_end is None
                                                    or time.time() - turn.turn_end < HANDOVER_ANSWER_SECS)
            pending = self.serializer is not None and self.serializer.bot_audio_pending()
            return pending or rec.bot_speaking or waiting

        while busy() and time.monotonic() < deadline:  # noqa: ASYNC110 - three clocks, no event to wait on
            await asyncio.sleep(0.05)
        session.end_reason = HANDOVER
        try:
            await in_thread(RECORDS_SECS, end_segment, ctx.records.store, call_sid, self.segment,
                            reason=HANDOVER, bot_ended=False)
        except Exception as e:  # noqa: BLE001 - an unrecorded end resumes the call all the same
            logger.error("call {}: hand-over not recorded ({}: {})", mask(call_sid), type(e).__name__, str(e)[:120])
        logger.warning("call {}: drain: handing the call over (stream {} closed)", mask(call_sid), self.segment)
        with suppress(Exception):
            await self.websocket.close(code=1000, reason="handover")
        await session.worker.cancel()
        return True

    async def finished(self, ctx: AppContext, call: HostedCall) -> None:
        if call.session is None:
            return
        ctx.records.segment_ended(self.call_id, self.segment, call.session.end_reason or "hangup")
        if self.serializer is not None:
            ctx.gate.count_ignored(self.call_id, self.serializer.ignored)


@dataclass(eq=False, kw_only=True)
class ResumedStream(PhoneStream):
    """A later stream of a call whose stream ended (issue 46): the call goes on with its past (``resume``)."""

    resumed: Resume

    @property
    def segment(self) -> int:
        return self.resumed.segment

    @property
    def resume(self) -> Resume | None:
        return self.resumed

    async def greet(self, ctx: AppContext, call: HostedCall) -> None:
        await speak_resumed(call.built, self.resumed.emergency, sentence=not self.resumed.quiet)


class PhoneHandover:
    """What the phone serializer asks of its call (``bot.transports.twilio.Handover``)."""

    def __init__(self, ctx: AppContext, call: HostedCall, stream: PhoneStream) -> None:
        self.ctx, self.call, self.stream = ctx, call, stream

    async def caller_hung_up(self) -> None:
        """Twilio's stop message: the caller hung up."""
        session = self.call.built
        session.end_reason = session.end_reason or "caller_hangup"
        # Cancel from a separate task: we are inside the input transport's receive loop.
        task = asyncio.create_task(session.worker.cancel())
        self.ctx.background.add(task)
        task.add_done_callback(self.ctx.background.discard)

    def transfer_number(self) -> str | None:
        return transfer_target(self.ctx.config, self.call.built.dialog)

    def transfer_twiml(self, number: str) -> str:
        return transfer_twiml(self.ctx, self.call.built, self.stream.call_id, number)

    async def bot_ends(self) -> None:
        """The bot ends the call: said in the records before the stream closes, so that the <Connect>'s
        action answers <Hangup/> (or the hand-over's TwiML), never a resume."""
        ctx, session, call_sid = self.ctx, self.call.built, self.stream.call_id
        dialog, then = session.dialog, None
        number = self.transfer_number()
        if number:  # without the REST API (no credentials) the action carries the hand-over out
            then = build_dial_twiml(number) if self.stream.auto_hang_up else self.transfer_twiml(number)
        reason = ("emergency_transfer" if dialog.transfer_to else "transfer") if dialog.transfer_requested \
            else "completed" if dialog.ended else session.end_reason or "completed"
        try:
            await in_thread(RECORDS_SECS, end_segment, ctx.records.store, call_sid, self.stream.segment,
                            reason=reason, bot_ended=True, then_twiml=then)
        except Exception as e:  # noqa: BLE001 - the action then resumes the call: a sentence, not a lost caller
            logger.error("call {}: the bot's end not recorded ({}: {})", mask(call_sid), type(e).__name__,
                         str(e)[:120])


def transfer_target(config: Config, dialog: DialogState) -> str | None:
    """Where the call goes after its last words: an emergency service, the desk, or nowhere."""
    if not dialog.transfer_requested:
        return None
    return dialog.transfer_to or config.call.transfer_number or None


def transfer_twiml(ctx: AppContext, session: CallSession, call_sid: str, number: str) -> str:
    """The desk gets a warm transfer (the bot's summary first); an emergency service is dialled at once."""
    if session.dialog.transfer_to:
        return build_dial_twiml(number)
    if session.dialog.tickets:  # the desk's record: these tickets are now with a person
        ctx.records.hand_over(call_sid, list(session.dialog.tickets))
    if not ctx.config.call.transfer_whisper:
        return build_dial_twiml(number)
    ctx.records.transfer_note(call_sid, session.policy.transfer_summary(session.dialog))
    return build_dial_twiml(number, f"https://{ctx.config.server.public_host}/twilio/whisper?call={call_sid}")


async def _placed_callback(ctx: AppContext, call_sid: str) -> dict | None:
    """The callback this call was placed for, with its ticket (None: the database failed: the plain greeting)."""
    store = ctx.records.store

    def read() -> dict | None:
        cb = store.find_callback(call_sid=call_sid)
        if cb is not None and cb["reception_no"]:
            cb["ticket"] = store.find_ticket(cb["reception_no"])
        return cb
    try:
        return await in_thread(RECORDS_SECS, read)
    except Exception as e:  # noqa: BLE001 - slow or down: the caller still gets the bot
        logger.error("call {}: callback context not read ({}: {})", mask(call_sid), type(e).__name__, e)
        return None
