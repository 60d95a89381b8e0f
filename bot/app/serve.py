"""``run_bot.py serve`` in one process: load the models, check the machine, serve until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import signal
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import uvicorn
from loguru import logger

from bot.core.errors import StartupError

if TYPE_CHECKING:
    from types import FrameType

    from bot.call.models import SharedModels
    from bot.call.request import CallRequest
    from bot.call.session import CallSession
    from bot.config import Config, Secrets


class LLMServer(Protocol):
    """The LLM behind the line (``bot.modelfiles.local_llm.serving_llm``'s handle)."""

    def ready(self) -> Config:
        """The config to serve with, once the LLM answers."""
        ...


def trusted_proxies(config: Config) -> list[str]:
    """``server.forwarded_allow_ips``, checked: StartupError for an entry that is no address or network."""
    for entry in config.server.forwarded_allow_ips:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            hint = " (trusting every peer lets anyone choose the address the login limits see)" if entry == "*" \
                else ""
            raise StartupError(f"server.forwarded_allow_ips: {entry!r} is not an address or network{hint}") from None
    return list(config.server.forwarded_allow_ips)


def uvicorn_config(app: Any, config: Config, *, host: str, port: int, **kwargs: Any) -> uvicorn.Config:
    """A listener's uvicorn config: X-Forwarded-For believed from ``server.forwarded_allow_ips`` only, and no
    logging setup of uvicorn's own (its loggers go through ``bot.privacy``'s masking, like every other line)."""
    kwargs.setdefault("log_level", "warning")
    return uvicorn.Config(app, host=host, port=port, proxy_headers=True, forwarded_allow_ips=trusted_proxies(config),
                          log_config=None, **kwargs)


def serve(config: Config, llm_server: LLMServer, *, call_builder: Callable[[CallRequest], CallSession] | None = None,
          prepare_models: Callable[[SharedModels], SharedModels] | None = None) -> int:
    """Serve calls on ``server.host:server.port``; returns the exit status (0 after a drain).

    ``call_builder`` builds each call's pipeline (default ``build_call``; the test lab wraps it);
    ``prepare_models`` may replace loaded models after the startup check (the test lab's
    fixed-delay STT). Both are seams for ``bot/testing/lab_server.py``; the product passes neither.
    """
    from bot.app.server import create_app
    from bot.call.build import build_call
    from bot.line.callgate import WS_MAX_BYTES, DrainingServer
    from bot.recording.files import private_umask

    private_umask()  # recordings, the SQLite records: 0600 in 0700 folders (every worker of --workers runs this)
    # A SIGTERM while loading (a supervisor stopping a worker it just restarted) is a clean stop:
    # no call was taken. Once the listeners are built, SIGTERM drains.
    stop = StopWhileLoading()
    signal.signal(signal.SIGTERM, stop)
    trusted_proxies(config)  # a bad entry stops us before minutes of model loading
    config, secrets, models = _load_and_check(config, llm_server, prepare_models)
    _warn_open_doors(config, secrets)
    app = create_app(config, secrets, models, call_builder=call_builder or build_call)
    freeze_startup_heap()
    # SIGTERM drains (busy to new calls, server.drain_secs for calls in progress, goodbye) and exits 0.
    public = DrainingServer(uvicorn_config(app, config, host=config.server.host, port=config.server.port,
                                           ws_max_size=WS_MAX_BYTES), drain=app.state.drain)
    admin = OperationsServer(uvicorn_config(app.state.admin_app, config, host=config.server.admin_host,
                                            port=config.server.admin_port, lifespan="off"))
    stop.hand_over(public)
    logger.info("serving on http://{}:{} (Twilio webhook: https://{}/twilio/voice); operations on http://{}:{}",
                config.server.host, config.server.port, config.server.public_host, config.server.admin_host,
                config.server.admin_port)
    with asyncio.Runner(loop_factory=public.config.get_loop_factory()) as runner:
        return runner.run(serve_both(public, admin))


def freeze_startup_heap() -> int:
    """Put what loading made (tables, the nets, the app) beyond the garbage collector; returns how many objects.

    A full collection scans every tracked object, and it runs on the event loop that paces the calls'
    audio: ~310 k objects after loading took ~140 ms a collection on 2 CPU cores. Frozen, they are
    never scanned again; a collection sees only what calls made. vLLM does the same after its warm-up
    (``vllm.utils.gc_utils.freeze_gc_heap``).
    """
    began = time.perf_counter()
    gc.collect()
    took_ms = (time.perf_counter() - began) * 1000
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info("startup heap frozen: {} objects a collection no longer scans (a full collection of them: {:.0f} ms)",
                frozen, took_ms)
    return frozen


def _load_and_check(config: Config, llm_server: LLMServer, prepare_models: Callable[[SharedModels], SharedModels] | None
                    ) -> tuple[Config, Secrets, SharedModels]:
    """``(config, secrets, models)``: the models loaded and verified, the LLM ready, the startup check passed."""
    from bot.call.models import load_models
    from bot.config import Secrets
    from bot.modelfiles.manifest import require_verified_models, startup_errors
    from bot.ops.hatches import escape_hatches, log_banner
    from bot.ops.preflight import startup_check
    from bot.ops.selftime import self_time

    secrets = Secrets.from_env(config)
    with startup_errors():
        require_verified_models(config)  # a missing, partial or altered model file stops us here (models.toml)
        models = load_models(config)
    config = llm_server.ready()
    # The check (`run_bot.py check`) with the loaded models: a failure stops us unless a declared hatch covers it.
    checked, figures = startup_check(config, models, secrets)
    # Timed on the product's engines, before the test lab may swap in its fixed-delay STT.
    models.self_timing = self_time(config, secrets, models, llm_first_token_ms=figures.get("llm_first_token_ms"))
    if prepare_models is not None:
        models = prepare_models(models)
    log_banner(escape_hatches(config, tts_engine=models.tts, whisper_engine=models.whisper, secrets=secrets) + checked)
    return config, secrets, models


def _warn_open_doors(config: Config, secrets: Secrets) -> None:
    """Say loudly what is switched off: the Twilio signature check, the records API."""
    if not config.twilio.validate_signature:
        logger.warning("!" * 78)
        logger.warning("TWILIO SIGNATURE CHECK IS OFF: anyone can open calls on this server")
        logger.warning("!" * 78)
    elif not secrets.twilio_auth_token:
        logger.warning("TWILIO_AUTH_TOKEN is not set: every webhook will be refused (403)")
    if not secrets.records_api_token:
        logger.info("records API (/api/turns) is OFF: set env RECORDS_API_TOKEN to read turn records over HTTP")


class StopWhileLoading:
    """SIGTERM before serving: exit 0, no call was taken.

    The handler's SystemExit lands wherever the main thread is. Inside a finalizer or a garbage
    collector's callback (``freeze_startup_heap``'s collection runs SQLAlchemy's) Python prints it and
    goes on, and the worker would serve after its supervisor asked it to stop; so ``hand_over`` looks
    again before the listener takes the signal.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = True
            logger.warning("{} before serving: stopping (no call was taken)", signal.Signals(signum).name)
        raise SystemExit(0)

    def hand_over(self, public: uvicorn.Server) -> None:
        """From here SIGTERM is ``public``'s (the drain); raises SystemExit(0) if one came before."""
        signal.signal(signal.SIGTERM, public.handle_exit)  # before uvicorn's own; one now drains
        if self.requested:
            raise SystemExit(0)


class OperationsServer(uvicorn.Server):
    """The operations listener: served beside the public one, which owns the signals and the drain."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_both(public: uvicorn.Server, admin: uvicorn.Server) -> int:
    """Both listeners in one loop; the process ends with the public one (or when either cannot start)."""
    admin_task = asyncio.create_task(admin.serve(), name="operations-listener")

    def admin_ended(task: asyncio.Task) -> None:
        if not public.should_exit:
            why = "cancelled" if task.cancelled() else task.exception() or "exited"
            logger.error("the operations listener stopped ({}); stopping", why)
            public.should_exit = True

    admin_task.add_done_callback(admin_ended)
    try:
        await public.serve()
    finally:
        admin.should_exit = True
        with contextlib.suppress(BaseException):
            await admin_task
    return 0 if admin.started else 1
