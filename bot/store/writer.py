"""Writes records off the event loop, in order, and keeps them while the database is down.

Calls hand writes to ``submit`` (never blocks: a deque append) and go on; one thread applies
them in order. A write that fails stays at the head of the queue and is retried with backoff,
logged loudly once per outage, so a database that is down or full never delays audio and loses
nothing until the bounded queue overflows (then the oldest write is dropped, also loudly).
Ticket creation and lookups need an answer: ``call`` runs them on the same thread (after the
writes queued before them) and returns a future the dialog awaits with a timeout.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from loguru import logger

from bot.store.db import Store


class RecordWriter:
    def __init__(self, store: Store, *, max_pending: int = 10000, retry_max_secs: float = 5.0):
        self.store = store
        self._max = max_pending
        self._retry_max = retry_max_secs
        self._queue: collections.deque[tuple[str, Callable[[Store], Any], Future | None]] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._busy = False
        self.failures = 0  # writes that failed at least once (retried)
        self.dropped = 0  # writes lost to the queue bound
        self.outage = False
        self._thread = threading.Thread(target=self._run, name="records-writer", daemon=True)
        self._thread.start()

    # --- from the event loop ------------------------------------------------------------------

    def submit(self, what: str, op: Callable[[Store], Any]) -> None:
        """Queue a write (retried until it lands)."""
        with self._cond:
            if len(self._queue) - int(self._busy) >= self._max:
                # The oldest waiting write goes (never the one in flight, never a question being awaited).
                first = int(self._busy)
                victim = next((i for i in range(first, len(self._queue)) if self._queue[i][2] is None), None)
                if victim is not None:
                    lost = self._queue[victim][0]
                    del self._queue[victim]
                    self.dropped += 1
                    logger.error("RECORDS LOST: write queue full ({} pending); dropped the oldest write ({})",
                                 self._max, lost)
            self._queue.append((what, op, None))
            self._cond.notify()

    def call(self, what: str, op: Callable[[Store], Any]) -> asyncio.Future:
        """Run ``op`` on the writer thread once (no retry); await the result."""
        fut: Future = Future()
        with self._cond:
            self._queue.append((what, op, fut))
            self._cond.notify()
        return asyncio.wrap_future(fut)

    @property
    def pending(self) -> int:
        return len(self._queue) + int(self._busy)

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until every queued write landed (True) or the timeout passed (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 10.0) -> None:
        flushed = self.flush(timeout)
        if not flushed:
            logger.error("RECORDS LOST: {} write(s) still pending at shutdown (database unreachable?)", self.pending)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=2.0)

    # --- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        delay = 0.1
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue and self._stopping:
                    return
                what, op, fut = self._queue[0]
                self._busy = True
            try:
                result = op(self.store)
            except Exception as e:  # noqa: BLE001 - any database error: keep the write, retry
                with self._cond:
                    self._busy = False
                    if fut is not None:  # a question waits for an answer: fail it, don't retry
                        self._queue.popleft()
                        fut.set_exception(e)
                        self._cond.notify_all()
                        continue
                    if self._stopping:
                        return
                if not self.outage:
                    logger.error("RECORDS DATABASE FAILING ({}: {}); keeping {} write(s) in memory and retrying",
                                 type(e).__name__, str(e).splitlines()[0][:200], len(self._queue))
                self.outage = True
                self.failures += 1
                time.sleep(delay)
                delay = min(delay * 2, self._retry_max)
                continue
            with self._cond:
                self._queue.popleft()
                self._busy = False
                self._cond.notify_all()
            if fut is not None:
                fut.set_result(result)
            if self.outage:
                logger.warning("records database back; {} write(s) pending", len(self._queue))
                self.outage = False
            delay = 0.1
