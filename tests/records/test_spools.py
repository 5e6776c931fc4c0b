"""Spools (records.spools): one production per answer and version however many ask at once, a
newer version supersedes, the disk bound cuts off superseded readers before it refuses, producers
take turns first come first served, and a request that waits too long is refused while the
spool is still made for the next."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from records import spools
from records.history import DataVersion, DeploymentVersion, Position
from records.spools import Producers, Spools, SpoolsFull, SpoolWriter

MIB = 1024**2
V1, V2 = (DataVersion((DeploymentVersion(1, Position(seq, f"{seq:032x}")),)) for seq in (1, 2))


def producing(content: bytes, version: DataVersion, made: list[DataVersion], pause: float = 0.0) -> Any:
    def produce(writer: SpoolWriter) -> tuple[DataVersion, None]:
        made.append(version)
        time.sleep(pause)
        for start in range(0, len(content), 64 * 1024):
            writer.write(content[start:start + 64 * 1024], messages=1)
        return version, None
    return produce


def read_all(spool: spools.Spool) -> bytes:
    reading = spools.open_reading(spool)
    try:
        return b"".join(spool.read(offset, length) for offset, length, _ in spool.pieces())
    finally:
        reading.close()


@pytest.fixture
def lists() -> Spools:
    return Spools("list", Producers(lambda: 2))


def test_requests_for_one_answer_at_once_share_one_production(lists: Spools) -> None:
    made: list[DataVersion] = []
    produce = producing(b"x" * 300_000, V1, made, pause=0.3)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: lists.get("all", V1, produce, wait=10), range(8)))
    assert made == [V1] and all(spool is got[0] for spool in got)
    assert read_all(got[0]) == b"x" * 300_000
    assert [length for _, length, _ in got[0].pieces()][:1] == [64 * 1024]


def test_a_newer_version_supersedes_and_the_old_spool_goes_with_its_last_reader(lists: Spools) -> None:
    made: list[DataVersion] = []
    old = lists.get("all", V1, producing(b"a" * 1000, V1, made), wait=10)
    reading = spools.open_reading(old)
    new = lists.get("all", V2, producing(b"b" * 2000, V2, made), wait=10)
    assert read_all(new) == b"b" * 2000
    assert old.superseded and not old.closed and spools.spool_bytes() == 3000  # still read
    assert old.read(0, 10) == b"a" * 10
    reading.close()
    assert old.closed and spools.spool_bytes() == 2000


def test_past_the_disk_bound_superseded_readers_are_cut_off_then_a_read_without_room_is_refused(
        lists: Spools, settings: Any) -> None:
    settings.BOUNTY_SPOOL_MAX_BYTES = MIB
    made: list[DataVersion] = []
    old = lists.get("all", V1, producing(b"a" * 600_000, V1, made), wait=10)
    reading = spools.open_reading(old)
    current = lists.get("all", V2, producing(b"b" * 300_000, V2, made), wait=10)
    current_reading = spools.open_reading(current)
    # 900,000 bytes held: 300,000 more need the superseded spool's disk, whose reader is cut off.
    with pytest.raises(SpoolsFull, match="BOUNTY_SPOOL_MAX_BYTES"):
        lists.get("other", V2, producing(b"c" * 300_000, V2, made), wait=10)
    with pytest.raises(spools.SpoolCutOff):
        old.read(0, 10)
    assert current.read(0, 10) == b"b" * 10  # a current spool's readers are never cut off
    reading.close()
    assert spools.spool_bytes() == 300_000
    assert read_all(lists.get("other", V2, producing(b"c" * 300_000, V2, made), wait=10)) == b"c" * 300_000
    current_reading.close()


def test_producers_take_turns_first_come_first_served() -> None:
    producers = Producers(lambda: 1)
    assert producers.take(0)
    order: list[int] = []

    def wait_turn(number: int) -> None:
        assert producers.take(10)
        order.append(number)
        producers.give_back()

    threads = []
    for number in range(5):
        threads.append(threading.Thread(target=wait_turn, args=(number,)))
        threads[-1].start()
        time.sleep(0.05)  # each queued after the one before
    producers.give_back()
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2, 3, 4]
    assert not producers.busy()


def test_a_request_that_waits_too_long_is_refused_and_the_spool_is_still_made(lists: Spools) -> None:
    made: list[DataVersion] = []
    slow = producing(b"s" * 1000, V1, made, pause=1.0)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(lists.get, "all", V1, slow, 10)
        time.sleep(0.2)
        with pytest.raises(spools.SpoolLate, match=r"within 0\.3 s"):
            lists.get("all", V1, slow, wait=0.3)
        assert read_all(first.result()) == b"s" * 1000
    assert lists.get("all", V1, slow, wait=0.3) is first.result() and made == [V1]


def test_a_production_that_started_first_never_replaces_a_newer_spool(lists: Spools) -> None:
    made: list[DataVersion] = []
    with ThreadPoolExecutor(1) as pool:
        slow_old = pool.submit(lists.get, "all", V1, producing(b"1" * 1000, V1, made, pause=0.5), 10)
        time.sleep(0.1)  # v1's production has started, and been numbered, before v2's
        newer = lists.get("all", V2, producing(b"2" * 1000, V2, made), wait=10)
        older = slow_old.result()
    assert read_all(older) == b"1" * 1000  # its waiters read it
    assert older.superseded and not newer.superseded
    assert lists.get("all", V2, producing(b"x", V2, made), wait=10) is newer and made == [V1, V2]


def test_room_is_not_made_by_dropping_a_spool_just_handed_to_a_request(lists: Spools, settings: Any) -> None:
    settings.BOUNTY_SPOOL_MAX_BYTES = MIB
    made: list[DataVersion] = []
    handed = lists.get("all", V1, producing(b"a" * 600_000, V1, made), wait=10)  # not read yet
    with pytest.raises(SpoolsFull):
        lists.get("other", V1, producing(b"b" * 600_000, V1, made), wait=10)
    assert read_all(handed) == b"a" * 600_000
