"""``/readyz``: may this worker get new calls? (``/healthz`` stays the liveness answer.)

Ready = the models are loaded (the app only serves after ``load_models``), the LLM server answers
``GET {llm.base_url}/models`` (asked at most every few seconds, 2 s timeout), and the worker is not
draining. With the declared hatch ``llm.start_without_llm`` an unreachable LLM is reported but does
not make the worker unready (that hatch exists to serve without one).
"""

from __future__ import annotations

import time

import httpx

from bot.config import Config, Secrets

PROBE_TIMEOUT_SECS = 2.0
CACHE_OK_SECS = 5.0
CACHE_FAIL_SECS = 1.0


class LLMProbe:
    def __init__(self, config: Config, secrets: Secrets):
        self._url = config.llm.base_url.rstrip("/") + "/models"
        self._headers = {"Authorization": f"Bearer {secrets.llm_api_key}"}
        self._last: tuple[float, bool, str] | None = None  # (monotonic, ok, detail)

    async def check(self) -> tuple[bool, str]:
        now = time.monotonic()
        if self._last is not None:
            at, ok, detail = self._last
            if now - at < (CACHE_OK_SECS if ok else CACHE_FAIL_SECS):
                return ok, detail
        t0 = time.perf_counter()
        try:
            async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_SECS) as client:
                resp = await client.get(self._url, headers=self._headers)
            ok = resp.status_code == 200
            detail = f"{'ok' if ok else f'HTTP {resp.status_code}'} ({(time.perf_counter() - t0) * 1000:.0f} ms, {self._url})"
        except httpx.HTTPError as e:
            ok, detail = False, f"unreachable: {type(e).__name__} ({self._url})"
        self._last = (time.monotonic(), ok, detail)
        return ok, detail


async def readiness(config: Config, probe: LLMProbe, *, draining: bool, worker: str) -> tuple[bool, dict]:
    llm_ok, llm_detail = await probe.check()
    hatch = config.llm.start_without_llm
    ready = not draining and (llm_ok or hatch)
    if not llm_ok and hatch:
        llm_detail += " - ignored: ESCAPE HATCH llm.start_without_llm"
    return ready, {"ready": ready, "worker": worker, "models": "loaded", "llm": llm_detail, "draining": draining}
