"""Tests for the Twilio Media Streams call simulator against an in-test WebSocket server."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import wave
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
import numpy as np
import pytest
from twilio.request_validator import RequestValidator
from websockets.asyncio.server import ServerConnection, serve

from bot.testing.twilio_sim import (
    FRAME_BYTES,
    CallClosed,
    TwilioCall,
    TwilioCallSimulator,
    parse_twiml_stream,
    post_voice_webhook,
    rms,
    sign_twilio_request,
)

AUTH_TOKEN = "12345678901234567890123456789012"


def tone(secs: float, rate: int, freq: float = 440.0, amp: float = 8000.0) -> bytes:
    """A sine tone as PCM16 mono."""
    t = np.arange(round(secs * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype("<i2").tobytes()


class FakeTwilioServer:
    """Minimal bot side of a Media Stream, scripted by the caller's DTMF digits.

    Checks that the first two messages are ``connected`` and ``start``; echoes caller
    media back as server ``media`` (when ``echo``); digit ``1`` sends mark ``m1``,
    ``2`` sends 2 s of tone then mark ``m2``, ``3`` sends ``clear``, ``9`` closes the
    socket (code 1000). ``stop`` closes the socket unless ``close_on_stop`` is False.
    """

    def __init__(self, *, echo: bool = True, close_on_stop: bool = True) -> None:
        self.echo = echo
        self.close_on_stop = close_on_stop
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self.errors: list[str] = []
        self.port = 0
        self.headers: dict[str, str] = {}

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.errors.append(what)

    async def handler(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.headers = dict(ws.request.headers)
        first = json.loads(await ws.recv())
        self.messages.append((time.monotonic(), first))
        self.check(
            first == {"event": "connected", "protocol": "Call", "version": "1.0.0"},
            f"bad connected: {first}",
        )
        start = json.loads(await ws.recv())
        self.messages.append((time.monotonic(), start))
        self.check(start.get("event") == "start", f"second message not start: {start}")
        self.check(start.get("sequenceNumber") == "1", "start sequenceNumber != '1'")
        body = start.get("start", {})
        sid = start.get("streamSid")
        self.check(bool(sid) and body.get("streamSid") == sid, "streamSid mismatch in start")
        for key in ("accountSid", "callSid", "tracks", "mediaFormat", "customParameters"):
            self.check(key in body, f"start.{key} missing")
        self.check(body.get("tracks") == ["inbound"], "tracks != ['inbound']")
        async for raw in ws:
            msg = json.loads(raw)
            self.messages.append((time.monotonic(), msg))
            event = msg.get("event")
            self.check(msg.get("streamSid") == sid, f"{event}: wrong streamSid")
            if event == "media" and self.echo:
                await self.send(ws, sid, "media", media={"payload": msg["media"]["payload"]})
            elif event == "dtmf":
                digit = msg["dtmf"]["digit"]
                if digit == "1":
                    await self.send(ws, sid, "mark", mark={"name": "m1"})
                elif digit == "2":
                    ulaw = bytes([0x20]) * 16000  # 2 s of loud μ-law, sent at once
                    payload = base64.b64encode(ulaw).decode()
                    await self.send(ws, sid, "media", media={"payload": payload})
                    await self.send(ws, sid, "mark", mark={"name": "m2"})
                elif digit == "3":
                    await self.send(ws, sid, "clear")
                elif digit == "9":
                    await ws.close(1000, "bot hung up")
                    return
            elif event == "stop":
                want = {"accountSid": body["accountSid"], "callSid": body["callSid"]}
                self.check(msg.get("stop") == want, f"bad stop: {msg}")
                if self.close_on_stop:
                    await ws.close(1000, "stream stopped")
                    return

    async def send(self, ws: ServerConnection, sid: str, event: str, **body: Any) -> None:
        await ws.send(json.dumps({"event": event, "streamSid": sid, **body}))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [m for _, m in self.messages if m.get("event") == name]


async def start_server(fake: FakeTwilioServer):
    server = await serve(fake.handler, "127.0.0.1", 0, compression=None)
    fake.port = server.sockets[0].getsockname()[1]
    return server


@pytest.fixture
async def fake():
    fake = FakeTwilioServer()
    server = await start_server(fake)
    try:
        yield fake
    finally:
        server.close()
        await server.wait_closed()


def url(fake: FakeTwilioServer) -> str:
    return f"ws://127.0.0.1:{fake.port}/twilio/ws"


async def test_handshake_pacing_fields_and_echo(fake: FakeTwilioServer) -> None:
    async with TwilioCallSimulator(
        url(fake),
        "CA" + "1" * 32,
        custom_parameters={"token": "abc"},
        continuous=False,
    ) as call:
        pcm = tone(1.0, 16000)
        t0 = time.monotonic()
        await call.send_audio(pcm, 16000)
        elapsed = time.monotonic() - t0
        assert 0.95 <= elapsed <= 1.35, elapsed
        assert call.frames_sent == 50
        await call.wait_for_media(timeout=2)
        ended = await call.wait_for_silence_from_bot(gap=0.3, timeout=5)
        assert ended >= call.playback_end - 0.01
        assert await call.stop(timeout=2) is True
        assert call.closed and call.close_code == 1000
        assert call.close_reason == "stream stopped"
        assert call.protocol_errors == []

    assert fake.errors == []
    start = fake.messages[1][1]
    assert start["start"]["customParameters"] == {"token": "abc"}
    assert start["start"]["callSid"] == "CA" + "1" * 32
    assert start["start"]["mediaFormat"] == {
        "encoding": "audio/x-mulaw",
        "sampleRate": 8000,
        "channels": 1,
    }
    assert start["streamSid"].startswith("MZ") and len(start["streamSid"]) == 34
    # Every message after connected numbered "1", "2", ... in order.
    seqs = [int(m["sequenceNumber"]) for _, m in fake.messages[1:]]
    assert seqs == list(range(1, len(seqs) + 1))
    media = fake.events("media")
    assert len(media) == 50
    assert [m["media"]["chunk"] for m in media] == [str(i) for i in range(1, 51)]
    stamps = [int(m["media"]["timestamp"]) for m in media]
    assert all(b - a == 20 for a, b in zip(stamps, stamps[1:])), stamps
    assert stamps[0] < 100
    assert all(m["media"]["track"] == "inbound" for m in media)
    assert all(len(base64.b64decode(m["media"]["payload"])) == FRAME_BYTES for m in media)
    # Frames go out every 20 ms on the server's clock too.
    arrivals = [t for t, m in fake.messages if m.get("event") == "media"]
    assert 0.85 <= arrivals[-1] - arrivals[0] <= 1.2
    assert fake.events("stop")[0]["sequenceNumber"] == str(seqs[-1])

    # μ-law round trip (16 kHz -> 8 kHz μ-law -> echoed -> PCM16 8 kHz) keeps the signal.
    got = call.media_audio()
    assert len(got) == 8000 * 2 and call.media_seconds == pytest.approx(1.0)
    want = rms(pcm)
    assert abs(rms(got) - want) / want < 0.2
    assert rms(bytes(1000)) == 0.0 and rms(b"") == 0.0


async def test_continuous_line_sends_silence_and_keeps_timestamps(fake: FakeTwilioServer) -> None:
    async with TwilioCallSimulator(url(fake), "CA" + "2" * 32) as call:
        assert call.call_sid == "CA" + "2" * 32
        await asyncio.sleep(0.3)  # nothing queued: the line still sends silence
        # The server echoes that silence: media, but not audible bot audio.
        t_silent = await call.wait_for_media(timeout=1, audible=False)
        t_tone = time.monotonic()
        await call.send_audio(tone(0.2, 8000), 8000)
        await call.send_silence(0.1)
        t_loud = await call.wait_for_media(timeout=1, after=t_tone)
        assert t_silent < t_tone < t_loud
        assert rms(call.media_audio(after=t_loud - 1e-9, before=t_loud)) > 1000
        assert call.audible_media_times == [t for t in call.media_times if t >= t_loud][:10]
        ended = await call.wait_for_silence_from_bot(gap=0.2, timeout=3)
        # Ends when the last loud frame has played (arrival + 20 ms + playback backlog).
        assert 0.019 <= ended - call.audible_media_times[-1] <= 0.25
        assert call.media_times[-1] > ended + 0.15  # silent echoes kept coming
        with pytest.raises(TimeoutError):
            await call.wait_for_silence_from_bot(gap=0.2, timeout=0.3, audible=False)
        await call.stop()
    media = fake.events("media")
    assert len(media) >= 12 + 10 + 5
    assert base64.b64decode(media[0]["media"]["payload"]) == b"\xff" * FRAME_BYTES
    stamps = [int(m["media"]["timestamp"]) for m in media]
    assert stamps == [20 * i for i in range(len(stamps))]
    assert [int(m["media"]["chunk"]) for m in media] == list(range(1, len(media) + 1))
    loud = [m for m in media if base64.b64decode(m["media"]["payload"]) != b"\xff" * FRAME_BYTES]
    assert len(loud) == 10
    assert fake.errors == []


async def test_a_starved_line_records_its_stall_and_the_turn_it_fell_on(fake: FakeTwilioServer) -> None:
    from bot.tools.bench.caller import CallerTurn, CallResult, _Clock, _note_send_lag

    clock = _Clock()
    async with TwilioCallSimulator(url(fake), "CA" + "7" * 32) as call:
        await asyncio.sleep(0.2)
        blocked = time.monotonic()
        time.sleep(0.4)  # noqa: ASYNC251 - the machine starves the caller's process: the line falls behind
        await asyncio.sleep(0.3)
        await call.stop()
    stalls = call.send_stalls(min_lag=0.2)
    assert len(stalls) == 1, call.send_stalls()
    at, lag = stalls[0]
    assert 0.35 <= lag <= 0.6 and call.max_send_lag == pytest.approx(lag)
    assert abs(call.started_at + at - blocked) < 0.05  # the first frame due while the loop was blocked
    # The bench notes it on the call and on the turn whose speech the stall overlapped, not on the other.
    result = CallResult(call.call_sid, ["a", "b"])
    w = clock.wall
    result.turns = [CallerTurn(call.call_sid, 1, "a", "a", "llm", "a.wav", speech_start=w(blocked - 0.1),
                               speech_end=w(blocked + 0.1)),
                    CallerTurn(call.call_sid, 2, "b", "b", "llm", "b.wav", speech_start=w(blocked + 1.0),
                               speech_end=w(blocked + 2.0))]
    _note_send_lag(result, call, clock)
    assert result.max_send_lag_ms == pytest.approx(lag * 1000, abs=0.1)
    assert result.turns[0].send_lag_ms == pytest.approx(lag * 1000, abs=0.1) and result.turns[1].send_lag_ms == 0.0
    assert [v for _, v in result.send_stalls if v > 200] == [pytest.approx(lag * 1000, abs=0.1)]


async def test_marks_echo_after_playback_and_on_clear(fake: FakeTwilioServer) -> None:
    async with TwilioCallSimulator(url(fake), continuous=False) as call:
        # Echoed 0.4 s tone then mark m1: m1 returns when the echo has played.
        await call.send_audio(tone(0.4, 8000), 8000)
        await call.send_dtmf("1")
        t_mark, _ = await call.wait_for_event("mark", timeout=2)
        await asyncio.sleep(0)  # let the echo be scheduled
        play_end = call.playback_end
        assert play_end > t_mark
        done = time.monotonic() + 2
        while not call.echoed_marks and time.monotonic() < done:
            await asyncio.sleep(0.02)
        assert [n for _, n in call.echoed_marks] == ["m1"]
        assert call.echoed_marks[0][0] >= play_end - 0.005

        # 2 s of audio at once, mark m2, then clear: m2 comes back at the clear.
        t_before = time.monotonic()
        await call.send_dtmf("2")
        await call.wait_for_event("mark", timeout=2, after=t_mark)
        assert call.playback_end - time.monotonic() > 1.5
        await call.send_dtmf("3")
        t_clear, _ = await call.wait_for_event("clear", timeout=2)
        assert call.clears == [t_clear]
        await asyncio.sleep(0.05)
        assert [n for _, n in call.echoed_marks] == ["m1", "m2"]
        assert call.echoed_marks[1][0] - t_before < 0.5
        assert call.playback_end <= time.monotonic()
        assert [n for _, n in call.marks] == ["m1", "m2"]
        await call.stop()
    marks = fake.events("mark")
    assert [m["mark"]["name"] for m in marks] == ["m1", "m2"]
    dtmf = fake.events("dtmf")
    assert dtmf[0]["dtmf"] == {"track": "inbound_track", "digit": "1"}
    assert fake.errors == []


async def test_server_hangup_and_stop_timeout(fake: FakeTwilioServer) -> None:
    async with TwilioCallSimulator(url(fake)) as call:
        await call.send_dtmf("9")
        assert await call.wait_closed(timeout=2) == 1000
        assert call.close_reason == "bot hung up"
        with pytest.raises(CallClosed):
            await call.send_audio(tone(0.1, 8000), 8000)
        with pytest.raises(CallClosed):
            await call.wait_for_media(timeout=1)
        assert await call.wait_for_silence_from_bot(timeout=1) <= time.monotonic()

    fake.close_on_stop = False
    async with TwilioCallSimulator(url(fake)) as call:
        with pytest.raises(TimeoutError):
            await call.wait_for_event("clear", timeout=0.1)
        t0 = time.monotonic()
        assert await call.stop(timeout=0.3) is False  # server ignored stop
        assert 0.25 <= time.monotonic() - t0 < 2.5
        assert call.closed
        with pytest.raises(CallClosed):
            await call.send_dtmf("1")
    # The continuous line went quiet at the stop: nothing follows it.
    assert fake.messages[-1][1]["event"] == "stop"
    assert len(fake.events("media")) >= 3


async def test_concurrent_calls_and_wav(fake: FakeTwilioServer, tmp_path: Path) -> None:
    wav_path = tmp_path / "hello.wav"
    with wave.open(str(wav_path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(tone(0.5, 16000))

    async def one(i: int) -> float:
        async with TwilioCallSimulator(url(fake), custom_parameters={"i": str(i)}) as call:
            t0 = time.monotonic()
            assert await call.send_wav(wav_path) == pytest.approx(0.5)
            assert await call.wait_for_media(timeout=2, after=t0) > t0
            await call.stop()
            assert call.protocol_errors == []
            return call.media_seconds

    t0 = time.monotonic()
    heard = await asyncio.gather(*(one(i) for i in range(4)))
    assert time.monotonic() - t0 < 2.0
    assert all(s >= 0.5 for s in heard)
    starts = [m for m in fake.events("start")]
    assert sorted(m["start"]["customParameters"]["i"] for m in starts) == ["0", "1", "2", "3"]
    assert len({m["streamSid"] for m in starts}) == 4
    assert fake.errors == []


async def test_handshake_signature_header(fake: FakeTwilioServer) -> None:
    async with TwilioCallSimulator(url(fake), auth_token=AUTH_TOKEN, continuous=False):
        pass
    assert RequestValidator(AUTH_TOKEN).validate(url(fake), {}, fake.headers["x-twilio-signature"])


def test_sign_twilio_request_validates() -> None:
    params = {"CallSid": "CA" + "a" * 32, "From": "+821012345678", "To": "+827012345678"}
    public = "https://public.example/twilio/voice"
    sig = sign_twilio_request(public, params, AUTH_TOKEN)
    validator = RequestValidator(AUTH_TOKEN)
    assert validator.validate(public, params, sig)
    assert not validator.validate(public, {**params, "From": "+1"}, sig)
    assert not RequestValidator("x" * 32).validate(public, params, sig)


async def test_post_voice_webhook_signs_public_url() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="<Response/>")

    public = "https://public.example/twilio/voice"
    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        resp = await post_voice_webhook(
            "http://127.0.0.1:9999",
            public,
            {"CallSid": "CA" + "b" * 32, "From": "+821099998888"},
            AUTH_TOKEN,
            client=client,
        )
        assert resp.status_code == 200
        unsigned = await post_voice_webhook("http://127.0.0.1:9999/", None, None, client=client)
        assert unsigned.status_code == 200
    req = seen[0]
    assert str(req.url) == "http://127.0.0.1:9999/twilio/voice" and req.method == "POST"
    form = dict(parse_qsl(req.content.decode()))
    assert form["CallSid"] == "CA" + "b" * 32 and form["From"] == "+821099998888"
    for key in ("AccountSid", "To", "CallStatus", "Direction"):
        assert key in form
    assert RequestValidator(AUTH_TOKEN).validate(public, form, req.headers["X-Twilio-Signature"])
    assert "X-Twilio-Signature" not in seen[1].headers
    assert dict(parse_qsl(seen[1].content.decode()))["CallSid"].startswith("CA")


def test_parse_twiml_stream() -> None:
    twiml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Response><Connect>"
        '<Stream url="wss://public.example/twilio/ws">'
        '<Parameter name="token" value="t0k&amp;en"/><Parameter name="lang" value="ko"/>'
        "</Stream></Connect></Response>"
    )
    assert parse_twiml_stream(twiml) == (
        "wss://public.example/twilio/ws",
        {"token": "t0k&en", "lang": "ko"},
    )
    bare = '<Response><Connect><Stream url="wss://x/y"/></Connect></Response>'
    assert parse_twiml_stream(bare) == ("wss://x/y", {})
    for bad in (
        "<Response><Say>hi</Say></Response>",
        '<Response><Start><Stream url="wss://x"/></Start></Response>',
        "<Response><Connect><Stream/></Connect></Response>",
        "not xml",
    ):
        with pytest.raises(ValueError):
            parse_twiml_stream(bad)


class FakeActions:
    """The HTTP side of a bot for ``TwilioCall``: the voice webhook and a <Connect>'s action, scripted.

    Each request's form must carry Twilio's signature over the public URL (query included); ``answers``
    maps a path with its query to the TwiML answered.
    """

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.forms: list[tuple[str, dict[str, str]]] = []
        self.bad: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        form = dict(parse_qsl(request.content.decode()))
        where = request.url.raw_path.decode()
        public = f"https://public.example{where}"
        if not RequestValidator(AUTH_TOKEN).validate(public, form, request.headers.get("X-Twilio-Signature", "")):
            self.bad.append(where)
            return httpx.Response(403)
        self.forms.append((where, form))
        return httpx.Response(200, text=self.answers[where], headers={"Content-Type": "application/xml"})


def connect(segment: int, token: str) -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?><Response>'
            f'<Connect action="https://public.example/twilio/stream-ended?seg={segment}&amp;sig=s{segment}">'
            f'<Stream url="wss://public.example/twilio/ws"><Parameter name="token" value="{token}"/></Stream>'
            "</Connect></Response>")


async def test_a_whole_call_asks_the_action_when_its_stream_closes_and_follows_the_twiml(
        fake: FakeTwilioServer) -> None:
    """Issue 46: the stream closed by the bot's side, Twilio asks the <Connect>'s action (signed, with the
    call's parameters and the stream's SID) and runs what it answers: a new stream, then <Say> and <Dial>."""
    actions = FakeActions({
        "/twilio/voice": connect(0, "t0"),
        "/twilio/stream-ended?seg=0&sig=s0": connect(1, "t1"),
        "/twilio/stream-ended?seg=1&sig=s1": '<Response><Say language="ko-KR">연결합니다</Say>'
                                             "<Dial>+8221200000</Dial></Response>",
    })
    async with httpx.AsyncClient(transport=httpx.MockTransport(actions.handle)) as http:
        call = TwilioCall("http://127.0.0.1:9", ws_base=f"ws://127.0.0.1:{fake.port}", public_host="public.example",
                          auth_token=AUTH_TOKEN, http=http, from_="+821055501234")
        async with call:
            first = call.stream
            await first.send_dtmf("2")  # the bot speaks 2 s ...
            await first.wait_for_media(timeout=5)
            await asyncio.sleep(0.3)
            await first.send_dtmf("9")  # ... and its socket closes mid-sentence (a killed worker)
            second = await call.wait_next_stream(0, timeout=5)
            assert second is not first and second.call_sid == first.call_sid
            await asyncio.sleep(0.5)  # the new stream's bot is quiet this long, then speaks
            await second.send_dtmf("2")
            await second.wait_for_media(timeout=5)
            (gap,) = call.gaps()
            # The caller heard nothing from the close (mid-sentence) to the new stream's first audio.
            assert 0.5 <= gap["silence"] < 2.0, gap
            assert gap["action_s"] is not None and gap["action_s"] < 1.0
            await second.send_dtmf("9")
            assert await call.wait_ended(5) == "dial"
    assert actions.bad == []
    assert call.dialed == "+8221200000" and call.said == ["연결합니다"]
    assert [m["start"]["customParameters"]["token"] for m in fake.events("start")] == ["t0", "t1"]
    (where0, form0), (where1, form1) = actions.forms[1:]
    assert where0.startswith("/twilio/stream-ended?seg=0") and where1.startswith("/twilio/stream-ended?seg=1")
    assert form0["CallSid"] == call.call_sid and form0["CallStatus"] == "in-progress"
    assert form0["StreamSid"] == first.stream_sid and form1["StreamSid"] == second.stream_sid
    assert form0["From"] == "+821055501234" and {"AccountSid", "To", "Direction"} <= set(form0)


async def test_a_stream_closed_by_hangup_twiml_ends_the_call_and_a_caller_hang_up_asks_nothing(
        fake: FakeTwilioServer) -> None:
    actions = FakeActions({"/twilio/voice": connect(0, "t0"),
                           "/twilio/stream-ended?seg=0&sig=s0": "<Response><Hangup/></Response>"})
    async with httpx.AsyncClient(transport=httpx.MockTransport(actions.handle)) as http:
        call = TwilioCall("http://127.0.0.1:9", ws_base=f"ws://127.0.0.1:{fake.port}", public_host="public.example",
                          auth_token=AUTH_TOKEN, http=http)
        async with call:
            await call.stream.send_dtmf("9")
            assert await call.wait_ended(5) == "hangup"
        assert len(call.legs) == 1
        hung_up = TwilioCall("http://127.0.0.1:9", ws_base=f"ws://127.0.0.1:{fake.port}",
                             public_host="public.example", auth_token=AUTH_TOKEN, http=http)
        async with hung_up:
            await asyncio.sleep(0.1)
        assert hung_up.end == "caller"
    # One action request in all: the caller's own hang-up is not a stream Twilio asks about.
    assert [w for w, _ in actions.forms if "stream-ended" in w] == ["/twilio/stream-ended?seg=0&sig=s0"]
