"""``latency.png``: CDFs of voice-to-voice and the caller's time to first audio."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bot.telemetry.latency import STAGES
from bot.tools.bench.runner import RunResult
from bot.tools.bench.stats import RunStats


def _cdf(values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Step coordinates of an empirical CDF, starting at 0 (values clipped to 1 ms for the log axis)."""
    xs = np.sort(np.maximum(1.0, np.asarray(values, dtype=float)))
    return np.r_[xs[0], xs], np.r_[0.0, np.arange(1, xs.size + 1) / xs.size]


def plot_cdfs(runs: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(13, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"ours": "-", "stock": "--"}
    for run in runs:
        st = RunStats.of(run)
        ls = styles.get(run.system, ":")
        for i, (name, *_) in enumerate(STAGES):
            vals = [r.stages_ms()[name] for r in st.records if name in r.stages_ms()]
            if vals:
                ax.step(*_cdf(vals), where="post", ls=ls, color=colors[i % len(colors)],
                        label=f"{name} ({run.system}, n={len(vals)})")
        if st.caller_ttfa:
            ax.step(*_cdf(st.caller_ttfa), where="post", ls=ls, color="black", lw=2.5,
                    label=f"caller TTFA ({run.system}, n={len(st.caller_ttfa)})")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log scale)")
    ax.set_ylabel("fraction of turns")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Per-stage latency CDFs (server records) and caller-side time to first audio")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
