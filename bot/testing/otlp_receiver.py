"""A trace collector for tests: OTLP/HTTP ``POST /v1/traces`` (protobuf), decoded with ``opentelemetry-proto``.

It answers as a collector does (``ExportTraceServiceResponse``) and keeps every span with its resource's
attributes. ``delay_secs`` makes it a slow collector (each request waits that long before its answer);
``stop`` then ``down`` ones are the same port with nothing listening.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class ReceivedSpan:
    trace_id: str  # 32 hex digits
    span_id: str
    parent_id: str  # "" for a root
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def render_tree(spans: list[ReceivedSpan], *, keys: tuple[str, ...] = ()) -> str:
    """One trace as an indented tree: each span's name, its start after the root's (ms), its length (ms) and
    the attributes named in ``keys`` (docs/production.md shows one)."""
    children: dict[str, list[ReceivedSpan]] = {}
    for sp in spans:
        children.setdefault(sp.parent_id, []).append(sp)
    roots = children.get("", [])
    t0 = min((r.start_ns for r in roots), default=0)
    lines: list[str] = []

    def walk(sp: ReceivedSpan, depth: int) -> None:
        shown = " ".join(f"{k}={sp.attributes[k]}" for k in keys if k in sp.attributes)
        lines.append(f"{'  ' * depth}{sp.name:<{24 - 2 * depth}} +{(sp.start_ns - t0) / 1e6:8.1f} ms "
                     f"{sp.duration_ms:8.1f} ms  {shown}".rstrip())
        for child in sorted(children.get(sp.span_id, []), key=lambda c: (c.start_ns, c.name)):
            walk(child, depth + 1)

    for root in sorted(roots, key=lambda r: r.start_ns):
        walk(root, 0)
    return "\n".join(lines) + "\n"


class OTLPReceiver:
    """``with OTLPReceiver() as r: ... r.endpoint ... r.spans``."""

    def __init__(self, *, delay_secs: float = 0.0):
        self.delay_secs = delay_secs
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(404 if self.path != "/v1/traces" else 415)
                    return
                receiver._take(ExportTraceServiceRequest.FromString(body))
                if receiver.delay_secs:
                    time.sleep(receiver.delay_secs)
                out = ExportTraceServiceResponse().SerializeToString()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the exporter gave up waiting (a slow collector's point)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def _take(self, request: ExportTraceServiceRequest) -> None:
        got = []
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(ReceivedSpan(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name,
                                            s.start_time_unix_nano, s.end_time_unix_nano,
                                            {a.key: _value(a.value) for a in s.attributes}, resource))
        with self._lock:
            self.requests += 1
            self.spans.extend(got)

    def traces(self) -> dict[str, list[ReceivedSpan]]:
        """Spans by trace id."""
        with self._lock:
            out: dict[str, list[ReceivedSpan]] = {}
            for s in self.spans:
                out.setdefault(s.trace_id, []).append(s)
            return out

    def start(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
