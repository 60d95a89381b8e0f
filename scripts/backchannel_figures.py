"""Figures for backchannels over the bot (issue 26): a scripted call, 10 backchannels and 5 barge-ins.

    python scripts/backchannel_figures.py [--stt-delay-ms 150 300] [--barge-in-secs 0.7] [--config P] [--set K=V]

The call of ``bot/testing/backchannel_call.py`` against the product server in the test lab
(``python -m bot.testing.lab_server`` with the fixed-delay STT: the words of each sound are the
script's, after the given delay, so the figures are the turn-taking's, not this machine's Whisper),
the configured TTS (or the stand-in), a fake vLLM whose every answer is a long reply. Printed per
STT delay: replies lost to a backchannel, barge-ins honoured, caller-side time from a barge-in's
first speech to the bot going quiet (its ``clear``), the longest pause of a reply around a
backchannel. A benchmark: it prints and exits 0 whatever the figures (1 if the lab could not run).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stt-delay-ms", type=float, nargs="+", default=[150.0, 300.0])
    parser.add_argument("--barge-in-secs", type=float, default=None, help="turn.barge_in_secs (default: the config's)")
    parser.add_argument("--config", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)

    from bot.config import load_cli_config
    from bot.testing.backchannel_call import BackchannelLab

    overrides = list(args.overrides)
    if args.barge_in_secs is not None:
        overrides.append(f"turn.barge_in_secs={args.barge_in_secs}")
    config = load_cli_config(args.config, overrides)
    if config is None:
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for delay in args.stt_delay_ms:
            work = Path(tmp) / f"stt-{delay:.0f}"
            sets = [*overrides, f"records.url='sqlite:///{work / 'calls.db'}'"]
            work.mkdir(parents=True)
            try:
                with BackchannelLab(sets, work, stt_delay_ms=delay, config_path=args.config,
                                    verbose=args.verbose) as lab:
                    figures = asyncio.run(lab.run(config.turn.barge_in_secs))
            except Exception as e:  # the lab, not the figures
                print(f"error: the lab could not run ({type(e).__name__}: {e}); log: {work / 'bot.log'}",
                      file=sys.stderr)
                return 1
            print(figures.render(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
