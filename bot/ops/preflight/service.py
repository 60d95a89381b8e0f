"""The service around the calls: who can read what, the desk's calendar, the last start's self-timing."""

from __future__ import annotations

import socket

from bot.config import Config, Secrets
from bot.ops.preflight.report import FAIL, OK, SKIP, WARN, CheckReport


def access_rows(report: CheckReport, config: Config, secrets: Secrets) -> None:
    """Who can read what: the records API and the operations listener (never citizens' data in the open)."""
    if secrets.records_api_token:
        report.add("access", "records API", OK, "/api/turns needs Authorization: Bearer $RECORDS_API_TOKEN")
    else:
        report.add("access", "records API", OK, "off: /api/turns answers 404 (set env RECORDS_API_TOKEN to read "
                   "turn records over HTTP: bench --url, call)")
    host, port = config.server.admin_host, config.server.admin_port
    if port == config.server.port and host in (config.server.host, "0.0.0.0"):
        report.add("access", "operations listener", FAIL, f"server.admin_port {port} is the public port: "
                   "/metrics and /readyz must not share the public listener")
    else:
        where = "this machine only" if host in ("127.0.0.1", "localhost", "::1") else \
            "bound beyond loopback: keep it off the Ingress/public firewall"
        report.add("access", "operations listener", OK, f"http://{host}:{port} (/metrics, /readyz, /healthz "
                   f"figures): {where}")


def line_rows(report: CheckReport, config: Config) -> None:
    """The desk's calendar: a bad hours spec fails here, by key; the year's closed days are counted."""
    from bot.dialog.calendar import LineCalendar

    try:
        cal = LineCalendar.from_config(config.line)
    except ValueError as e:
        report.add("line", "hours", FAIL, str(e))
        return
    now = cal.now()
    state = "open now" if cal.is_open(now) else f"closed now, opens {cal.opening_phrase(now).removesuffix('에')}"
    report.add("line", "hours", OK, f"{cal.hours_phrase()} ({config.line.timezone}); {state}")
    closed = cal.closed_days(now.year)
    desk = "transfers to the desk in hours" if config.call.transfer_number else "no desk (call.transfer_number empty)"
    report.add("line", "closed days", OK, f"{len(closed)} weekdays in {now.year} (Korea's public holidays"
               f"{' + ' + str(len(config.line.extra_closed_days)) + ' extra' if config.line.extra_closed_days else ''}); {desk}")


def timing_row(report: CheckReport, config: Config, secrets: Secrets) -> None:
    """The last start's self-timing on this host and config (bot/ops/selftime.py), from the records database."""
    from bot.ops.selftime import config_key
    from bot.store.db import open_store

    if not config.records.enabled:
        report.add("timing", "startup self-timing", SKIP, "records.enabled = false: nothing recorded")
        return
    try:
        store = open_store(config, secrets)
    except Exception as e:  # noqa: BLE001 - shown as a row, not raised
        report.add("timing", "startup self-timing", SKIP, f"records database unreachable: {e}")
        return
    try:
        last, good = store.latest_timing(socket.gethostname(), config_key(config))
    finally:
        store.close()
    if last is None:
        report.add("timing", "startup self-timing", SKIP, "no start recorded yet on this host and config")
        return
    figs = ", ".join(f"{k} {v:.0f} ms" for k, v in last["figures"].items())
    when = f"{last['measured_at']:%Y-%m-%d %H:%M} UTC"
    if last["good"]:
        report.add("timing", "startup self-timing", OK, f"last start {when}: {figs}")
    else:
        before = ", ".join(f"{k} {v:.0f} ms" for k, v in (good or {}).items())
        report.add("timing", "startup self-timing", WARN, f"last start {when} was MUCH SLOWER than the last good "
                   f"one: {figs} (last good: {before})")
