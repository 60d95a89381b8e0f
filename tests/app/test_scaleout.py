"""Two workers behind a real nginx, on a real PostgreSQL: stateless edges, a line limit, a worker killed.

`run_bot.py serve --workers 2` (two processes, each with its own Whisper base, VAD and stand-in TTS;
one STREAM_TOKEN_KEY made by the supervisor) behind nginx from Debian's package (round-robin,
WebSocket upgrade, nothing sticky), the records database on PostgreSQL, the fake vLLM.

1. Eight webhooks go through nginx (alternating workers), one request in between shifts the
   round-robin, then the eight media streams: every call's stream lands on the other worker than its
   webhook (checked in the database: the token's issuing worker against the calls table's worker),
   and the caller's number still reaches every call record. Four calls run on each worker.
2. The line limit (server.line_max_calls = 9): a ninth webhook is admitted (a reservation), a tenth
   hears the busy message in TwiML; the ninth's stream reaches a worker that is full
   (server.max_calls = 4), which plays the busy message over the stream and closes it.
3. Each of the eight callers says one turn and hears the answer. Then one worker is SIGKILLed: its
   four callers see the socket close; the other four say a second turn, hear it answered and hang
   up normally. Every turn said by either worker is in PostgreSQL; the supervisor restarts the killed
   worker, which marks its cut-off calls aborted.

Each utterance is one VAD segment, said after the answer to the one before it, so every utterance
is exactly one turn: how segments group into turns is decided by the audio, not by how fast a
loaded machine runs the turn-end timer (a two-segment clip could be one turn or two).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import httpx
import pytest

from bot.store.db import Store
from bot.testing.fake_llm import FakeLLM
from bot.testing.nginx import free_port_run, wait_workers_ready
from bot.testing.phone import FAST_VOICE
from bot.testing.process import BotProcess
from bot.testing.twilio_sim import (
    TwilioCallSimulator,
    new_sid,
    parse_twiml_stream,
    post_voice_webhook,
    voice_webhook_params,
)
from tests.conftest import FIXTURES, offline_bot_overrides

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

AUTH_TOKEN = "test-auth-token-scaleout"
ACCOUNT_SID = "AC" + "3" * 32
PUBLIC_HOST = "voice.example.org"
PUBLIC_URL = f"https://{PUBLIC_HOST}/twilio/voice"
CALLER = "+821055501234"
# One speech segment (en_hello.wav is two); the fixed-delay STT hears HELLO_TEXT in it.
SPOKEN = FIXTURES / "ko_majayo.wav"
HELLO_TEXT = "Hello, how are you today?"
N = 8


@pytest.fixture(scope="module")
def nginx_available():
    from bot.testing.nginx import nginx_binary

    if nginx_binary() is None:
        if os.environ.get("CI_REQUIRE_NGINX"):
            pytest.fail("nginx is not installed (CI_REQUIRE_NGINX=1)")
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")


async def webhook(base_url: str, call_sid: str):
    params = voice_webhook_params(call_sid, account_sid=ACCOUNT_SID)
    params["From"] = CALLER
    resp = await post_voice_webhook(base_url, PUBLIC_URL, params, AUTH_TOKEN)
    assert resp.status_code == 200, resp.text
    assert CALLER not in resp.text  # the caller's number stays in the database
    return resp.text


async def say_and_hear(call: TwilioCallSimulator) -> None:
    t = time.monotonic()
    await call.send_wav(SPOKEN)
    await call.wait_for_media(timeout=60, after=t)
    await call.wait_for_silence_from_bot(gap=0.8, timeout=60)


async def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


async def test_two_workers_behind_nginx_survive_a_killed_worker(
        tmp_path, whisper_dir, standin_tts_dir, postgres, nginx_available):
    from bot.testing.nginx import NginxProxy

    url = postgres.create_database(f"scale_{uuid.uuid4().hex[:10]}")
    base = free_port_run(2)
    ports = [base, base + 1]
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake_llm:
        overrides = [o for o in offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp_path)
                     if not o.startswith("records.url")]
        sup = BotProcess(
            [*overrides, f"records.url='{url}'", "records.worker='scale'", f"server.public_host='{PUBLIC_HOST}'",
             "server.max_calls=4", "server.line_max_calls=9", "stt.cpu_threads=1", "server.qa_page=false",
             "call.idle_prompt_secs=0", FAST_VOICE],  # callers wait in silence while the others speak
            # No STREAM_TOKEN_KEY: the supervisor makes one for both workers.
            env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": None, "STREAM_TOKEN_KEY": None},
            log_path=tmp_path / "workers.log",
            # The product's workers under its supervisor, with the fixed-delay STT (bot/testing/lab_server.py):
            # what is tested is the line, not how fast Whisper decodes on these cores.
            entry=("-m", "bot.testing.lab_server", "--workers", "2", "--stt-text", HELLO_TEXT, "--stt-delay-ms", "400"),
            port=base, admin_port=free_port_run(2),
        )
        store = Store(url)
        proxy = None
        try:
            health = await asyncio.to_thread(wait_workers_ready, sup, ports)
            names = {port: h["worker"] for port, h in health.items()}
            assert sorted(names.values()) == ["scale-0", "scale-1"]
            proxy = NginxProxy(ports).start()

            # 1. Eight webhooks through nginx, one request to shift the round-robin, eight streams.
            sids = [new_sid("CA") for _ in range(N)]
            twimls = [await webhook(proxy.base_url, sid) for sid in sids]
            # The one request that shifts the round-robin. Through the proxy only the public routes answer:
            # a bare /healthz (readiness and figures are the operations listener's).
            assert httpx.get(f"{proxy.base_url}/healthz", timeout=5).json() == {"status": "ok"}
            calls = [TwilioCallSimulator(proxy.ws_url, call_sid=sid, custom_parameters=parse_twiml_stream(x)[1],
                                         account_sid=ACCOUNT_SID) for sid, x in zip(sids, twimls)]
            for call in calls:
                await call.__aenter__()
            await wait_for(lambda: all(httpx.get(f"{h['admin_url']}/healthz", timeout=5).json()["active_calls"] == 4
                                       for h in health.values()), 30, "four calls on each worker")

            # 2. The line limit: a ninth call is admitted (9 of 9), a tenth hears the busy message.
            ninth = new_sid("CA")
            ninth_twiml = await webhook(proxy.base_url, ninth)
            tenth = await webhook(proxy.base_url, new_sid("CA"))
            assert "<Say" in tenth and "통화량이 많아" in tenth and "<Stream" not in tenth
            # The ninth's stream reaches a full worker: busy message over the stream, then the socket closes.
            busy_call = TwilioCallSimulator(proxy.ws_url, call_sid=ninth,
                                            custom_parameters=parse_twiml_stream(ninth_twiml)[1], account_sid=ACCOUNT_SID)
            async with busy_call:
                await busy_call.wait_for_media(timeout=30)
                assert await busy_call.wait_closed(timeout=30) == 1000
            assert busy_call.media_seconds > 1.0

            # 3. One spoken turn each, all eight at once, on both workers.
            await asyncio.gather(*(c.wait_for_media(timeout=60) for c in calls))
            await asyncio.gather(*(c.wait_for_silence_from_bot(gap=0.6, timeout=60) for c in calls))
            await asyncio.gather(*(say_and_hear(c) for c in calls))

            rows = {c["call_sid"]: c for c in store.list_calls()}
            tokens = await asyncio.to_thread(_token_rows, store)
            assert set(sids) <= set(rows)
            for sid in sids:
                assert rows[sid]["worker"] in names.values() and rows[sid]["caller"] == CALLER
                assert tokens[sid]["issued_by"] != rows[sid]["worker"], "webhook and stream on the same worker"
                assert tokens[sid]["used_by"] == rows[sid]["worker"]
            assert sorted(rows[s]["worker"] for s in sids) == ["scale-0"] * 4 + ["scale-1"] * 4
            assert "scale-0, call runs on worker scale-1" in sup.log()
            assert "scale-1, call runs on worker scale-0" in sup.log()

            # Kill worker scale-1 mid-call.
            victim_port = next(p for p, n in names.items() if n == "scale-1")
            victim_pid = health[victim_port]["pid"]
            os.kill(victim_pid, signal.SIGKILL)
            victims = [c for c in calls if rows[c.call_sid]["worker"] == "scale-1"]
            survivors = [c for c in calls if rows[c.call_sid]["worker"] == "scale-0"]
            await asyncio.gather(*(c.wait_closed(timeout=15) for c in victims))
            assert all(c.closed for c in victims)
            await asyncio.gather(*(say_and_hear(c) for c in survivors))
            assert not any(c.closed for c in survivors)
            for c in survivors:
                await c.stop()
            for c in calls:
                await c.__aexit__(None, None, None)

            def said(sid):
                row = next(r for r in store.list_calls() if r["call_sid"] == sid)
                # Turns the bot answered (under this load a VAD segment the STT rejects can leave a
                # silent 'no_reply' turn of its own: nothing was said in it).
                return row, [t for t in row["turns"] if t.get("route") != "greeting" and t.get("reply")]

            def survivors_done():
                return all(said(c.call_sid)[0]["ended_at"] for c in survivors)

            await wait_for(survivors_done, 30, "the surviving calls' records")
            # One answered turn per utterance: the survivors said two, the killed worker's callers one,
            # before the kill, and those turns were kept.
            for c in victims:
                assert _transcripts(said(c.call_sid)[1]) == [HELLO_TEXT], _brief(said(c.call_sid)[1])
            for c in survivors:
                row, turns = said(c.call_sid)
                assert row["end_reason"] == "caller_hangup"
                assert _transcripts(turns) == [HELLO_TEXT] * 2, _brief(turns)

            # The supervisor restarts the killed worker; it marks its cut-off calls aborted.
            def victims_aborted():
                return all(said(c.call_sid)[0]["end_reason"] == "aborted" for c in victims)

            await wait_for(victims_aborted, 120, "the restarted worker to mark its calls aborted")
            assert "scale-1 (pid" in sup.log() and "restarting it" in sup.log()
            # nginx saw webhooks and media streams go to both workers.
            assert httpx.get(f"{proxy.base_url}/readyz", timeout=5).status_code == 404
            log = proxy.access_log()
            for uri in ("/twilio/voice", "/twilio/media"):
                assert {r["upstream"] for r in log if r["uri"] == uri} >= {f"127.0.0.1:{p}" for p in ports}, log
        finally:
            if proxy is not None:
                proxy.stop()
            sup.stop()
            store.close()
        assert sup.proc.returncode == 0, sup.log()[-3000:]


def _token_rows(store: Store) -> dict[str, dict]:
    import sqlalchemy as sa

    from bot.store.schema import stream_tokens

    with store.engine.connect() as conn:
        return {r["call_sid"]: dict(r) for r in conn.execute(sa.select(stream_tokens)).mappings()}


def _transcripts(turns: list[dict]) -> list[str]:
    """What the caller said in each answered turn (every one is the model's)."""
    assert all(t["route"] == "llm" and t["reply"] for t in turns), _brief(turns)
    return [t["transcript"] for t in turns]


def _brief(turns: list[dict]) -> list[tuple]:
    return [(t.get("index"), t.get("route"), t.get("transcript"), (t.get("reply") or "")[:30], t.get("speech_end"))
            for t in turns]
