"""The response cache in Redis holds no pickles, through a real daphne and a real Redis: bodies,
ETags and counts are stored as themselves (bountysite.cache.PlainValues), and a pickle written into
Redis by anyone who can reach it is read as a miss, never run. Without Redis (the dev server, the
SQLite test run) the cache stores values the same way, so what Redis would refuse fails there too."""

from __future__ import annotations

import os
import pickle
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bountysite.cache import LocalCache
from records.models import Deployment
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC, make_bounty
from tests.servers import Server, ThrowawayRedis, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = ("/bounties", "/bounties?limit=1", "/bounties/1", "/bounties/1/overview", "/submissions?limit=5")
PICKLE_HEADER = b"\x80"  # every pickle of protocol 2 and later starts so


@pytest.fixture
def cached(active: Deployment) -> Iterator[tuple[Server, redis.Redis]]:
    make_bounty(active, bounty_id=1)
    make_bounty(active, bounty_id=2)
    with ThrowawayRedis() as store:
        env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": store.url, "BOUNTY_CHAIN_ID": "91342",
               "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
               "BOUNTY_RATE_LIMIT": "1000000"}
        for name in ("BOUNTY_RPC_URL", "DJANGO_DEBUG"):
            env.pop(name, None)
        server = start_daphne(env)
        try:
            yield server, redis.Redis.from_url(store.url)
        finally:
            stop(server.process)


def read(server: Server, path: str, etag: str | None = None) -> tuple[int, bytes, str]:
    request = urllib.request.Request(server.http(path), headers={"If-None-Match": etag} if etag else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers["ETag"]
    except urllib.error.HTTPError as error:
        return error.code, b"", error.headers["ETag"]


def stored_values(store: redis.Redis) -> dict[bytes, bytes]:
    strings = [key for key in store.scan_iter() if store.type(key) == b"string"]
    return {key: value for key, value in zip(strings, store.mget(strings), strict=True) if isinstance(value, bytes)}


def test_the_cache_stores_bodies_etags_and_counts_as_themselves(cached: tuple[Server, redis.Redis]) -> None:
    server, store = cached
    answers = {path: read(server, path) for path in PATHS for _ in range(2)}
    assert {status for status, _, _ in answers.values()} == {200}
    for path, (_, _, etag) in answers.items():
        assert read(server, path, etag)[0] == 304
    values = stored_values(store)
    assert {value[:1] for value in values.values()} >= {b"b", b"s"}, values  # bodies and ETags were cached
    assert [key for key, value in values.items() if value.startswith(PICKLE_HEADER)] == []
    bodies = {value[1:] for value in values.values() if value[:1] == b"b"}
    assert {body for path, (_, body, _) in answers.items() if path != "/bounties"} <= bodies  # that one streams


class _Planted:
    """What an attacker with access to Redis would write: a pickle that runs a command when loaded."""

    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.proof}",)


def test_a_pickle_planted_in_redis_is_a_miss_and_never_runs(cached: tuple[Server, redis.Redis],
                                                             tmp_path: Path) -> None:
    server, store = cached
    first = {path: read(server, path) for path in PATHS}
    proof = tmp_path / "the-pickle-ran"
    planted = pickle.dumps(_Planted(proof))
    entries = [key for key, value in stored_values(store).items() if value[:1] in (b"b", b"s")]  # bodies, ETags
    assert entries
    for key in entries:
        store.set(key, planted, keepttl=True)
    again = {path: read(server, path) for path in PATHS}
    assert {path: answer[:2] for path, answer in again.items()} == {path: answer[:2] for path, answer in first.items()}
    assert not proof.exists()
    assert [key for key, value in stored_values(store).items() if value == planted] == []  # stored afresh


def test_without_redis_the_cache_refuses_what_redis_would_and_keeps_what_it_keeps() -> None:
    cache = LocalCache("test-local-cache", {})
    cache.set("body", b"[1]")
    cache.set("tag", 'W/"x"')
    cache.add("count", 1)
    assert (cache.get("body"), cache.get("tag"), cache.incr("count")) == (b"[1]", 'W/"x"', 2)
    assert cache.get("missing", 7) == 7
    assert cache.get_many(["body", "tag"]) == {"body": b"[1]", "tag": 'W/"x"'}
    with pytest.raises(TypeError, match="the cache stores bytes, str and int, not dict"):
        cache.set("record", {"id": 1})
    with pytest.raises(TypeError, match="not list"):
        cache.set_many({"records": [1]})
