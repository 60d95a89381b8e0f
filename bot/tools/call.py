"""``run_bot.py call``: place a simulated phone call on a running server, as Twilio would.

    run_bot.py call --url http://127.0.0.1:8765 say:"가로등이 꺼졌어요" say:"중앙로 12번길이요" keys:1
    run_bot.py call keys:20260001#                       # status by reception number

Each step is ``say:TEXT`` (spoken with espeak-ng, Korean voice), ``wav:FILE``, ``keys:DIGITS``
(phone-pad presses: Twilio ``dtmf`` events) or ``wait:SECONDS``. The webhook is signed with
``TWILIO_AUTH_TOKEN`` for ``https://{server.public_host}/twilio/voice``, the media stream is
μ-law 8 kHz in real time, and after the hang-up the call's turns are printed from the server's
records: what the bot heard and what it said.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bot.config import Config
from bot.core.bearer import bearer_header
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)
from bot.tools.table import clean


class CallError(RuntimeError):
    pass


def _espeak(text: str, out: Path) -> Path:
    if not shutil.which("espeak-ng"):
        raise CallError("say: needs espeak-ng (Debian: apt-get install espeak-ng); or use wav:FILE")
    subprocess.run(["espeak-ng", "-v", "ko", "-s", "140", "-w", str(out), text], check=True)
    return out


async def place_call(config: Config, url: str, steps: list[str], caller: str, auth_token: str | None,
                     out=sys.stdout, records_token: str | None = None) -> int:
    base = url.rstrip("/")
    ws_url = base.replace("http://", "ws://").replace("https://", "wss://") + "/twilio/media"
    call_sid = new_sid("CA")
    params = voice_webhook_params(call_sid)
    params["From"] = caller
    resp = await post_voice_webhook(base, f"https://{config.server.public_host}/twilio/voice", params, auth_token)
    if resp.status_code != 200:
        raise CallError(f"webhook answered {resp.status_code}: {resp.text[:200]} (TWILIO_AUTH_TOKEN and "
                        f"server.public_host must match the server's)")
    if "<Reject" in resp.text:
        raise CallError("the line is busy (server.max_calls)")
    _, stream_params = parse_twiml_stream(resp.text)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        call = TwilioCallSimulator(ws_url, call_sid=call_sid, custom_parameters=stream_params)
        async with call:
            await call.wait_for_media(timeout=30)
            await call.wait_for_silence_from_bot(gap=0.8, timeout=60)
            out.write(f"call {call_sid}: connected, greeting heard\n")
            for i, step in enumerate(steps):
                kind, _, arg = step.partition(":")
                t = time.monotonic()
                if kind == "say":
                    await call.send_wav(_espeak(arg, Path(tmp) / f"{i}.wav"))
                elif kind == "wav":
                    await call.send_wav(arg)
                elif kind == "keys":
                    for key in arg:
                        await call.send_dtmf(key)
                elif kind == "wait":
                    await asyncio.sleep(float(arg))
                    continue
                else:
                    raise CallError(f"unknown step {step!r} (say:TEXT, wav:FILE, keys:DIGITS, wait:SECONDS)")
                try:
                    await call.wait_for_media(timeout=30, after=t)
                    await call.wait_for_silence_from_bot(gap=0.8, timeout=60)
                except TimeoutError:
                    out.write(f"step {step!r}: no answer within 30 s\n")
                if call.closed:
                    out.write("the bot ended the call\n")
                    break
    if not records_token:
        out.write("(the call's turns: set env RECORDS_API_TOKEN, here and on the server, to print them)\n")
        return 0
    await _print_turns(base, call_sid, started, out, records_token)
    return 0


async def _print_turns(base: str, call_sid: str, since: float, out, records_token: str) -> None:
    headers = bearer_header(records_token)
    turns: list[dict] = []
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(40):  # the records land when the call's pipeline has finished
            resp = await client.get(f"{base}/api/turns", params={"since": since}, headers=headers)
            if resp.status_code in (401, 404):
                out.write(f"(the server's /api/turns answered {resp.status_code}: is its RECORDS_API_TOKEN this one?)\n")
                return
            turns = [t for t in resp.json()["turns"] if t.get("call_id") == call_sid]
            if turns:
                break
            await asyncio.sleep(0.25)
    for t in sorted(turns, key=lambda t: t["index"]):
        # A server's words, printed to a terminal: no escape sequence gets through (bot/tools/table.py).
        if t.get("transcript"):
            out.write(f"  caller: {clean(t['transcript'])}\n")
        if t.get("reply"):
            v2v = (t.get("stages_ms") or {}).get("voice_to_voice")
            extra = f"  ({clean(t['route'])}, {clean(t['llm_calls'])} LLM call(s)" + (f", {v2v:.0f} ms" if v2v else "") + ")"
            out.write(f"  bot:    {clean(t['reply'])}{extra if t['route'] != 'greeting' else ''}\n")


def run_call(config: Config, args) -> int:
    url = args.url or f"http://127.0.0.1:{config.server.port}"
    try:
        from bot.tools.bench import records_token

        return asyncio.run(place_call(config, url, args.steps, args.caller, os.environ.get("TWILIO_AUTH_TOKEN"),
                                      records_token=records_token(args)))
    except (CallError, httpx.HTTPError, OSError) as e:
        print(f"call error: {e}", file=sys.stderr)
        return 1
