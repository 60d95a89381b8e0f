"""Staff accounts of the desk (docs/desk.md), on the records database.

    run_bot.py staff add kim --role department --department dept-road   # password from stdin
    run_bot.py staff list
    run_bot.py staff disable kim          # its sessions end at once; the audit trail keeps the name
    run_bot.py staff enable kim
    run_bot.py staff password kim         # a new password from stdin; its sessions end
    run_bot.py staff token kim [--revoke] # a new API token for the city's systems, shown once
    run_bot.py desk                       # the desk alone on desk_port (a host apart from the bot workers)

A password is read from stdin (typed twice on a terminal, without echo), never from an argument:
arguments are visible to every user of the machine in the process list.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TextIO

from bot.config import Config

# The parser is built for every command: the desk's modules (argon2, SQLAlchemy) load only when used.


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["add", "list", "disable", "enable", "password", "token"])
    p.add_argument("name", nargs="?", help="the account's username (lowercase letters, digits, . _ -)")
    p.add_argument("--role", default=None, help="with add: agent, department or admin")
    p.add_argument("--department", default=None, help="with add --role department: a directory.toml id (dept-road)")
    p.add_argument("--revoke", action="store_true", help="with token: remove the account's API token")


def read_password(stdin: TextIO) -> str:
    """The password: from a terminal twice without echo, else the first line of stdin."""
    from bot.desk.auth import AccountError

    if stdin.isatty():
        first = getpass.getpass("password: ")
        if getpass.getpass("again: ") != first:
            raise AccountError("the two passwords differ")
        return first
    line = stdin.readline()
    return line[:-1] if line.endswith("\n") else line


def run_staff(config: Config, args, stdin: TextIO = sys.stdin, out: TextIO = sys.stdout,
              err: TextIO = sys.stderr) -> int:
    from bot.desk.auth import AccountError, check_account, check_password, hash_password, new_api_token
    from bot.desk.departments import Routing
    from bot.store.db import StoreError, open_store
    from bot.tools.table import table

    if args.action != "list" and not args.name:
        err.write(f"error: staff {args.action} needs the account's username\n")
        return 2
    name = (args.name or "").strip().lower()
    store = open_store(config)
    try:
        if args.action == "list":
            rows = store.list_staff()
            out.write(table(["username", "role", "department", "active", "API token", "last login (UTC)"],
                            ([a["username"], a["role"], a["department"], "yes" if a["active"] else "no",
                              "yes" if a["api_token_hash"] else None,
                              f"{a['last_login_at']:%Y-%m-%d %H:%M}" if a["last_login_at"] else None] for a in rows)))
            out.write(f"{len(rows)} account(s)\n")
        elif args.action == "add":
            routing = Routing.load(config)
            check_account(name, args.role or "", args.department, routing.department_names)
            password = read_password(stdin)
            check_password(name, password)
            store.add_staff(name, role=args.role, department=args.department, password_hash=hash_password(password))
            out.write(f"added {name} ({args.role}{' ' + args.department if args.department else ''})\n")
        elif args.action in ("disable", "enable"):
            store.update_staff(name, active=args.action == "enable", end_sessions=True)
            out.write(f"{name}: {args.action}d\n")
        elif args.action == "password":
            password = read_password(stdin)
            check_password(name, password)
            store.update_staff(name, password_hash=hash_password(password), end_sessions=True)
            out.write(f"{name}: new password set; its sessions ended\n")
        elif args.action == "token":
            if args.revoke:
                store.update_staff(name, api_token_hash=None)
                out.write(f"{name}: API token revoked\n")
            else:
                token, digest = new_api_token()
                store.update_staff(name, api_token_hash=digest)
                err.write(f"{name}: a new API token (shown once; send it as 'Authorization: Bearer ...'):\n")
                out.write(token + "\n")
    except (AccountError, StoreError, ValueError) as e:  # ValueError: a departments.toml that does not fit
        err.write(f"error: {e}\n")
        return 2
    finally:
        store.close()
    return 0


def serve_desk(config: Config, port: int, host: str) -> int:
    """The desk alone (uvicorn): the same pages on the same records database as the bot's workers.

    Behind a proxy on another host, list it in ``server.forwarded_allow_ips`` (the login limits key on
    the client address); uvicorn's log lines are masked like every other (``bot.privacy``).
    """
    import uvicorn

    from bot.app.serve import trusted_proxies, uvicorn_config
    from bot.config import Secrets
    from bot.desk.app import desk_app
    from bot.recording.files import private_umask
    from bot.store.db import open_store

    private_umask()  # what the desk writes (the SQLite records) is its user's only, as the workers'
    trusted_proxies(config)
    secrets = Secrets.from_env(config)
    store = open_store(config, secrets)
    try:
        app = desk_app(config, secrets, store)
        uvicorn.Server(uvicorn_config(app, config, host=host, port=port)).run()
    finally:
        store.close()
    return 0
