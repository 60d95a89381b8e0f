"""NAVER Cloud SENS's SMS API v2 as the line uses it, for tests: its requests, answers and signature.

An ASGI app (Starlette): in-process through ``transport()`` (an httpx transport, no port), or on a
port with ``with FakeSens(...) as fake`` (``base_url``) for a whole server. Like the real API
gateway it checks every request's ``x-ncp-iam-access-key``, its ``x-ncp-apigw-timestamp`` (within
5 minutes) and its ``x-ncp-apigw-signature-v2`` (base64 HMAC-SHA256 with the secret key over
``"{METHOD} {path?query}\\n{timestamp}\\n{access key}"``, the path as sent), and refuses a bad one
with 401 ``{"error": {"errorCode": "200", "message": "Authentication Failed", ...}}``. An unknown
service id is 404 (code 300). A send (``POST .../messages``) is checked as SENS documents it:
``type`` SMS or LMS, ``from`` one of the ``registered`` numbers, ``content`` within 90 (SMS) or 2,000
(LMS) bytes of EUC-KR, ``messages[].to`` digits; a refusal is 400 ``{"status", "errorMessage",
"errors"}``. Accepted: 202 ``{"requestId", "requestTime", "statusCode": "202", "statusName": "success"}``.
``GET .../messages?requestId=`` lists the request's message ids and ``GET .../messages/{messageId}``
gives the carrier's result: COMPLETED with statusCode "0" (success) unless ``report_next`` says
otherwise ("waiting": PROCESSING; "fail": COMPLETED with the given code). ``fail_next(n, status)``
makes the next ``n`` requests fail with the gateway's error for that status (500 Unexpected Error,
503 Endpoint Error, 429 Throttle Limited). ``messages`` holds what was accepted, ``requests`` every
request (method, path, status answered).
"""

from __future__ import annotations

import datetime as dt
import hmac
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from bot.aftercall.sens_api import LMS_MAX_BYTES, SENS_TZ, SMS_MAX_BYTES, signature
from bot.testing.process import free_port

# The API gateway's errors (Ncloud API, "오류 처리"): HTTP status -> (errorCode, message).
GATEWAY_ERRORS = {401: ("200", "Authentication Failed"), 404: ("300", "Not Found Exception"),
                  429: ("410", "Throttle Limited"), 500: ("900", "Unexpected Error"),
                  503: ("500", "Endpoint Error"), 504: ("510", "Endpoint Timeout")}
SKEW_MS = 5 * 60 * 1000


