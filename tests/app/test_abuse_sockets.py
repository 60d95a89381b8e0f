"""Media sockets before their ``start``, in process: capped, small, short-lived, and any bad start is one line.

The product's app (``create_app``) behind Starlette's test client. A socket that has not sent a
valid ``start`` is a cost with no call: at most ``server.media_prestart_per_client`` per address
and ``server.media_prestart_max`` in all (the rest are refused before the handshake completes), a
few KiB each (``server.media_prestart_max_bytes``), for ``server.start_timeout_secs``. A
malformed ``start`` of any shape closes with 1008 and one masked log line, never a traceback.
"""

from __future__ import annotations

import json
import tempfile
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from loguru import logger
from starlette.websockets import WebSocketDisconnect

from bot.app.server import create_app
from bot.config import Secrets, load_config
from bot.testing.twilio_sim import new_sid
from bot.tools.abuse import MALFORMED_STARTS, malformed_start_messages
from bot.transports.twilio import StreamProtocolError, parse_stream_start

MULAW = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}


@pytest.fixture
def log_lines():
    lines: list[tuple[str, str, bool]] = []  # (level, message, had an exception)
    sink = logger.add(lambda m: lines.append((m.record["level"].name, m.record["message"],
                                              m.record["exception"] is not None)), level="DEBUG")
    yield lines
    logger.remove(sink)


def _app(*overrides: str):
    db = Path(tempfile.mkdtemp(prefix="sockets-")) / "calls.db"
    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=false",
                                    f"records.url='sqlite:///{db}'", *overrides])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    return create_app(config, Secrets("AC" + "0" * 32, "sockets-test-token", "EMPTY"), models)


def _closed_with(client: TestClient, messages: list[str | bytes]) -> int:
    """Open a media socket, send ``messages``, return the code it is closed with."""
    with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/twilio/media") as ws:
        for m in messages:
            ws.send_bytes(m) if isinstance(m, bytes) else ws.send_text(m)
        ws.receive_text()
    return closed.value.code


def _refusals(lines) -> list[tuple[str, str, bool]]:
    return [line for line in lines if line[1].startswith("media stream") and "refused" in line[1]]


@pytest.mark.parametrize("kind", list(MALFORMED_STARTS))
def test_a_malformed_start_of_any_shape_closes_1008_with_one_masked_line_and_no_traceback(kind, log_lines):
    # Seen before: customParameters as a string or a list (AttributeError), an integer callSid
    # (TypeError in mask), deeply nested JSON (RecursionError): ASGI tracebacks.
    with TestClient(_app()) as client:
        assert _closed_with(client, malformed_start_messages(kind)) == 1008
    refused = _refusals(log_lines)
    assert len(refused) == 1, log_lines
    assert not any(had_exception for _, _, had_exception in log_lines), log_lines
    assert not any("Traceback" in message for _, message, _ in log_lines)
    everything = " ".join(message for _, message, _ in log_lines)
    assert "1234-5678" not in everything and "01012345678" not in everything  # the planted phone number
    assert "\n" not in refused[0][1]


def test_every_start_shape_is_refused_by_the_parser_with_a_protocol_error():
    for kind in MALFORMED_STARTS:
        messages = [m for m in malformed_start_messages(kind) if isinstance(m, str)]
        if kind in ("oversized before start", "binary frame"):
            continue  # refused while reading (read_stream_start), before any parsing
        with pytest.raises(StreamProtocolError):
            parse_stream_start(messages)


def test_a_valid_start_still_parses():
    start = parse_stream_start([json.dumps({"event": "connected"}), json.dumps({
        "event": "start", "streamSid": "MZ" + "1" * 32,
        "start": {"callSid": "CA" + "2" * 32, "accountSid": "AC" + "3" * 32, "mediaFormat": MULAW,
                  "customParameters": {"token": "abc", "callback": "1"}}})])
    assert start.custom_parameters == {"token": "abc", "callback": "1"} and start.media_format == MULAW


def test_pre_start_sockets_are_capped_per_client_address(log_lines):
    # Seen before: 50 sockets from one client, each held 10 s, all accepted.
    with TestClient(_app("server.media_prestart_per_client=3", "server.media_prestart_max=10")) as client:
        with ExitStack() as held:
            for _ in range(3):
                held.enter_context(client.websocket_connect("/twilio/media"))
            with pytest.raises(WebSocketDisconnect) as refused:
                with client.websocket_connect("/twilio/media") as ws:
                    ws.receive_text()
            assert refused.value.code == 1013
        # The three closed: their places are free again, and a socket with a start is no longer counted.
        with ExitStack() as held:
            for _ in range(3):
                held.enter_context(client.websocket_connect("/twilio/media"))
        with TestClient(client.app.state.admin_app) as admin:
            assert 'voice_calls_rejected_total{reason="stream_prestart_full"} 1.0' in admin.get("/metrics").text
    assert len([m for _, m, _ in log_lines if "wait for their start" in m]) == 1


def test_pre_start_sockets_are_capped_in_all():
    with TestClient(_app("server.media_prestart_per_client=10", "server.media_prestart_max=2")) as client:
        with ExitStack() as held:
            for _ in range(2):
                held.enter_context(client.websocket_connect("/twilio/media"))
            with pytest.raises(WebSocketDisconnect) as refused:
                with client.websocket_connect("/twilio/media") as ws:
                    ws.receive_text()
            assert refused.value.code == 1013


def test_only_a_few_kib_may_come_before_start(log_lines):
    # Seen before: 1 MiB first frames were read and kept until the start timeout.
    with TestClient(_app("server.media_prestart_max_bytes=4096", "server.start_timeout_secs=30")) as client:
        big = json.dumps({"event": "connected", "protocol": "Call", "junk": "x" * 5000})
        assert _closed_with(client, [big]) == 1008
        # Two messages that fit one by one but not together.
        half = json.dumps({"event": "connected", "junk": "x" * 2500})
        assert _closed_with(client, [half, half]) == 1008
    refused = _refusals(log_lines)
    assert len(refused) == 2 and all("4096 bytes" in m for _, m, _ in refused), refused


def test_a_socket_that_never_starts_is_closed_after_the_start_timeout():
    with TestClient(_app("server.start_timeout_secs=0.5")) as client:
        with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/twilio/media") as ws:
            ws.send_text(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
            ws.receive_text()
        assert closed.value.code == 1008


def test_a_good_start_with_a_forged_token_is_still_refused_by_the_token(log_lines):
    with TestClient(_app()) as client:
        start = {"event": "start", "streamSid": new_sid("MZ"),
                 "start": {"callSid": new_sid("CA"), "accountSid": "AC" + "0" * 32, "mediaFormat": MULAW,
                           "customParameters": {"token": "forged"}}}
        assert _closed_with(client, [json.dumps({"event": "connected"}), json.dumps(start)]) == 1008
    assert any("refused" in m and "token" in m for _, m, _ in log_lines)
