"""The desk's login limits under attack (issue 35): bursts, memory, a shared proxy address, forwarded addresses.

Each test is an attack from the abuse probe, run in-process against the desk alone (httpx's ASGI
transport: many logins at once in one event loop, a chosen client address per client). Argon2id runs
at its lowest cost, its ``verify`` held ``CHECK_SECS`` so that checks overlap as they do at the
production cost (64 MiB and ~0.1 s each); the hasher counts how many run at once.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from argon2 import PasswordHasher

from bot.core.errors import StartupError
from bot.desk import auth
from bot.desk.app import desk_app
from bot.desk.auth import LoginLimiter, PasswordChecks
from bot.testing.desk_fixtures import PASSWORD, csrf_of, desk_config, open_db, secrets_with_key, seed

CHECK_SECS = 0.1


class CountingHasher(PasswordHasher):
    """Argon2id at its lowest cost; each verify takes CHECK_SECS and is counted (at once, peak, in all)."""

    def __init__(self):
        super().__init__(time_cost=1, memory_cost=8, parallelism=1)
        self._lock = threading.Lock()
        self.running = self.peak = self.calls = 0

    def verify(self, hash, password):
        with self._lock:
            self.running += 1
            self.calls += 1
            self.peak = max(self.peak, self.running)
        try:
            time.sleep(CHECK_SECS)
            return super().verify(hash, password)
        finally:
            with self._lock:
                self.running -= 1


@pytest.fixture
def hasher(monkeypatch):
    h = CountingHasher()
    monkeypatch.setattr(auth, "_hasher", h)
    auth._dummy_hash.cache_clear()
    yield h
    auth._dummy_hash.cache_clear()


@pytest.fixture
def make_desk(tmp_path, hasher):
    """A desk app on a seeded SQLite database, with config overrides."""
    stores = []

    def make(*overrides: str, wrap=None):
        url = f"sqlite:///{tmp_path / f'calls{len(stores)}.db'}"
        store = open_db(url)
        stores.append(store)
        seed(store)
        config = desk_config(url, *overrides)
        app = desk_app(config, secrets_with_key(), store)
        return (wrap(app, config) if wrap else app), config

    yield make
    for s in stores:
        s.close()


def browser(app, address: str, headers: dict | None = None) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://desk.test", headers=headers or {})


async def login_form(client: httpx.AsyncClient) -> tuple[str, str]:
    """One login form's CSRF token and login cookie, which an attacker replays on every try."""
    form = await client.get("/desk/login")
    assert form.status_code == 200
    return csrf_of(form.text), form.cookies["desk_login"]


async def post_login(client: httpx.AsyncClient, form: tuple[str, str], username: str, password: str,
                     ) -> httpx.Response:
    token, cookie = form
    return await client.post("/desk/login", data={"username": username, "password": password, "csrf_token": token},
                             headers={"Cookie": f"desk_login={cookie}"})


async def login(client: httpx.AsyncClient, username: str, password: str = PASSWORD) -> httpx.Response:
    """A browser's login: the form, then the post with every cookie it holds (a device cookie too)."""
    token, _ = await login_form(client)
    return await client.post("/desk/login", data={"username": username, "password": password, "csrf_token": token})


def codes(responses) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in responses:
        out[r.status_code] = out.get(r.status_code, 0) + 1
    return out


# --- bursts: counted before the check, a bounded number of checks at once ----------------------------


def test_thirty_wrong_passwords_at_once_for_one_account_get_at_most_the_limit_of_checks(make_desk, hasher):
    """Seen before: 30 x 401, no 429 (the limit 5 was checked before any failure was counted)."""
    app, config = make_desk()

    async def attack():
        async with browser(app, "10.0.0.66") as c:
            form = await login_form(c)
            return await asyncio.gather(*[post_login(c, form, "agent1", f"wrong-password-{i}") for i in range(30)])

    got = codes(asyncio.run(attack()))
    assert got == {401: config.desk.login_attempts, 429: 30 - config.desk.login_attempts}, got
    assert hasher.calls == config.desk.login_attempts  # the refused ones never reached argon2


