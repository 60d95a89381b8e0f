"""The desk page tests hash passwords at Argon2id's lowest cost (the login limiter's own tests do not)."""

import pytest


@pytest.fixture
def cheap_argon2(request, monkeypatch):
    """Argon2id at its lowest cost for the page tests (each hash is ~0.12 s at the production cost);
    the test of the hashes themselves keeps the production parameters."""
    if request.node.name.startswith("test_passwords_are_argon2id"):
        yield
        return
    from argon2 import PasswordHasher

    from bot.desk import auth

    monkeypatch.setattr(auth, "_hasher", PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))
    auth._dummy_hash.cache_clear()
    yield
    auth._dummy_hash.cache_clear()

