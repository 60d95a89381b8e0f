"""bot/testing/lab.py: a lab stops what it started, in reverse, whether its start failed or it ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.testing.lab import Lab


class Parts(Lab):
    def __init__(self, work_dir: Path | None = None, fail_at: int | None = None):
        super().__init__(work_dir)
        self.fail_at = fail_at
        self.log: list[str] = []

    def _start_parts(self) -> None:
        for i in range(3):
            if i == self.fail_at:
                raise RuntimeError(f"part {i} did not start")
            self.log.append(f"start {i}")
            self._stack.callback(self.log.append, f"stop {i}")


def test_the_exit_stops_every_part_in_reverse_and_removes_the_temporary_work_dir():
    with Parts() as lab:
        work = lab.work
        assert work.is_dir() and lab.log == ["start 0", "start 1", "start 2"]
    assert lab.log[3:] == ["stop 2", "stop 1", "stop 0"]
    assert not work.exists()


def test_a_part_that_fails_to_start_stops_those_started_before_it():
    lab = Parts(fail_at=2)
    with pytest.raises(RuntimeError, match="part 2"), lab:
        pass
    assert lab.log == ["start 0", "start 1", "stop 1", "stop 0"]
    assert not lab.work.exists()


def test_a_given_work_dir_is_made_and_kept(tmp_path):
    with Parts(tmp_path / "kept" / "work") as lab:
        pass
    assert lab.work == tmp_path / "kept" / "work" and lab.work.is_dir()