def test_a_burst_of_logins_runs_a_bounded_number_of_password_checks_at_once(make_desk, hasher):
    """40 logins at once, each from its own address and name: at most desk.login_checks argon2 checks run
    together (each holds 64 MiB at the production cost); the rest wait for a check or get 429, never 500."""
    app, config = make_desk("desk.login_queue_secs=0.25")

    async def one(i: int):
        async with browser(app, f"10.1.{i}.1") as c:
            return await login(c, f"nobody{i}", "wrong-password-1")

    async def burst():
        return await asyncio.gather(*[one(i) for i in range(40)])

    got = codes(asyncio.run(burst()))
    assert hasher.peak <= config.desk.login_checks, hasher.peak
    assert set(got) <= {401, 429} and got.get(429, 0) > 0, got  # 40 x 0.1 s of checks do not fit in 0.25 s


def test_one_address_cannot_take_every_password_check():
    checks = PasswordChecks(4)
    assert [checks.try_acquire("a") for _ in range(3)] == [True, True, False]  # two per address
    assert checks.try_acquire("b") and checks.try_acquire("b") and not checks.try_acquire("c")  # four in all
    checks.release("a")
    assert checks.try_acquire("c") and not checks.try_acquire("a")


def test_a_login_refused_for_lack_of_a_free_check_does_not_count_as_a_failure():
    limiter = LoginLimiter(attempts=2, window_secs=60)
    for _ in range(5):
        limiter.withdraw(limiter.admit("kim", "10.0.0.1"))
    assert not limiter.admit("kim", "10.0.0.1").refused


# --- a shared proxy address: slowed, never locked out for everyone ------------------------------------------


def test_names_sprayed_from_a_shared_address_slow_a_right_password_from_it_but_never_refuse_it(make_desk):
    """Seen before: 20 failures with invented names from the proxy's address, then the admin's right
    password from that address: 429 for 15 minutes."""
    app, config = make_desk("desk.login_max_delay_secs=0.3")

    async def scenario():
        async with browser(app, "10.0.0.250") as attacker:
            form = await login_form(attacker)
            sprayed = [await post_login(attacker, form, f"guess{i}", "wrong-password-1") for i in range(20)]
        async with browser(app, "10.0.0.250") as admin:
            t0 = time.monotonic()
            ok = await login(admin, "admin1")
            return sprayed, ok, time.monotonic() - t0

    sprayed, ok, waited = asyncio.run(scenario())
    assert {r.status_code for r in sprayed} == {401}  # each invented name is checked (slowly)
    assert ok.status_code == 303 and ok.headers["location"] == "/desk/tickets"
    assert waited >= config.desk.login_max_delay_secs  # slowed by the address's failures


def test_an_account_guessed_on_a_shared_address_still_opens_to_a_browser_that_logged_in_before(make_desk):
    """Someone on the proxy's address fails the admin's password until it is refused there; the admin's
    own browser (its device cookie from an earlier login) is not refused; a new browser there is, until the
    window ends (docs/desk.md)."""
    app, config = make_desk()

    async def scenario():
        async with browser(app, "10.0.0.250") as admin:
            assert (await login(admin, "admin1")).status_code == 303
            assert "desk_device" in admin.cookies
            admin.cookies.delete("desk_session")
            async with browser(app, "10.0.0.250") as attacker:
                form = await login_form(attacker)
                tries = [await post_login(attacker, form, "admin1", f"wrong-password-{i}") for i in range(7)]
            async with browser(app, "10.0.0.250") as new_browser:
                fresh = await login(new_browser, "admin1")
            again = await login(admin, "admin1")
            return tries, fresh, again

    tries, fresh, again = asyncio.run(scenario())
    n = config.desk.login_attempts
    assert [r.status_code for r in tries] == [401] * n + [429] * (7 - n)
    assert int(tries[-1].headers["Retry-After"]) > 0
    assert fresh.status_code == 429
    assert again.status_code == 303


def test_a_device_cookie_of_another_account_or_forged_gives_nothing():
    signer = auth.Signer("k" * 40)
    cookie = signer.device_cookie("kim")
    assert signer.read_device(cookie, "kim")
    assert signer.read_device(cookie, "lee") is None
    assert signer.read_device(cookie[:-2] + "xx", "kim") is None
    assert signer.read_device(auth.Signer("j" * 40).device_cookie("kim"), "kim") is None


