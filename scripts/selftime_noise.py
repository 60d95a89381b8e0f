"""The noise of the startup self-timing: N starts of one unchanged config, each a fresh process that loads
the config's models and times them as ``serve`` does at warm-up (``bot.ops.selftime.measure``), and which
of the ordered pairs each rule would call "much slower" (docs/regressions.md).

    .venv/bin/python scripts/selftime_noise.py [N] [--config PATH]     # N = 7 by default
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_START = r"""
import json, os, sys
from bot.config import load_config
from bot.modelfiles.manifest import resolve_whisper_model
from bot.ops.selftime import measure
from bot.stages.supertonic import SupertonicEngine
from bot.stages.whisper import WhisperEngine

c = load_config(sys.argv[1] or None)
tts = SupertonicEngine(c.tts, base_dir=c.base_dir)
whisper = WhisperEngine(c.stt, resolve_whisper_model(c.stt, c.base_dir))
print(json.dumps({**measure(tts, whisper, voice=c.tts.voice), "load1": round(os.getloadavg()[0], 1)}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("starts", nargs="?", type=int, default=7)
    parser.add_argument("--config", default="")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bot.config import load_config
    from bot.ops.selftime import noise_rule
    from bot.telemetry.noise import LOADED_CPU, ONE_MACHINE, Noise

    starts = []
    for _ in range(args.starts):
        out = subprocess.run([sys.executable, "-c", ONE_START, args.config], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
        if out.returncode != 0:
            print(out.stderr[-2000:], file=sys.stderr)
            return 1
        starts.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(starts[-1]), flush=True)
    config = load_config(args.config or None)
    rules = {"this config's": noise_rule(config), "one machine (bench)": ONE_MACHINE, "loaded CPU (perf gate)": LOADED_CPU,
             "latency.startup_*": Noise(config.latency.startup_slowdown, config.latency.startup_slower_ms)}  # fmt: skip
    for stage in ("stt_ms", "tts_ms"):
        values = [s[stage] for s in starts]
        print(f"{stage}: {min(values)}-{max(values)} ms over {len(values)} starts")
        for name, rule in rules.items():
            alarms = sum(rule.slower(now, before) for now, before in itertools.permutations(values, 2))
            print(f"  x{rule.ratio:g} and +{rule.min_ms:g} ms ({name}): {alarms} of "
                  f"{len(values) * (len(values) - 1)} ordered pairs much slower")
    return 0


if __name__ == "__main__":
    sys.exit(main())
