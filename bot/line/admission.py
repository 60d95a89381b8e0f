"""One phone line, several workers: what they share through the records database.

Twilio's webhook and the media stream it opens may reach different workers (a round-robin proxy,
several pods). Nothing that a call needs between the two lives in one process:

* **Stream tokens** are signed (``bot/line/tokens.py``): any worker with the shared key checks them.
  Their single use and the caller's number live in ``stream_tokens``: the webhook inserts the row
  (token id, CallSid, caller's number, issuing worker, expiry); the worker that gets the media
  stream sets ``used_at`` where it is still NULL: one row changed = this worker owns the call and
  reads the caller's number; none = the token was already used. A genuine token with no row (the
  database was down at the webhook) is inserted as used; a duplicate key means another worker won.
* **Line-wide limit** ``server.line_max_calls`` (0 = off): the webhook counts, in one transaction
  serialized across workers (PostgreSQL advisory lock; SQLite's write lock), the calls on the line:
  unfinished calls (``calls.ended_at`` NULL) of *live* workers, plus tokens issued and not expired
  whose call has not started yet (a reservation: the stream may still come, to any worker). At the
  limit the caller hears the busy message.
* **Leases**: every worker upserts its row in ``workers`` every ``server.worker_lease_secs / 3``.
  A worker whose heartbeat is older than ``worker_lease_secs`` is dead: its unfinished calls stop
  counting (they stay NULL until it starts again under the same ``records.worker`` name and marks
  them aborted).
* **Per-worker limit** ``server.max_calls`` is checked where the call runs, at the media stream: a
  full or draining worker plays the busy message itself over the stream and closes it.

Every database round trip runs in a thread (``asyncio.to_thread``) with a timeout; a database that
is down never blocks the event loop. Then the webhook admits the call without the line count
(the per-worker limit still holds) and the media stream checks single use in this process only;
both are logged loudly.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from loguru import logger

from bot.core.deadline import in_thread
from bot.line.tokens import IssuedToken
from bot.privacy import mask
from bot.store.db import RECORDS_SECS, Store, now
from bot.store.schema import calls, stream_tokens, workers

PURGE_AFTER_SECS = 600.0  # token rows are deleted this long after they expired
PURGE_EVERY_SECS = 60.0
_PG_ADMIT_LOCK = 0x6B6F6C696E65  # serializes admission across workers on one PostgreSQL database
REPLAYED = "replayed"  # admit's answer for a CallSid some worker already answered


class _Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _ts(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


# --------------------------------------------------------------------------- blocking (threads)


def count_line_calls(conn: sa.Connection, at: dt.datetime, lease_secs: float) -> tuple[int, int]:
    """(calls in progress on live workers, reservations) on the whole line."""
    live = sa.select(workers.c.worker).where(workers.c.heartbeat_at >= at - dt.timedelta(seconds=lease_secs))
    active = conn.execute(sa.select(sa.func.count()).select_from(calls)
                          .where(calls.c.ended_at.is_(None), calls.c.worker.in_(live))).scalar_one()
    started = sa.select(calls.c.call_sid).where(calls.c.call_sid == stream_tokens.c.call_sid).exists()
    reserved = conn.execute(sa.select(sa.func.count()).select_from(stream_tokens)
                            .where(stream_tokens.c.expires_at > at, ~started)).scalar_one()
    return int(active), int(reserved)


def admit(store: Store, issued: IssuedToken, *, caller: str | None, worker: str, line_max_calls: int,
          lease_secs: float) -> str | None:
    """Record an issued token (None = admitted), else why not: ``REPLAYED`` (a webhook for this CallSid was
    already answered, by any worker) or the line limit."""
    t = now()
    try:
        with store.engine.begin() as conn:
            if store.backend == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_ADMIT_LOCK})
            # SQLite: the insert takes the database's write lock first, so the count below is
            # serialized with every other worker's admission too.
            conn.execute(stream_tokens.insert().values(
                token_id=issued.token_id, call_sid=issued.call_sid, caller=caller, issued_by=worker,
                issued_at=t, expires_at=_ts(issued.expires_at)))
            earlier = conn.execute(sa.select(stream_tokens.c.issued_by).where(
                stream_tokens.c.call_sid == issued.call_sid, stream_tokens.c.token_id != issued.token_id)).first()
            if earlier is not None:  # Twilio sends one webhook per call: a second one is a replay
                raise _Refused(REPLAYED)
            if line_max_calls > 0:
                active, reserved = count_line_calls(conn, t, lease_secs)  # reserved includes this token
                if active + reserved > line_max_calls:
                    raise _Refused(f"line_max_calls ({active} calls in progress and {reserved - 1} reserved "
                                   f"on the line, server.line_max_calls {line_max_calls})")
    except _Refused as e:
        return e.reason
    return None


def redeem(store: Store, issued: IssuedToken, *, worker: str) -> tuple[str | None, str | None, str | None]:
    """Use up a token: (problem or None, the caller's number, the worker that issued it)."""
    t = now()
    with store.engine.begin() as conn:
        done = conn.execute(stream_tokens.update()
                            .where(stream_tokens.c.token_id == issued.token_id, stream_tokens.c.used_at.is_(None))
                            .values(used_at=t, used_by=worker))
        if done.rowcount == 1:
            row = conn.execute(sa.select(stream_tokens.c.call_sid, stream_tokens.c.caller, stream_tokens.c.issued_by)
                               .where(stream_tokens.c.token_id == issued.token_id)).one()
            if row.call_sid != issued.call_sid:  # only with a forged row; the signature binds the CallSid
                return "token was issued for another call", None, None
            return None, row.caller, row.issued_by
        exists = conn.execute(sa.select(stream_tokens.c.token_id)
                              .where(stream_tokens.c.token_id == issued.token_id)).first()
    if exists is not None:
        return "token already used", None, None
    try:  # a genuine token the webhook could not record (database down then): its first use wins
        with store.engine.begin() as conn:
            conn.execute(stream_tokens.insert().values(
                token_id=issued.token_id, call_sid=issued.call_sid, caller=None, issued_by=None, issued_at=t,
                expires_at=_ts(issued.expires_at), used_at=t, used_by=worker))
    except sa.exc.IntegrityError:
        return "token already used", None, None
    return None, None, None


def release(store: Store, token_id: str) -> None:
    """A used token whose call never started (refused at the stream): stop counting it as a reservation."""
    with store.engine.begin() as conn:
        conn.execute(stream_tokens.update().where(stream_tokens.c.token_id == token_id).values(expires_at=now()))


def heartbeat(store: Store, worker: str, *, draining: bool, started_at: dt.datetime) -> None:
    t = now()
    values = {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": t, "draining": draining}
    with store.engine.begin() as conn:
        if conn.execute(workers.update().where(workers.c.worker == worker).values(**values)).rowcount:
            return
    try:
        with store.engine.begin() as conn:
            conn.execute(workers.insert().values(worker=worker, started_at=started_at, **values))
    except sa.exc.IntegrityError:  # a twin inserted it between our update and insert
        with store.engine.begin() as conn:
            conn.execute(workers.update().where(workers.c.worker == worker).values(**values))


def leave(store: Store, worker: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(workers.delete().where(workers.c.worker == worker))


def purge_tokens(store: Store, older_than_secs: float = PURGE_AFTER_SECS) -> int:
    cutoff = now() - dt.timedelta(seconds=older_than_secs)
    with store.engine.begin() as conn:
        return conn.execute(stream_tokens.delete().where(stream_tokens.c.expires_at < cutoff)).rowcount or 0


def _count_now(store: Store, lease_secs: float) -> tuple[int, int]:
    with store.engine.connect() as conn:
        return count_line_calls(conn, now(), lease_secs)


def line_figures(store: Store, lease_secs: float) -> dict[str, Any]:
    t = now()
    with store.engine.connect() as conn:
        active, reserved = count_line_calls(conn, t, lease_secs)
        live = conn.execute(sa.select(sa.func.count()).select_from(workers).where(
            workers.c.heartbeat_at >= t - dt.timedelta(seconds=lease_secs))).scalar_one()
    return {"line_active_calls": active, "line_reserved_calls": reserved, "line_workers": int(live)}


# --------------------------------------------------------------------------- the server's side


class Line:
    """This worker's side of the line (one per process; see the module doc)."""

    def __init__(self, store: Store, *, worker: str, line_max_calls: int, lease_secs: float,
                 records_enabled: bool = True, is_draining: Callable[[], bool] = lambda: False) -> None:
        if line_max_calls > 0 and not records_enabled:
            from bot.core.errors import StartupError

            raise StartupError("server.line_max_calls needs records.enabled = true: the line's calls are counted "
                               "in the records database's calls table")
        self.store = store
        self.worker = worker
        self.line_max_calls = line_max_calls
        self.lease_secs = lease_secs
        self.is_draining = is_draining
        self._started_at = now()
        self._task: asyncio.Task | None = None
        self._used_here: OrderedDict[str, float] = OrderedDict()  # single use while the database is down
        self._lock = threading.Lock()
        self._db_down_logged = False

    async def _db(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a blocking database call in a thread, with a timeout; raises on failure (logged once per outage)."""
        try:
            result = await in_thread(RECORDS_SECS, fn, self.store, *args, **kwargs)
        except Exception as e:
            if not self._db_down_logged:
                logger.error("LINE: records database unreachable for {} ({}: {}); calls go on with this worker's "
                             "own checks only", what, type(e).__name__, str(e).splitlines()[0][:160] if str(e) else "")
            self._db_down_logged = True
            raise
        if self._db_down_logged:
            logger.warning("LINE: records database reachable again")
            self._db_down_logged = False
        return result

    async def admit(self, issued: IssuedToken, caller: str | None) -> str | None:
        """At the webhook: record the token (and the caller's number); the line-limit reason, or None."""
        try:
            return await self._db("admission", admit, issued, caller=caller, worker=self.worker,
                                  line_max_calls=self.line_max_calls, lease_secs=self.lease_secs)
        except Exception:  # noqa: BLE001 - admitted without the line count; logged in _db
            logger.error("call {}: admitted WITHOUT the line-wide count and without its caller's number "
                         "(records database unreachable)", mask(issued.call_sid))
            return None

    async def full(self) -> str | None:
        """For a call that starts on this worker without a webhook (the QA page): the line-limit
        reason when the line is full, else None (also with no line limit, or the database down)."""
        if self.line_max_calls <= 0:
            return None
        try:
            active, reserved = await self._db("the line's count", _count_now, self.lease_secs)
        except Exception:  # noqa: BLE001 - logged in _db; this worker's own limits still hold
            return None
        if active + reserved >= self.line_max_calls:
            return (f"line_max_calls ({active} calls in progress and {reserved} reserved on the line, "
                    f"server.line_max_calls {self.line_max_calls})")
        return None

    async def redeem(self, issued: IssuedToken) -> tuple[str | None, str | None, str | None]:
        """At the media stream: (problem or None, caller's number, issuing worker)."""
        try:
            return await self._db("a stream token", redeem, issued, worker=self.worker)
        except Exception:  # noqa: BLE001 - the token is signed and unexpired: single use in this process only
            with self._lock:
                t = time.time()
                while self._used_here and next(iter(self._used_here.values())) < t:
                    self._used_here.popitem(last=False)
                if issued.token_id in self._used_here:
                    return "token already used", None, None
                self._used_here[issued.token_id] = issued.expires_at
            logger.error("call {}: stream token accepted with single use checked in THIS worker only "
                         "(records database unreachable)", mask(issued.call_sid))
            return None, None, None

    async def release(self, token_id: str) -> None:
        try:
            await self._db("releasing a token", release, token_id)
        except Exception:  # noqa: BLE001 - it expires by itself
            pass

    async def figures(self) -> dict[str, Any]:
        try:
            return await self._db("line figures", line_figures, self.lease_secs)
        except Exception:  # noqa: BLE001
            return {"line_active_calls": None, "line_reserved_calls": None, "line_workers": None}

    # --- the lease ----------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            await self._db("the worker lease", heartbeat, self.worker, draining=False, started_at=self._started_at)
        except Exception:  # noqa: BLE001 - retried by the loop
            pass
        self._task = asyncio.create_task(self._beat(), name="line-heartbeat")

    async def _beat(self) -> None:
        every = max(0.5, self.lease_secs / 3)
        last_purge = time.monotonic()
        while True:
            await asyncio.sleep(every)
            try:
                await self._db("the worker lease", heartbeat, self.worker, draining=self.is_draining(),
                               started_at=self._started_at)
                if time.monotonic() - last_purge > PURGE_EVERY_SECS:
                    last_purge = time.monotonic()
                    await self._db("purging old tokens", purge_tokens)
            except Exception:  # noqa: BLE001 - logged in _db; next beat retries
                pass

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            self._task = None
        try:
            await self._db("leaving the line", leave, self.worker)
        except Exception:  # noqa: BLE001 - the lease runs out by itself
            pass