def test_a_guess_spread_over_many_addresses_gets_one_try_per_address(make_desk):
    """Per account: after login_attempts x 4 failures from anywhere, an address that failed it is refused
    (before, each address had its own five); an address that never failed it is still checked."""
    app, config = make_desk()
    spread = config.desk.login_attempts * 4

    async def scenario():
        first = []
        for i in range(spread):
            async with browser(app, f"172.16.0.{i + 1}") as c:
                first.append(await login(c, "agent1", "wrong-password-1"))
        async with browser(app, "172.16.0.1") as c:
            again = await login(c, "agent1", PASSWORD)
        async with browser(app, "192.168.7.7") as c:
            clean = await login(c, "agent1", PASSWORD)
        return first, again, clean

    first, again, clean = asyncio.run(scenario())
    assert {r.status_code for r in first} == {401}
    assert again.status_code == 429
    assert clean.status_code == 303


def test_the_limiter_rules_by_the_clock():
    now = [0.0]
    limiter = LoginLimiter(attempts=2, window_secs=60, per_address_factor=2, max_delay_secs=4, clock=lambda: now[0])
    a1, a2 = limiter.admit("kim", "ip"), limiter.admit("kim", "ip")
    assert not a1.refused and not a2.refused and a1.delay == a2.delay == 0
    assert limiter.admit("kim", "ip").refused  # counted before any check: the third is refused
    assert not limiter.admit("kim", "other-ip").refused
    delays = [limiter.admit(f"name{i}", "ip").delay for i in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]  # the address is slowed, never refused
    ok = limiter.admit("lee", "ip")
    limiter.succeeded(ok)
    assert not limiter.admit("kim", "ip", device="browser-1").refused  # kim's own browser
    assert limiter.admit("kim", "ip", device="browser-1").delay == 0
    now[0] = 61.0
    assert not limiter.admit("kim", "ip").refused  # the window has passed


# --- the address the limits see: X-Forwarded-For from the configured proxies only --------------------------


def _behind_uvicorn(app, config):
    from bot.app.serve import uvicorn_config

    cfg = uvicorn_config(app, config, host="127.0.0.1", port=0)
    cfg.load()
    return cfg.loaded_app  # the desk behind uvicorn's proxy-headers middleware, as served


def test_behind_a_configured_proxy_each_client_has_its_own_address(make_desk):
    """Seen before: uvicorn believed X-Forwarded-For from 127.0.0.1 only, so behind a proxy on another host
    every staff member had the proxy's address and one attacker's failures refused them all."""
    app, config = make_desk("server.forwarded_allow_ips=['10.9.0.0/16']", wrap=_behind_uvicorn)
    assert config.server.forwarded_allow_ips == ["10.9.0.0/16"]

    async def scenario():
        async with browser(app, "10.9.0.1", {"X-Forwarded-For": "203.0.113.5"}) as attacker:
            form = await login_form(attacker)
            tries = [await post_login(attacker, form, "agent1", "wrong-password-1") for _ in range(6)]
        async with browser(app, "10.9.0.1", {"X-Forwarded-For": "198.51.100.7"}) as staff:
            ok = await login(staff, "agent1")
        async with browser(app, "203.0.113.99", {"X-Forwarded-For": "198.51.100.7"}) as spoofer:
            spoofed = [await login(spoofer, "agent1", "wrong-password-1") for _ in range(6)]
        return tries, ok, spoofed

    tries, ok, spoofed = asyncio.run(scenario())
    assert tries[-1].status_code == 429 and ok.status_code == 303
    # A peer that is not a listed proxy cannot choose its address: its own failures refuse it.
    assert spoofed[-1].status_code == 429


def test_without_the_proxy_listed_everyone_behind_it_shares_its_address(make_desk):
    app, _ = make_desk(wrap=_behind_uvicorn)  # default: 127.0.0.1 and ::1 only

    async def scenario():
        async with browser(app, "10.9.0.1", {"X-Forwarded-For": "203.0.113.5"}) as attacker:
            form = await login_form(attacker)
            for _ in range(5):
                await post_login(attacker, form, "agent1", "wrong-password-1")
        async with browser(app, "10.9.0.1", {"X-Forwarded-For": "198.51.100.7"}) as staff:
            return await login(staff, "agent1")

    assert asyncio.run(scenario()).status_code == 429


def test_a_proxy_entry_that_is_no_address_stops_startup_naming_the_key():
    from bot.app.serve import trusted_proxies
    from bot.config import load_config

    for bad in ("'*'", "'proxy.example.org'"):
        with pytest.raises(StartupError, match="server.forwarded_allow_ips"):
            trusted_proxies(load_config(overrides=[f"server.forwarded_allow_ips=[{bad}]"]))
    assert trusted_proxies(load_config(overrides=["server.forwarded_allow_ips=['10.0.0.0/8', '::1']"]))
