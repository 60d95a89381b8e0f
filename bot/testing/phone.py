"""A bot process and a phone call to it, for the whole-process tests: one place for both.

    line = PhoneLine(auth_token="test-token", account_sid="AC" + "1" * 32)
    with phone_bot(line, offline_bot_overrides(whisper_dir, standin_tts_dir, llm.base_url, tmp),
                   log_path=tmp / "bot.log") as bot:
        async with await open_call(bot, line, caller="+821012345678") as call:
            await call.wait_for_media(timeout=15)

``PhoneLine`` is what Twilio and the bot share (the account, its auth token, the public host the webhook is
signed for); ``offline_bot_overrides`` puts a bot on the offline models (Whisper base from PyPI, the stand-in
voice) and a fake LLM; ``phone_bot`` starts it and stops it; ``open_call`` places a call the way Twilio does: a
signed voice webhook, then the stream its TwiML names (the simulator, not yet connected).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.testing.process import BotProcess
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)


@dataclass(frozen=True)
class PhoneLine:
    """The Twilio account a test's bot serves, and the public host its webhooks are signed for."""

    auth_token: str
    account_sid: str
    public_host: str = "voice.example.org"

    @property
    def webhook_url(self) -> str:
        return f"https://{self.public_host}/twilio/voice"

    @property
    def stream_url(self) -> str:
        return f"wss://{self.public_host}/twilio/media"

    def env(self) -> dict[str, str | None]:
        return {"TWILIO_AUTH_TOKEN": self.auth_token, "TWILIO_ACCOUNT_SID": self.account_sid}


# The stand-in voice at the product's fastest speed (tts.speed's top, 2.0): a caller waits out every reply in
# real time. For the tests whose bounds do not scale with a reply's length (never a barge-in over a reply, an
# idle prompt held back over a long one, or a backchannel's timing).
FAST_VOICE = "tts.speed=2.0"


def offline_bot_overrides(whisper_dir: Path, standin_tts_dir: Path, llm_url: str, records_dir: Path) -> list[str]:
    """``--set`` items for a bot on the offline models and a fake LLM.

    STT runs in English: Whisper base cannot read espeak's Korean reliably, and the end-to-end
    tests are about the call path, not Korean recognition.
    """
    return [
        f"stt.model='{whisper_dir}'",
        "stt.language='en'",
        "stt.hotwords=''",
        f"tts.model_dir='{standin_tts_dir}'",
        "tts.warmup_lengths=[5]",
        f"llm.base_url='{llm_url}'",
        f"records.url='sqlite:///{records_dir / 'calls.db'}'",
    ]


def start_phone_bot(line: PhoneLine, overrides: list[str], *, log_path: Path,
                    env: dict[str, str | None] | None = None, entry: tuple[str, ...] | None = None) -> BotProcess:
    """A bot process serving ``line``, ready for calls (the caller stops it). ``env`` goes on top of the
    line's (None removes a variable); ``entry``: e.g. ``("-m", "bot.testing.lab_server", ...)``."""
    bot = BotProcess([*overrides, f"server.public_host='{line.public_host}'"], env={**line.env(), **(env or {})},
                     log_path=log_path, entry=entry)
    try:
        bot.wait_ready()
    except BaseException:
        bot.stop()
        raise
    return bot


@contextmanager
def phone_bot(line: PhoneLine, overrides: list[str], *, log_path: Path, env: dict[str, str | None] | None = None,
              entry: tuple[str, ...] | None = None) -> Iterator[BotProcess]:
    """``start_phone_bot`` for a ``with`` block (a module fixture's body): stopped when it ends."""
    bot = start_phone_bot(line, overrides, log_path=log_path, env=env, entry=entry)
    try:
        yield bot
    finally:
        bot.stop()


async def open_call(bot: BotProcess, line: PhoneLine, *, caller: str | None = None, said: list[str] | None = None,
                    **sim_kwargs: Any) -> TwilioCallSimulator:
    """A call as Twilio places it: the signed voice webhook (``caller`` as its ``From``), then a simulator for
    the stream its TwiML names. ``said``: the caller's words, one per speech segment, for the lab server's
    scripted STT (``bot.testing.lab_server``). The TwiML must point at the line's stream URL and must not carry
    the caller's number (it stays on the server)."""
    call_sid = new_sid("CA")
    params = voice_webhook_params(call_sid, account_sid=line.account_sid)
    if caller is not None:
        params["From"] = caller
    resp = await post_voice_webhook(bot.base_url, line.webhook_url, params, line.auth_token)
    if resp.status_code != 200:
        raise AssertionError(f"voice webhook answered {resp.status_code}: {resp.text}")
    url, stream_params = parse_twiml_stream(resp.text)
    if url != line.stream_url or (caller is not None and caller in resp.text):
        raise AssertionError(f"the TwiML names {url}, not {line.stream_url}, or carries the caller's number")
    if said:
        stream_params["stt_script"] = json.dumps(said, ensure_ascii=False)
    return TwilioCallSimulator(bot.ws_url, call_sid=call_sid, custom_parameters=stream_params,
                               account_sid=line.account_sid, **sim_kwargs)
