"""Django's Redis cache, one client and one bounded pool of connections per process, with a one-trip counter
and capped sets of expiring members (what the websocket counts its open connections with), and
doing without Redis when it cannot be reached (bountysite/redis_reach.py): a read is a miss, a
write is skipped, the counter counts in this process's memory, and the capped set says it cannot
tell (the caller counts its own connections).

Django builds a new `redis.Redis` for every cache call, and its constructor copies redis-py's
table of response callbacks (about 170 entries): a tenth of a millisecond on each of the API's
cached answers. A `redis.Redis` is thread-safe (each command takes a connection from the pool),
so one client per pool serves every thread.

Django keeps a cache instance per thread and per asyncio context (`caches` is an asgiref Local):
each request's thread, each websocket consumer's task gets its own, and each instance would open
a pool of its own. 300 websocket clients held 227 Redis connections in one process that way, one
per open connection's admission (records/limits.py). Every instance of a location here shares
the process's one client instead, whose pool holds at most REDIS_MAX_CONNECTIONS connections
(settings: a `BlockingConnectionPool`, where a call waits at most REDIS_TIMEOUT_MS for a free
one, and is then done without Redis like a call that timed out)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from django.core.cache import caches
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient
from django.utils.functional import cached_property

from bountysite.redis_reach import FAILURES, REDIS

T = TypeVar("T")

# KEYS[1] a sorted set of members scored with the Unix time they expire at; ARGV member, cap, ttl
# (seconds), ttl in milliseconds.
# Drops the expired members, then adds the member unless `cap` remain. Redis's clock, so that
# hosts whose clocks disagree still agree on what has expired.
_ADD_CAPPED = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""
# KEYS[1] such a set; ARGV ttl, ttl in milliseconds, then members: each expires `ttl` from now.
_RENEW = """
local now = redis.call('TIME')
local expires = tonumber(now[1]) + tonumber(now[2]) / 1000000 + tonumber(ARGV[1])
for i = 3, #ARGV do
  redis.call('ZADD', KEYS[1], expires, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""


def _without_redis(fallback: T, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, or `fallback` when Redis cannot be reached (or refuses the call)."""
    if not REDIS.worth_asking():
        return fallback
    try:
        result = call(*args)
    except FAILURES as error:
        REDIS.record(error)
        return fallback
    REDIS.answered()
    return result


class PlainValues:
    """The cache's serializer: what the service caches (response bodies as bytes, ETags as str,
    counts as int) stored as it is, never pickled. Django's own pickles every value but an int and
    unpickles whatever it reads back, so anything that can write to Redis (another local user,
    another application's request forgery) could have the service run code of its choosing.
    Bytes and text are stored behind a one-byte tag, integers as Redis's own (INCR works on
    them); anything else read back, a pickle among them (another release's entries), is a miss."""

    def dumps(self, value: object) -> bytes | int:
        if type(value) is int:
            return value
        if isinstance(value, bytes):
            return b"b" + value
        if isinstance(value, str):
            return b"s" + value.encode()
        raise TypeError(f"the cache stores bytes, str and int, not {type(value).__name__}")

    def loads(self, data: bytes) -> bytes | str | int | None:
        tag = data[:1]
        if tag == b"b":
            return data[1:]
        if tag == b"s":
            try:
                return data[1:].decode()
            except UnicodeDecodeError:
                return None
        try:
            return int(data)
        except ValueError:
            return None


class _ClientPerPool(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}
        self._lock = threading.Lock()  # threads making the first calls at once make one pool

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        with self._lock:
            # Django's own private helpers, which django-stubs does not declare.
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
            client = self._clients.get(id(pool))
            if client is None:
                client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
            return client

    # Django's cache operations, each a miss or a no-op without Redis.
    def get(self, key: Any, default: Any) -> Any:
        return _without_redis(default, super().get, key, default)

    def get_many(self, keys: Any) -> Any:
        nothing: dict[Any, Any] = {}
        found = _without_redis(nothing, super().get_many, keys)
        return {key: value for key, value in found.items() if value is not None}  # PlainValues' misses

    def has_key(self, key: Any) -> Any:
        return _without_redis(False, super().has_key, key)

    def set(self, key: Any, value: Any, timeout: Any) -> None:
        _without_redis(None, super().set, key, value, timeout)

    def set_many(self, data: Any, timeout: Any) -> Any:
        return _without_redis(None, super().set_many, data, timeout)

    def add(self, key: Any, value: Any, timeout: Any) -> Any:
        return _without_redis(False, super().add, key, value, timeout)

    def touch(self, key: Any, timeout: Any) -> Any:
        return _without_redis(False, super().touch, key, timeout)

    def delete(self, key: Any) -> Any:
        return _without_redis(False, super().delete, key)

    def delete_many(self, keys: Any) -> Any:
        return _without_redis(None, super().delete_many, keys)

    def clear(self) -> Any:
        return _without_redis(False, super().clear)


_clients: dict[str, _ClientPerPool] = {}  # the process's clients, by servers and options
_clients_lock = threading.Lock()


class RedisCache(DjangoRedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ClientPerPool

    @cached_property
    def _cache(self) -> _ClientPerPool:
        """The process's one client of these servers with these options, whichever thread or
        context this instance belongs to."""
        servers, options = self._servers, self._options  # type: ignore[attr-defined]  # Django's, undeclared in django-stubs
        key = repr((servers, sorted(options.items())))
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = self._class(servers, **options)
            return client

    def reachable(self) -> bool:
        """Whether Redis answers a PING now (during an outage, False without asking between retries)."""
        return _without_redis(False, lambda: bool(self._cache.get_client(write=True).ping()))

    def count(self, key: str, timeout: int) -> int:
        """Adds one to the counter at `key`, which starts at zero with `timeout` seconds to live
        if it is not there: SET NX EX and INCR in one MULTI, so one round trip, and the counter
        always has its timeout (Django's add then incr takes two trips, and an incr right after
        the key expired would make a counter without one). Without Redis, the counter is this
        process's own."""
        key = self.make_and_validate_key(key)
        client = self._cache.get_client(key, write=True)

        def shared() -> int:
            with client.pipeline(transaction=True) as pipe:
                pipe.set(key, 0, ex=timeout, nx=True)
                pipe.incr(key)
                return int(pipe.execute()[1])

        counted = _without_redis(None, shared)
        return counted if counted is not None else count_in(_local, key, timeout)

    def add_capped(self, key: str, member: str, cap: int, ttl: float) -> bool | None:
        """Adds `member` to the sorted set at `key` unless `cap` members that have not expired are
        there already, in one atomic step; the member expires `ttl` seconds later unless renewed
        (`renew_members`). True when it was added; None when Redis cannot be reached."""
        key = self.make_and_validate_key(key)
        client = self._cache.get_client(key, write=True)
        script = client.register_script(_ADD_CAPPED)
        return _without_redis(None, lambda: bool(script(keys=[key], args=[member, cap, ttl, math.ceil(ttl * 1000)])))

    def renew_members(self, members: Mapping[str, Sequence[str]], ttl: float) -> None:
        """Makes each member of each set (key: members) expire `ttl` seconds from now, adding those
        that are not there (after a flush, or admitted while Redis could not be reached), in one
        round trip. Skipped without Redis."""
        client = self._cache.get_client(write=True)
        script = client.register_script(_RENEW)

        def renew() -> None:
            with client.pipeline(transaction=False) as pipe:
                for key, names in members.items():
                    script(keys=[self.make_and_validate_key(key)], args=[ttl, math.ceil(ttl * 1000), *names],
                           client=pipe)
                pipe.execute()

        _without_redis(None, renew)

    def remove_members(self, members: Mapping[str, Sequence[str]]) -> None:
        """Removes each member from its set (key: members), in one round trip. Skipped without
        Redis: the members stop counting when they expire."""
        client = self._cache.get_client(write=True)

        def remove() -> None:
            with client.pipeline(transaction=False) as pipe:
                for key, names in members.items():
                    pipe.zrem(self.make_and_validate_key(key), *names)
                pipe.execute()

        _without_redis(None, remove)


class LocalCache(LocMemCache):
    """The cache without Redis (the dev server, the SQLite test run): this process's memory,
    storing values as Redis does here, through PlainValues, so that a value the service could not
    cache in production (anything but bytes, text and integers) fails here too rather than being
    pickled."""

    serializer = PlainValues()

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return super().add(key, self.serializer.dumps(value), timeout, version)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        super().set(key, self.serializer.dumps(value), timeout, version)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        value = super().get(key, _MISSING, version)
        if value is _MISSING:
            return default
        if isinstance(value, bytes):
            loaded = self.serializer.loads(value)
            return default if loaded is None else loaded
        return value


_MISSING = object()


def redis_answers() -> bool | None:
    """Whether the configured Redis answers a PING now; None when none is configured."""
    shared = caches["default"]
    return shared.reachable() if isinstance(shared, RedisCache) else None


_local = LocMemCache("bountysite-without-redis", {})  # this process's counters while Redis is away


def count_here(key: str, timeout: int) -> int:
    """Adds one to this process's own counter at `key` (what RedisCache.count falls back on)."""
    return count_in(_local, key, timeout)


def count_in(cache: BaseCache, key: str, timeout: int) -> int:
    """Adds one to the counter at `key` of a process-local cache (see RedisCache.count)."""
    if cache.add(key, 1, timeout=timeout):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=timeout)
        return 1
