"""The Redis cache backend keeps one redis-py client per connection pool and still works, and counts
rate-limit hits in one round trip."""

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


def test_count_adds_one_per_call_to_a_counter_that_lives_for_its_timeout() -> None:
    backend = RedisCache(REDIS, {"KEY_PREFIX": "test-cache-count"})
    backend.delete("hits")
    assert [backend.count("hits", 30) for _ in range(3)] == [1, 2, 3]
    assert backend.get("hits") == 3  # an integer Django's own get and incr read
    ttl = backend._cache.get_client().ttl(backend.make_and_validate_key("hits"))
    assert 0 < ttl <= 30
    backend.delete("hits")
    assert backend.count("hits", 30) == 1
    backend.delete("hits")
