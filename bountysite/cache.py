"""Django's Redis cache, keeping one redis-py client per connection pool, with a one-trip counter.

Django builds a new `redis.Redis` for every cache call, and its constructor copies redis-py's
table of response callbacks (about 170 entries): a tenth of a millisecond on each of the API's
cached answers. A `redis.Redis` is thread-safe (each command takes a connection from the pool),
so one client per pool serves every thread."""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _ClientPerPool(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # Django's own private helpers, which django-stubs does not declare.
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ClientPerPool

    def count(self, key: str, timeout: int) -> int:
        """Adds one to the counter at `key`, which starts at zero with `timeout` seconds to live
        if it is not there: SET NX EX and INCR in one MULTI, so one round trip, and the counter
        always has its timeout (Django's add then incr takes two trips, and an incr right after
        the key expired would make a counter without one)."""
        key = self.make_and_validate_key(key)
        client = self._cache.get_client(key, write=True)
        with client.pipeline(transaction=True) as pipe:
            pipe.set(key, 0, ex=timeout, nx=True)
            pipe.incr(key)
            return int(pipe.execute()[1])