class FakeSens:
    """SENS for one project: its key pair, its SMS service id and the sender numbers registered with it."""

    def __init__(self, *, access_key: str, secret_key: str, service_id: str, registered: tuple[str, ...],
                 clock: Callable[[], float] = time.time):
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.messages: list[dict[str, Any]] = []  # accepted: type, from, to, content, requestId, messageId
        self.requests: list[dict[str, Any]] = []  # every request: method, path (with its query), status
        self._keys = {access_key: secret_key}
        self._service_id = service_id
        self._registered = set(registered)
        self._clock = clock
        self._failures: list[int] = []
        self._reports: list[tuple[str, str, str]] = []  # (state, statusCode, statusMessage), next sends first
        self._results: dict[str, dict[str, Any]] = {}  # messageId -> the result it will give

        def gateway_error(status: int, details: str) -> JSONResponse:
            code, message = GATEWAY_ERRORS[status]
            return JSONResponse({"error": {"errorCode": code, "message": message, "details": details}},
                                status_code=status)

        def refused(errors: list[str]) -> JSONResponse:
            return JSONResponse({"status": 400, "errorMessage": f"Validation failed. {len(errors)} error(s)",
                                 "errors": errors}, status_code=400)

        def gate(request: Request) -> JSONResponse | None:
            """The API gateway's checks: key, timestamp, signature, then the service and injected failures."""
            key = request.headers.get("x-ncp-iam-access-key", "")
            stamp = request.headers.get("x-ncp-apigw-timestamp", "")
            given = request.headers.get("x-ncp-apigw-signature-v2", "")
            if key not in self._keys or not stamp.isdigit() or not given:
                return gateway_error(401, "Invalid authentication information.")
            if abs(int(stamp) - int(self._clock() * 1000)) > SKEW_MS:
                return gateway_error(401, "Invalid timestamp: more than 5 minutes from the server's clock.")
            raw = request.scope["raw_path"].decode()
            query = request.scope.get("query_string", b"").decode()
            target = f"{raw}?{query}" if query else raw
            want = signature(request.method, target, stamp, key, self._keys[key])
            if not hmac.compare_digest(want, given):
                return gateway_error(401, "Invalid authentication information.")
            if request.path_params["service"] != self._service_id:
                return gateway_error(404, "The service id is not found.")
            if self._failures:
                return gateway_error(self._failures.pop(0), "Injected by the fake.")
            return None

        def answer(request: Request, response: JSONResponse) -> JSONResponse:
            path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            self.requests.append({"method": request.method, "path": path, "status": response.status_code})
            return response

        async def send(request: Request) -> JSONResponse:
            body = await request.body()
            error = gate(request)
            if error is not None:
                return answer(request, error)
            try:
                data = json.loads(body)
            except ValueError:
                return answer(request, refused(["The request body is not JSON."]))
            errors = self._validate(data)
            if errors:
                return answer(request, refused(errors))
            now = dt.datetime.fromtimestamp(self._clock(), SENS_TZ)
            request_id = f"RSSA-{int(self._clock() * 1000)}-{secrets.randbelow(10000):04d}-{secrets.token_hex(4)}"
            for target in data["messages"]:
                message_id = str(uuid.uuid4())
                state, code, text = self._reports.pop(0) if self._reports else ("success", "0", "성공")
                self._results[message_id] = {
                    "requestId": request_id, "messageId": message_id, "requestTime": now.strftime("%Y-%m-%d %H:%M:%S"),
                    "contentType": data.get("contentType", "COMM"), "type": data["type"],
                    "countryCode": data.get("countryCode", "82"), "from": data["from"], "to": target["to"],
                    "content": target.get("content", data["content"]),
                    "status": "PROCESSING" if state == "waiting" else "COMPLETED",
                    **({} if state == "waiting" else {
                        "statusCode": code, "statusName": "success" if state == "success" else "fail",
                        "statusMessage": text, "completeTime": now.strftime("%Y-%m-%d %H:%M:%S"), "telcoCode": "SKT"}),
                }
                self.messages.append({"type": data["type"], "from": data["from"], "to": target["to"],
                                      "content": target.get("content", data["content"]), "requestId": request_id,
                                      "messageId": message_id})
            return answer(request, JSONResponse({"requestId": request_id,
                                                 "requestTime": now.isoformat(timespec="milliseconds")[:23],
                                                 "statusCode": "202", "statusName": "success"}, status_code=202))

        async def listing(request: Request) -> JSONResponse:
            error = gate(request)
            if error is not None:
                return answer(request, error)
            request_id = request.query_params.get("requestId")
            if not request_id:
                return answer(request, refused(["requestId, requestStartTime+requestEndTime or "
                                                "completeStartTime+completeEndTime is required."]))
            found = [{k: r[k] for k in ("messageId", "requestTime", "contentType", "countryCode", "from", "to")}
                     for r in self._results.values() if r["requestId"] == request_id]
            return answer(request, JSONResponse({"requestId": request_id, "statusCode": "202", "statusName": "success",
                                                 "messages": found}))

        async def result(request: Request) -> JSONResponse:
            error = gate(request)
            if error is not None:
                return answer(request, error)
            found = self._results.get(request.path_params["message"])
            if found is None:
                return answer(request, gateway_error(404, "The message is not found."))
            shown = {k: v for k, v in found.items() if k not in ("requestId", "messageId")}
            return answer(request, JSONResponse({"statusCode": "200", "statusName": "success", "messages": [shown]}))

        base = "/sms/v2/services/{service}/messages"
        self.app = Starlette(routes=[Route(base, send, methods=["POST"]), Route(base, listing, methods=["GET"]),
                                     Route(base + "/{message}", result, methods=["GET"])])
        self.base_url = "http://sens.fake"  # in-process (transport()); a real port once entered
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def _validate(self, data: Any) -> list[str]:
        """SENS's checks of a send, as documented (sens-sms-send)."""
        if not isinstance(data, dict):
            return ["The request body must be an object."]
        errors = []
        if data.get("type") not in ("SMS", "LMS", "MMS"):
            errors.append("The type must be SMS, LMS or MMS.")
        if data.get("from") not in self._registered:
            errors.append("The sender(from) is not a calling number registered with the project.")
        content = data.get("content")
        if not isinstance(content, str):
            errors.append("The content is required.")
        else:
            try:
                size = len(content.encode("euc-kr"))
            except UnicodeEncodeError:
                errors.append("The content has characters EUC-KR cannot encode.")
            else:
                limit = SMS_MAX_BYTES if data.get("type") == "SMS" else LMS_MAX_BYTES
                if size > limit:
                    errors.append(f"The content of a {data.get('type')} cannot exceed {limit} bytes.")
        targets = data.get("messages")
        if not isinstance(targets, list) or not 1 <= len(targets) <= 100:
            errors.append("The messages must hold 1 to 100 receivers.")
        else:
            for target in targets:
                to = target.get("to") if isinstance(target, dict) else None
                if not isinstance(to, str) or not re.fullmatch(r"\d{1,25}", to):
                    errors.append("The receiver(to) must be numeric and cannot exceed 25 characters.")
        return errors

    def fail_next(self, n: int, status: int = 500) -> None:
        """The next ``n`` requests (after the signature check) fail with the gateway's error for ``status``."""
        self._failures.extend([status] * n)

    def report_next(self, state: str, code: str = "0", message: str = "성공") -> None:
        """The next accepted message's carrier result: "success", "fail" (with ``code``) or "waiting"."""
        self._reports.append((state, code, message))

    def complete(self, message_id: str, *, code: str = "0", message: str = "성공") -> None:
        """The carrier answers for a message still under way."""
        found = self._results[message_id]
        found.update(status="COMPLETED", statusCode=code, statusName="success" if code == "0" else "fail",
                     statusMessage=message, telcoCode="SKT",
                     completeTime=dt.datetime.fromtimestamp(self._clock(), SENS_TZ).strftime("%Y-%m-%d %H:%M:%S"))

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport that answers in-process (for ``SensAPI(transport=...)``)."""
        return httpx.ASGITransport(app=self.app)

    def __enter__(self) -> FakeSens:
        import uvicorn

        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="critical"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        while not self._server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
