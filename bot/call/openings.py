"""How a call opens: the greeting, or a booked callback's opening."""

from __future__ import annotations

from pipecat.frames.frames import EndFrame, Frame, TTSSpeakFrame

from bot.call.session import CallSession
from bot.dialog.policy import Change
from bot.stages.language_heard import told_language
from bot.telemetry.turn_facts import TurnOpenedFrame


async def speak_greeting(session: CallSession, greeting: str, notice: str = "") -> None:
    """The bot speaks first, straight to TTS (no LLM); the greeting becomes the first assistant message.
    Then, once: that an AI answers (``call.ai_notice``), the recording notice (``call.recording_notice``)
    and a holiday's name."""
    policy = session.policy
    notes = policy.greeting_notes(notice)
    # "For English, press 9." last, where a caller expects a menu
    notes += tuple(line for _language, _switched, line in policy.menu.values())
    session.dialog.last_reply = " ".join((greeting, *notes))
    # Startup refuses a line whose greeting and notice do not say an AI answers (bot/config.py).
    opened = TurnOpenedFrame(line_open=policy.line_open(), ai_notice=True)
    await session.worker.queue_frames([opened, TTSSpeakFrame(greeting), *(TTSSpeakFrame(n) for n in notes)])


async def speak_callback_opening(session: CallSession, number: str | None, ticket: dict | None) -> None:
    """A booked callback answered by a person: instead of the greeting, why we call, the ticket's
    status and (a person available) the transfer, which ends the bot's part once it is heard."""
    policy = session.policy
    frames: list[Frame] = []
    language = ticket.get("language") if ticket else None
    if language in policy.siblings and language != session.dialog.language:
        # The language the ticket was taken in: a change like the keypad menu's, told to STT and TTS.
        Change(remember_reply=False, language=language).apply(session.dialog, "")
        frames += told_language(session.dialog.language)
    answer = policy.for_language(session.dialog.language).callback_answered(number, ticket)
    answer.change.apply(session.dialog, answer.reply)
    # The desk reads what the called-back person heard.
    frames.append(TurnOpenedFrame(line_open=policy.line_open(), reply=answer.reply))
    frames += [TTSSpeakFrame(s) for s in answer.sentences]
    if answer.change.transfer:
        frames.append(EndFrame(reason="transfer"))  # the serializer hands the call to the desk (warm)
    await session.worker.queue_frames(frames)


async def speak_resumed(session: CallSession, emergency: str | None = None, *, sentence: bool = True) -> None:
    """A call resumed on this worker after its stream ended (issue 46): an emergency already told is
    told again first (its number), then one short sentence in the caller's language (``sentence``); the
    call goes on."""
    policy = session.policy
    said = [*([emergency] if emergency else []),
            *([policy.for_language(session.dialog.language).canned.resumed] if sentence else [])]
    opened = TurnOpenedFrame(line_open=policy.line_open(), route="resumed", said=bool(said),
                             reply=" ".join(said) if said else None)
    await session.worker.queue_frames([opened, *(TTSSpeakFrame(s) for s in said)])
