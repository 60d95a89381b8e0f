"""When a timing counts as slower than a reference: the bench's noise rule, shared by every judge of speed.

A figure is slower only when it is over ``ratio`` times the reference AND more than ``min_ms`` above it:
a ratio alone flakes on a 30 ms stage (one scheduler hiccup), a margin alone hides a real loss on a 1.5 s
one. The figures behind each rule are in docs/regressions.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noise:
    """``ratio`` times AND ``min_ms`` more than the reference: slower; anything less is noise."""

    ratio: float
    min_ms: float

    def slower(self, now: float, before: float) -> bool:
        return before > 0 and now > before * self.ratio and now - before > self.min_ms


#: Two runs of one config on one machine: ``bench --compare``'s default (7 runs of one config on the 2-core
#: box: 0 false alarms over the 42 ordered pairs; the 600 ms LLM failed against all 7).
ONE_MACHINE = Noise(1.6, 100.0)
#: A CPU machine of the class under other load (CI after the suite, a shared 2-core box): the perf gate's
#: rule (``scripts/perf_gate.sh``), and the startup self-timing's on CPU.
LOADED_CPU = Noise(2.5, 300.0)
