"""The one way a read of the read side reaches its database: choose, read, learn, fall back.

Every read that may go to a read replica (HTTP bodies, unpaged lists and snapshots into their
spools, the live feed and resumes) goes through `read` (on the calling thread) or `read_async`
(from the event loop). Each:

1. **chooses** a database (records.replicas): one that holds `floor`, the change-log seqs the read
   depends on (waiting for a replica to replay them within BOUNTY_REPLICA_WAIT_MS, then the
   primary), or with no floor the replicas in turn; `source` names one the caller chose already;
2. **reads**: `work()` runs with its reads going there (bountysite.databases.reading_from); it
   raises plain database errors and knows nothing of replicas;
3. **learns** what the read found the database to hold (`learn(result)`: seqs by deployment), so
   that later reads needing them go there without asking;
4. **falls back**: a failure that is the replica's (it does not answer, cancelled the query for its
   replay, or its pool had no connection: `ReplicaSet.failed`) runs `work()` again on the primary,
   once, counted in bounty_replica_fallbacks_total{reason="failed"}; any other failure (a
   statement timeout, which the primary would meet too) is the caller's.

Callers never name a replica or catch a replica's failure themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError

from bountysite.databases import PRIMARY, read_alias, reading_from
from records.lanes import READS, Lane
from records.metrics import REPLICA_FALLBACKS
from records.replicas import REPLICAS, Floor

T = TypeVar("T")
Learn = Callable[[T], Mapping[int, int]]


def read(work: Callable[[], T], floor: Floor | None = None, *, request: bool = False,
         learn: Learn[T] | None = None) -> T:
    """`work()` on a database that holds `floor` (`request`: also what this process's live feed
    has sent, records.replicas.ReplicaSet.for_request), falling back to the primary."""
    wait: float = settings.BOUNTY_REPLICA_WAIT_SECONDS
    if request:
        source = REPLICAS.for_request(floor or {}, wait)
    else:
        source = REPLICAS.at_least(floor, wait) or PRIMARY if floor else REPLICAS.any()
    try:
        with reading_from(source):
            result = work()
    except DatabaseError as error:
        source = _fallen_back(source, error)
        with reading_from(source):
            result = work()
    return _learnt(source, result, learn)


async def read_async(work: Callable[[], Awaitable[T]], floor: Floor | None = None, *, source: str | None = None,
                     wait: bool = True, trusted: bool = False, lane: Lane = READS,
                     learn: Learn[T] | None = None) -> T:
    """`await work()` on a database that holds `floor` (chosen on the event loop, each question to
    a replica on `lane`; `wait`: up to BOUNTY_REPLICA_WAIT_MS for one to replay it; `trusted`: the
    feed's own floor, never trimmed to what the primary holds) or on `source`, falling back to
    the primary. `work` reads on a lane (records.lanes), which takes the choice with it."""
    if source is None:
        if floor:
            source = await REPLICAS.at_least_async(floor, settings.BOUNTY_REPLICA_WAIT_SECONDS if wait else 0,
                                                   trusted=trusted, lane=lane) or PRIMARY
        else:
            source = REPLICAS.any()
    try:
        with reading_from(source):
            result = await work()
    except DatabaseError as error:
        source = _fallen_back(source, error)
        with reading_from(source):
            result = await work()
    return _learnt(source, result, learn)


def _fallen_back(source: str, error: DatabaseError) -> str:
    """The primary, counted, when `error` is the replica `source`'s fault; else `error` again."""
    if not REPLICAS.failed(source, error):
        raise error
    REPLICA_FALLBACKS.labels("failed").inc()
    return PRIMARY


def _learnt(source: str, result: T, learn: Learn[T] | None) -> T:
    if learn is not None:
        REPLICAS.learnt(source, learn(result))
    return result


async def read_on_lane(lane: Lane, call: Callable[..., T], *args: object, floor: Floor | None = None,
                       source: str | None = None, wait: bool = True, trusted: bool = False,
                       learn: Learn[T] | None = None) -> T:
    """`read_async` of `call(*args)` on a thread of `lane`."""
    return await read_async(lambda: lane.run(call, *args), floor, source=source, wait=wait, trusted=trusted,
                            lane=lane, learn=learn)


def learnt_here(seqs: Mapping[int, int]) -> None:
    """Inside `work`: the database it reads holds `seqs` (a data version read along the way)."""
    REPLICAS.learnt(read_alias(), seqs)
