"""A lab: the fakes and bot processes a tool or test starts, stopped in reverse order when it ends."""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Self


class Lab:
    """``with SomeLab(...) as lab:``: ``_start_parts`` starts the parts, each entered or given a stop
    on ``self._stack``; a part that fails to start stops those started before it, and the exit stops all.

    ``self.work`` is ``work_dir`` (made if missing), or a temporary directory removed at the exit.
    """

    def __init__(self, work_dir: Path | str | None = None):
        self._stack = ExitStack()
        self.work = Path(work_dir) if work_dir else Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        self.work.mkdir(parents=True, exist_ok=True)

    def _start_parts(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self._start_parts()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
