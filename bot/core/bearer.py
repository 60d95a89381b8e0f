"""The bearer header of the line's token-guarded API (the records API, ``RECORDS_API_TOKEN``).

One spelling for the server's check and its clients. It lives down here so that a client (the
test lab, the bench, ``run_bot.py call``) need not import the server: a first import of the app in
the middle of a run blocked the caller's event loop 0.5-2.5 s, a gap in every call it was hearing.
"""

from __future__ import annotations


def bearer_header(token: str | None) -> dict[str, str]:
    """The header that carries the token; none without a token."""
    return {"Authorization": f"Bearer {token}"} if token else {}
