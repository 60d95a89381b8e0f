#!/usr/bin/env python3
"""The weekdays a year the line is closed all day: Korea's public holidays plus config's extra closed days.

Reads the ``[line]`` section of the config (hours, breaks, timezone, extra_closed_days).

    python scripts/closed_days.py            # this year in the line's time zone
    python scripts/closed_days.py 2027 --config config.gpu.toml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import ConfigError, load_config  # noqa: E402
from bot.dialog.calendar import KO_DAYS, CalendarError, LineCalendar  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("year", type=int, nargs="?", help="default: this year in the line's time zone")
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = parser.parse_args()
    try:
        cal = LineCalendar.from_config(load_config(args.config, args.overrides).line)
    except (ConfigError, CalendarError) as e:
        print(f"config error: {e}", file=sys.stderr)
        return 1
    year = args.year or cal.now().year
    days = cal.closed_days(year)
    print(f"# {year}: {cal.hours_phrase()}")
    for day, name in days:
        print(f"{day.isoformat()} {KO_DAYS[day.weekday()][0]} {name}")
    print(f"# {len(days)} weekdays closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
