"""Signed stream tokens and the line's shared state (bot/line/tokens.py, bot/line/admission.py), on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa

from bot.line import admission as line
from bot.line.tokens import StreamTokens, TokenRefused, load_key
from bot.store.db import Store
from bot.store.schema import calls, stream_tokens, workers

KEY = b"k" * 32


class Clock:
    def __init__(self, t: float = 1_900_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_token_checks_on_any_worker_with_the_same_key_and_nowhere_else():
    clock = Clock()
    a, b = StreamTokens(60, KEY, clock=clock), StreamTokens(60, KEY, clock=clock)
    issued = a.issue("CA1")
    assert len(issued.token) >= 20 and "CA1" not in issued.token.split(".")[0]
    assert b.verify(issued.token, "CA1").token_id == issued.token_id
    with pytest.raises(TokenRefused, match="another key"):
        StreamTokens(60, b"x" * 32, clock=clock).verify(issued.token, "CA1")
    with pytest.raises(TokenRefused, match="issued for another call"):
        b.verify(issued.token, "CA2")
    clock.t += 62
    with pytest.raises(TokenRefused, match="expired"):
        b.verify(issued.token, "CA1")


@pytest.mark.parametrize("token", [None, "", "forged", "a.b.c.d", "x.1.Q0Ex.AAAA", "a.b.c"])
def test_forged_and_malformed_tokens_are_refused(token):
    tokens = StreamTokens(60, KEY)
    with pytest.raises(TokenRefused):
        tokens.verify(token, "CA1")


def test_tampering_with_the_expiry_or_callsid_breaks_the_signature():
    tokens = StreamTokens(60, KEY)
    token_id, exp, sid, mac = tokens.issue("CA1").token.split(".")
    with pytest.raises(TokenRefused, match="forged"):
        tokens.verify(".".join([token_id, str(int(exp) + 3600), sid, mac]), "CA1")
    other_sid = tokens.issue("CA2").token.split(".")[2]
    with pytest.raises(TokenRefused, match="forged"):
        tokens.verify(".".join([token_id, exp, other_sid, mac]), "CA2")


def test_key_comes_from_the_environment_or_is_random_and_not_shared():
    key, shared = load_key({"STREAM_TOKEN_KEY": "a-shared-key-of-some-length"})
    assert shared and key == b"a-shared-key-of-some-length"
    k1, s1 = load_key({})
    k2, _ = load_key({})
    assert not s1 and k1 != k2
    with pytest.raises(ValueError, match="too short"):
        load_key({"STREAM_TOKEN_KEY": "short"})


# --------------------------------------------------------------------------- the database side


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    s.migrate()
    yield s
    s.close()


def _beat(store, worker, at=None):
    line.heartbeat(store, worker, draining=False, started_at=at or line.now())


def test_single_use_and_the_callers_number_cross_workers(store):
    tokens = StreamTokens(60, KEY)
    issued = tokens.issue("CA-x")
    assert line.admit(store, issued, caller="+821012345678", worker="w1", line_max_calls=0, lease_secs=15) is None
    # The media stream reaches w2: it owns the token and learns the number from the database.
    assert line.redeem(store, issued, worker="w2") == (None, "+821012345678", "w1")
    assert line.redeem(store, issued, worker="w1")[0] == "token already used"
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(stream_tokens)).mappings().one()
    assert row["used_by"] == "w2" and row["issued_by"] == "w1"


def test_a_genuine_token_the_webhook_could_not_record_is_accepted_once(store):
    issued = StreamTokens(60, KEY).issue("CA-y")  # no admit: the database was down at the webhook
    assert line.redeem(store, issued, worker="w2") == (None, None, None)
    assert line.redeem(store, issued, worker="w1")[0] == "token already used"


def test_a_second_webhook_for_a_callsid_is_a_replay_on_any_worker(store):
    tokens = StreamTokens(60, KEY)
    assert line.admit(store, tokens.issue("CA-r"), caller=None, worker="w1", line_max_calls=0, lease_secs=15) is None
    assert line.admit(store, tokens.issue("CA-r"), caller=None, worker="w2", line_max_calls=0,
                      lease_secs=15) == line.REPLAYED


def test_line_limit_counts_live_calls_and_reservations_not_dead_workers(store):
    tokens = StreamTokens(60, KEY)
    t = line.now()
    _beat(store, "live")
    _beat(store, "dead")
    with store.engine.begin() as conn:  # the dead worker's lease ran out 20 s ago
        conn.execute(workers.update().where(workers.c.worker == "dead")
                     .values(heartbeat_at=t - dt.timedelta(seconds=20)))
    for sid, worker in [("CA-1", "live"), ("CA-2", "dead"), ("CA-3", "dead")]:
        store.start_call(sid, caller=None, worker=worker, qa=False, started_at=t)
    store.end_call("CA-3", reason="completed", ended_at=t)

    def admit(sid):
        return line.admit(store, tokens.issue(sid), caller=None, worker="live", line_max_calls=3, lease_secs=15)

    assert admit("CA-4") is None  # 1 live call + this reservation
    assert admit("CA-5") is None  # 1 + 2 reserved
    reason = admit("CA-6")
    assert reason and reason.startswith("line_max_calls") and "1 calls in progress and 2 reserved" in reason
    with store.engine.connect() as conn:
        assert line.count_line_calls(conn, line.now(), 15) == (1, 2)
        # A reservation ends when its call starts (then it counts as a call) or when its token expires.
        store.start_call("CA-4", caller=None, worker="live", qa=False, started_at=t)
        assert line.count_line_calls(conn, line.now(), 15) == (2, 1)
        # Two minutes on the tokens have expired; with a lease that long the 'dead' worker's open call counts too.
        assert line.count_line_calls(conn, line.now() + dt.timedelta(seconds=120), 1000) == (3, 0)
    # The line's calls as /readyz reports them.
    assert line.line_figures(store, 15) == {"line_active_calls": 2, "line_reserved_calls": 1, "line_workers": 1}


def test_eight_workers_admitting_at_once_never_exceed_the_line_limit(db_url):
    stores = [Store(db_url) for _ in range(8)]  # one engine each, like separate worker processes
    stores[0].migrate()
    for i, s in enumerate(stores):
        _beat(s, f"w{i}")
    tokens = StreamTokens(60, KEY)
    results: list[str | None] = [None] * 8
    barrier = threading.Barrier(8)

    def run(i):
        barrier.wait()
        results[i] = line.admit(stores[i], tokens.issue(f"CA-{i}"), caller=None, worker=f"w{i}",
                                line_max_calls=3, lease_secs=15)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert sum(r is None for r in results) == 3, results
        with stores[0].engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(stream_tokens)).scalar_one() == 3
    finally:
        for s in stores:
            s.close()


def test_release_purge_and_leaving_the_line(store):
    tokens = StreamTokens(60, KEY)
    issued = tokens.issue("CA-p")
    line.admit(store, issued, caller=None, worker="w", line_max_calls=0, lease_secs=15)
    line.redeem(store, issued, worker="w")
    line.release(store, issued.token_id)  # refused at the stream: no longer a reservation
    with store.engine.connect() as conn:
        assert line.count_line_calls(conn, line.now(), 15) == (0, 0)
    assert line.purge_tokens(store, older_than_secs=-1) == 1
    _beat(store, "w")
    line.leave(store, "w")
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(workers)).scalar_one() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(calls)).scalar_one() == 0


# --------------------------------------------------------------------------- two apps, one database


def _worker_app(tmp_path, monkeypatch, name: str, *overrides: str):
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from bot.app.server import create_app
    from bot.config import Secrets, load_config

    monkeypatch.setenv("STREAM_TOKEN_KEY", "one-key-for-the-whole-line")
    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=false",
                                    f"records.url='sqlite:///{tmp_path / 'line.db'}'", f"records.worker='{name}'",
                                    *overrides])
    models = SimpleNamespace(tts=SimpleNamespace(session_providers={}, fallback_active=False, is_standin=False),
                             whisper=SimpleNamespace(device="cpu"))
    return TestClient(create_app(config, Secrets("AC" + "0" * 32, "webhook-token", "EMPTY"), models))


def _signed_webhook(client, params):
    from bot.testing.twilio_sim import sign_twilio_request

    signature = sign_twilio_request("https://voice.example.org/twilio/voice", params, "webhook-token")
    return client.post("/twilio/voice", data=params, headers={"X-Twilio-Signature": signature})


def test_a_webhook_replayed_to_another_worker_is_refused(tmp_path, monkeypatch):
    from bot.testing.twilio_sim import voice_webhook_params

    a = _worker_app(tmp_path, monkeypatch, "w-a")
    b = _worker_app(tmp_path, monkeypatch, "w-b")
    params = voice_webhook_params()
    params["From"] = "+821012340000"
    first = _signed_webhook(a, params)
    assert first.status_code == 200 and "<Stream" in first.text and "+821012340000" not in first.text
    assert _signed_webhook(b, params).status_code == 403


def test_the_line_limit_answers_busy_on_any_worker(tmp_path, monkeypatch):
    from bot.testing.twilio_sim import voice_webhook_params

    a = _worker_app(tmp_path, monkeypatch, "w-a", "server.line_max_calls=1")
    b = _worker_app(tmp_path, monkeypatch, "w-b", "server.line_max_calls=1")
    assert "<Stream" in _signed_webhook(a, voice_webhook_params()).text  # a reservation on the line
    busy = _signed_webhook(b, voice_webhook_params())
    assert busy.status_code == 200 and "<Say" in busy.text and "<Stream" not in busy.text


async def test_a_lease_write_cut_by_its_timeout_does_not_stop_the_worker_starting(store, monkeypatch):
    """Below Python 3.12 Pipecat's wait_for2 can report a call that ends as its timeout fires as CancelledError
    (a bench worker's start on a loaded CI machine); the start retries in the heartbeat loop instead of dying."""
    import asyncio

    async def cut(aw, timeout):
        aw.close()
        raise asyncio.CancelledError

    monkeypatch.setattr(line.asyncio, "wait_for", cut)
    here = line.Line(store, worker="w1", line_max_calls=0, lease_secs=30)
    await here.start()  # raised CancelledError before: the worker's lifespan failed
    assert here._task is not None
    with pytest.raises(TimeoutError):
        await here._db("the worker lease", line.heartbeat, "w1", draining=False, started_at=line.now())
    await here.stop()


async def test_cancelling_the_worker_still_cancels_a_lease_write(store, monkeypatch):
    import asyncio

    async def slow(aw, timeout):
        aw.close()
        await asyncio.sleep(10)

    monkeypatch.setattr(line.asyncio, "wait_for", slow)
    here = line.Line(store, worker="w1", line_max_calls=0, lease_secs=30)
    task = asyncio.create_task(here._db("the worker lease", line.heartbeat, "w1", draining=False,
                                        started_at=line.now()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
