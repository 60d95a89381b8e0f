#!/usr/bin/env python3
"""The weekdays a year the line is closed all day: Korea's public holidays plus config's extra closed days.

Reads the ``[line]`` section of config.toml (hours, breaks, timezone, extra_closed_days); without one,
weekdays 09:00-18:00 with a 12:00-13:00 lunch in Asia/Seoul.

    python scripts/closed_days.py            # this year in the line's time zone
    python scripts/closed_days.py 2027 --config config.gpu.toml
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.dialog.calendar import KO_DAYS, CalendarError, Hours, LineCalendar  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("year", type=int, nargs="?", help="default: this year in the line's time zone")
    parser.add_argument("--config", type=Path, default=ROOT / "config.toml")
    args = parser.parse_args()

    # Read the section itself: only these four keys matter here, not the whole config's validity.
    section = tomllib.loads(args.config.read_text(encoding="utf-8")).get("line", {}) if args.config.exists() else {}
    try:
        cal = LineCalendar(Hours.parse(section.get("hours", ["mon-fri 09:00-18:00"]), section.get("breaks", ["12:00-13:00"])),
                           tz=section.get("timezone", "Asia/Seoul"), extra_closed=section.get("extra_closed_days", []))
    except CalendarError as e:
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
