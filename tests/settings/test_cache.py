"""The Redis cache backend keeps one redis-py client per connection pool and still works."""

from __future__ import annotations

from bountysite.cache import RedisCache

REDIS = "redis://127.0.0.1:6379/15"


def test_every_cache_call_shares_one_client_per_pool() -> None:
    backend = RedisCache(REDIS, {})
    client = backend._cache.get_client()
    assert backend._cache.get_client() is client
    assert backend._cache.get_client(write=True) is client  # one server: reads and writes share a pool


def test_the_shared_client_reads_what_it_wrote() -> None:
    backend = RedisCache(REDIS, {"KEY_PREFIX": "test-cache-backend"})
    backend.set_many({"a": b"body", "b": 7}, 30)
    assert backend.get_many(["a", "b", "missing"]) == {"a": b"body", "b": 7}
    backend.delete_many(["a", "b"])
    assert backend.get("a") is None
