"""How a call opens: the greeting, or a booked callback's opening."""

from __future__ import annotations

from pipecat.frames.frames import EndFrame, Frame, TTSSpeakFrame

from bot.call.session import CallSession
from bot.dialog.policy import DialogPolicy


def _policy(session: CallSession) -> DialogPolicy:
    # assemble_session always sets it (the dialog stage's, or the stock baseline's own).
    assert session.policy is not None, "a call session without the line's policy"
    return session.policy


async def speak_greeting(session: CallSession, greeting: str, notice: str = "") -> None:
    """The bot speaks first, straight to TTS (no LLM); the greeting becomes the first assistant message.
    Then, once: that an AI answers (``call.ai_notice``), the recording notice (``call.recording_notice``)
    and a holiday's name."""
    policy = _policy(session)
    notes = policy.greeting_notes(notice)
    # "For English, press 9." last, where a caller expects a menu
    notes += tuple(line for _language, _switched, line in policy.menu.values())
    session.dialog.last_reply = " ".join((greeting, *notes))
    session.recorder.current.mark("first_sentence")
    session.recorder.current.line_open = policy.line_open()
    # Startup refuses a line whose greeting and notice do not say an AI answers (bot/config.py).
    session.recorder.current.ai_notice = True
    await session.worker.queue_frames([TTSSpeakFrame(greeting), *(TTSSpeakFrame(n) for n in notes)])


async def speak_callback_opening(session: CallSession, number: str | None, ticket: dict | None) -> None:
    """A booked callback answered by a person: instead of the greeting, why we call, the ticket's
    status and (a person available) the transfer, which ends the bot's part once it is heard."""
    policy = _policy(session)
    if ticket and ticket.get("language") in policy.siblings:
        session.dialog.set_language(ticket["language"])  # the language the ticket was taken in
    answer = policy.for_language(session.dialog.language).callback_answered(number, ticket)
    answer.change.apply(session.dialog, answer.reply)
    session.recorder.current.mark("first_sentence")
    session.recorder.current.line_open = policy.line_open()
    session.recorder.current.reply = answer.reply  # the desk reads what the called-back person heard
    frames: list[Frame] = [TTSSpeakFrame(s) for s in answer.sentences]
    if answer.change.transfer:
        frames.append(EndFrame(reason="transfer"))  # the serializer hands the call to the desk (warm)
    await session.worker.queue_frames(frames)


async def speak_resumed(session: CallSession, emergency: str | None = None, *, sentence: bool = True) -> None:
    """A call resumed on this worker after its stream ended (issue 46): an emergency already told is
    told again first (its number), then one short sentence in the caller's language (``sentence``); the
    call goes on."""
    policy = _policy(session)
    said = [*([emergency] if emergency else []),
            *([policy.for_language(session.dialog.language).canned.resumed] if sentence else [])]
    session.recorder.current.route = "resumed"
    session.recorder.current.line_open = policy.line_open()
    if not said:
        return
    session.recorder.current.mark("first_sentence")
    session.recorder.current.reply = " ".join(said)
    await session.worker.queue_frames([TTSSpeakFrame(s) for s in said])
