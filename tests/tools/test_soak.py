"""The soak's verdict (bot/tools/soak.py): only samples after the post-warm-up baseline are held to it."""

from __future__ import annotations

from bot.tools.soak import Sample, SoakResult


def sample(phase: str, tasks: int, rss_mb: float = 800.0, failed: int = 0) -> Sample:
    return Sample(phase, 0, rss_mb, tasks, 24, 6, failed, 1.0)


def judged(*samples: Sample, baseline: int) -> SoakResult:
    result = SoakResult(list(samples), samples[baseline])
    result.judge()
    return result


def test_the_start_before_the_warm_up_is_not_held_to_the_baseline():
    # A process that served other calls first may still be closing one of their tasks at the start.
    result = judged(sample("start", 8), sample("warm-up: at once", 9), sample("baseline", 7), sample("round 1", 7),
                    baseline=2)
    assert result.ok, result.problems


def test_a_task_left_after_the_baseline_is_a_problem():
    result = judged(sample("start", 7), sample("baseline", 7), sample("round 1", 8), baseline=1)
    assert result.problems == ["round 1: 8 asyncio tasks, baseline 7"]


def test_a_failed_call_counts_in_any_phase():
    result = judged(sample("warm-up", 7, failed=1), sample("baseline", 7), baseline=1)
    assert result.problems == ["warm-up: 1 call(s) failed"]
