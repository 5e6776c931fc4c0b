"""bounty_client.events: the fold's bookkeeping on what the shared vectors (tests/client/test_vectors.py)
do not script (messages of the wrong shape, kinds it does not know), the reconnect's backoff, and
watch_events against a real websockets server on loopback that plays the service's part."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.server import ServerConnection, serve

from bounty_client import Backoff, EventFold, LiveEvent, ResponseError, Snapshot, events_url, watch_events

TIMEOUT = 10.0


def complete(seq: int, position: str, bounties: int = 0) -> dict[str, Any]:
    return {"type": "snapshot.complete", "payload": {"bounties": bounties, "submissions": 0, "disputes": 0},
            "seq": seq, "position": position}


def snapshot_bounty(bounty_id: int, seq: int) -> dict[str, Any]:
    return {"type": "bounty.created", "payload": {"id": bounty_id, "status": "open"}, "snapshot": True, "seq": seq}


def live(type_: str, record_id: int, seq: int, position: str) -> dict[str, Any]:
    return {"type": type_, "payload": {"id": record_id, "status": "open"}, "seq": seq, "position": position}


# ------------------------------------------------------------------ the fold

def test_it_makes_the_websocket_address_from_the_services() -> None:
    assert events_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/ws/events"
    assert events_url("https://example.org/api/") == "wss://example.org/api/ws/events"
    assert events_url("wss://example.org", "41.3f9a") == "wss://example.org/ws/events?since=41.3f9a"
    assert events_url("wss://example.org", "a+b/c=d&e f%") == "wss://example.org/ws/events?since=a%2Bb%2Fc%3Dd%26e%20f%25"


@pytest.mark.parametrize("message", [
    None, [], "snapshot.complete", 7,
    {"seq": 1, "position": "1.a"},
    {"type": "bounty.created", "payload": {"id": 1}, "seq": "1", "position": "1.a"},
    {"type": "bounty.created", "payload": {"id": 1}, "seq": True, "position": "1.a"},
    {"type": "bounty.created", "payload": {"id": 1}, "seq": 1},
    {"type": "bounty.created", "payload": {"id": 1}, "seq": 1, "position": 1},
    {"type": "bounty.created", "payload": [1], "seq": 1, "position": "1.a"},
    {"type": "bounty.created", "payload": {"id": "1"}, "seq": 1, "position": "1.a"},
    {"type": "bounty.created", "seq": 1, "position": "1.a"},
    {"type": "snapshot.complete", "payload": {}, "seq": 1},
    {"type": "resync", "payload": {}, "seq": 1, "position": None},
    {"type": "bounty.created", "payload": None, "snapshot": True, "seq": 1},
], ids=repr)
def test_a_message_not_of_the_documented_shape_raises_response_error_and_changes_nothing(message: object) -> None:
    fold = EventFold(since="9.a")
    fold.feed(live("bounty.created", 1, 10, "10.a"))
    with pytest.raises(ResponseError, match=r"^/ws/events: "):
        fold.feed(message)
    assert fold.resume_from == "10.a"
    assert fold.feed(live("bounty.created", 1, 10, "10.a")) is None  # still a repeat
    assert isinstance(fold.feed(live("bounty.created", 2, 11, "11.a")), LiveEvent)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
MESSAGE = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["bounty.created", "snapshot.complete", "resync", "bounty.removed", "x.y", ""]) | JSON,
    "payload": st.fixed_dictionaries({"id": st.integers() | JSON}) | JSON,
    "snapshot": st.booleans() | JSON,
    "seq": st.integers() | JSON,
    "position": st.text() | JSON,
}) | JSON


@given(st.lists(MESSAGE, max_size=12))
def test_whatever_it_is_fed_it_raises_nothing_but_response_error(messages: list[object]) -> None:
    fold = EventFold()
    for message in messages:
        try:
            delivered = fold.feed(message)
        except ResponseError:
            continue
        assert delivered is None or isinstance(delivered, Snapshot | LiveEvent)
        assert fold.resume_from is None or isinstance(fold.resume_from, str)


def test_a_snapshot_record_of_a_kind_it_does_not_know_is_left_out_and_a_live_one_handed_over() -> None:
    fold = EventFold()
    fold.feed(snapshot_bounty(1, 4))
    fold.feed({"type": "comment.created", "payload": {"id": 1}, "snapshot": True, "seq": 4})
    snapshot = fold.feed(complete(4, "4.a", bounties=1))
    assert isinstance(snapshot, Snapshot)
    assert [b["id"] for b in snapshot.bounties] == [1]
    event = fold.feed(live("comment.created", 2, 5, "5.a"))
    assert isinstance(event, LiveEvent)
    assert (event.kind, event.removed, fold.resume_from) == ("comment", False, "5.a")


# ------------------------------------------------------------------ the backoff

def test_the_pause_doubles_up_to_the_ceiling_and_starts_again_after_a_message() -> None:
    backoff = Backoff(initial=1.0, ceiling=10.0, rng=lambda: 1.0)
    assert [backoff.next_delay(1006) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    backoff.reset()
    assert backoff.next_delay(1011) == 1.0


def test_the_pause_is_five_times_as_long_after_a_1008_or_1013_within_the_ceiling() -> None:
    backoff = Backoff(initial=1.0, ceiling=30.0, rng=lambda: 1.0)
    assert [backoff.next_delay(code) for code in (1013, 1008, 1006, 1013)] == [5.0, 10.0, 4.0, 30.0]


def test_the_jitter_draws_each_pause_between_half_and_all_of_it() -> None:
    draws = iter([0.0, 0.5, 0.999])
    backoff = Backoff(initial=4.0, ceiling=4.0, rng=lambda: next(draws))
    assert [backoff.next_delay(1006) for _ in range(3)] == [2.0, 3.0, pytest.approx(3.998)]


@pytest.mark.parametrize("code", [1012, 1001])
def test_after_a_restart_the_pause_is_drawn_from_the_window_and_the_doubling_does_not_grow(code: int) -> None:
    draws = iter([1.0, 1.0, 0.0, 1.0, 0.5])
    backoff = Backoff(initial=1.0, ceiling=60.0, restart_window=0.4, rng=lambda: next(draws))
    # 4, not 8: the restart did not count as a failure
    assert [backoff.next_delay(c) for c in (1006, 1006, code, 1011)] == [1.0, 2.0, 0.0, 4.0]
    backoff.reset()
    assert backoff.next_delay(code) == 0.2


def test_a_second_restart_without_a_message_in_between_waits_the_doubling_pause() -> None:
    backoff = Backoff(initial=1.0, ceiling=60.0, restart_window=0.4, rng=lambda: 1.0)
    assert [backoff.next_delay(code) for code in (1012, 1001, 1012, 1006, 1012)] == [0.4, 1.0, 2.0, 4.0, 8.0]
    backoff.reset()
    assert [backoff.next_delay(code) for code in (1001, 1011, 1012)] == [0.4, 1.0, 2.0]


def test_the_restart_window_is_within_the_ceiling() -> None:
    assert Backoff(ceiling=0.2, rng=lambda: 0.5).next_delay(1012) == 0.1


@pytest.mark.parametrize("code", [1012, 1001])
def test_while_the_server_restarts_a_failed_connection_is_retried_within_the_window_without_doubling(code: int) -> None:
    draws = itertools.cycle([0.0, 0.5, 0.999])
    backoff = Backoff(initial=1.0, ceiling=60.0, restart_window=0.4, restart_tries=6, rng=lambda: next(draws))
    assert [backoff.next_delay(c) for c in (1006, code)] == [0.5, 0.2]
    retries = [backoff.next_delay(1006) for _ in range(6)]  # refused while the new process starts
    assert retries == pytest.approx([0.3998, 0.2, 0.3, 0.3998, 0.2, 0.3])
    assert all(0.2 <= pause <= 0.4 for pause in retries)
    # The tries are used up: the doubling goes on from the one failure before the restart, 2 s, then 4 s.
    assert [backoff.next_delay(1006) for _ in range(2)] == pytest.approx([1.999, 2.0])


def test_the_restart_tries_are_30_by_default_within_a_window_of_half_a_second_to_a_second() -> None:
    backoff = Backoff(initial=4.0, rng=lambda: 0.0)
    assert backoff.next_delay(1012) == 0.0
    assert [backoff.next_delay(1006) for _ in range(30)] == [0.5] * 30
    assert [backoff.next_delay(1006) for _ in range(2)] == [2.0, 4.0]


@pytest.mark.parametrize(("code", "pause"), [
    (1011, 1.0), (1008, 5.0), (1013, 5.0), (4000, 1.0), (1012, 1.0), (1001, 1.0)])
def test_a_close_the_server_sends_after_a_restart_waits_the_doubling_pause_and_ends_the_retries(
        code: int, pause: float) -> None:
    backoff = Backoff(initial=1.0, ceiling=60.0, restart_window=0.4, rng=lambda: 1.0)
    assert [backoff.next_delay(c) for c in (1012, 1006, code, 1006, 1006)] == [0.4, 0.4, pause, 2.0, 4.0]


def test_a_message_ends_the_restart_retries_and_the_next_restart_has_them_all_again() -> None:
    backoff = Backoff(initial=1.0, ceiling=60.0, restart_window=0.4, restart_tries=2, rng=lambda: 1.0)
    assert [backoff.next_delay(c) for c in (1012, 1006)] == [0.4, 0.4]
    backoff.reset()
    assert [backoff.next_delay(1006) for _ in range(2)] == [1.0, 2.0]
    backoff.reset()
    assert [backoff.next_delay(c) for c in (1001, 1006, 1006, 1006)] == [0.4, 0.4, 0.4, 1.0]


# ------------------------------------------------------------------ watch_events against a server

Script = list[Callable[[ServerConnection], Any]]


@dataclass
class ScriptedService:
    """A websockets server on loopback: connection n runs `script[n]`; later connections stay open
    and silent. `paths` holds each connection's request path (with its query)."""

    script: Script
    url: str = ""
    paths: list[str] = field(default_factory=list)
    opened_at: list[float] = field(default_factory=list)  # time.monotonic() of each connection

    async def handle(self, connection: ServerConnection) -> None:
        number = len(self.paths)
        assert connection.request is not None
        self.paths.append(connection.request.path)
        self.opened_at.append(time.monotonic())
        if number < len(self.script):
            await self.script[number](connection)
        else:
            await connection.wait_closed()


def sends(*messages: dict[str, Any] | str, close: int | None = None) -> Callable[[ServerConnection], Any]:
    """A connection's part: send the messages, then close with `close` (or wait for the client to)."""
    async def run(connection: ServerConnection) -> None:
        for message in messages:
            await connection.send(message if isinstance(message, str) else json.dumps(message))
        if close is None:
            await connection.wait_closed()
        else:
            await connection.close(close)
    return run


@asynccontextmanager
async def scripted_service(*script: Callable[[ServerConnection], Any]) -> AsyncIterator[ScriptedService]:
    service = ScriptedService(list(script))
    async with serve(service.handle, "127.0.0.1", 0) as server:
        host, port = next(iter(server.sockets)).getsockname()[:2]
        service.url = f"http://{host}:{port}"
        yield service


@dataclass
class Watched:
    snapshots: list[Snapshot] = field(default_factory=list)
    events: list[LiveEvent] = field(default_factory=list)
    disconnects: list[tuple[int, float]] = field(default_factory=list)

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        try:
            async with asyncio.timeout(TIMEOUT):
                while not condition():
                    await asyncio.sleep(0.01)
        except TimeoutError:
            pytest.fail(f"no {what} within {TIMEOUT} s: {self}")


@asynccontextmanager
async def watching(url: str, since: str | None = None, backoff: Backoff | None = None) -> AsyncIterator[Watched]:
    watched = Watched()

    async def on_event(event: LiveEvent) -> None:  # a coroutine handler is awaited
        watched.events.append(event)

    task = asyncio.create_task(watch_events(
        url, watched.snapshots.append, on_event, since=since,
        on_disconnect=lambda code, pause: watched.disconnects.append((code, pause)),
        backoff=backoff or Backoff(initial=0.01, ceiling=0.05)))
    try:
        yield watched
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_it_resumes_with_the_percent_encoded_position_and_takes_the_snapshot_that_answers_the_resume() -> None:
    async def run() -> None:
        async with scripted_service(
            sends(snapshot_bounty(1, 10), complete(10, "10.a+b", bounties=1),
                  live("bounty.created", 2, 11, "11.x/y=&z"), close=1011),  # the history changed under it
            sends(snapshot_bounty(7, 5), complete(5, "5.other", bounties=1), live("bounty.created", 8, 6, "6.other")),
        ) as service, watching(service.url) as watched:
            await watched.until(lambda: len(watched.events) == 2, "the live message after the second snapshot")
            assert service.paths == ["/ws/events", "/ws/events?since=11.x%2Fy%3D%26z"]
            assert [(s.seq, s.position, [b["id"] for b in s.bounties]) for s in watched.snapshots] == [
                (10, "10.a+b", [1]), (5, "5.other", [7])]
            # seq 6 is lower than the 11 applied before, but of the snapshot's history: not a repeat
            assert [(e.seq, e.position, e.payload["id"]) for e in watched.events] == [
                (11, "11.x/y=&z", 2), (6, "6.other", 8)]
            assert [code for code, _ in watched.disconnects] == [1011]
    asyncio.run(run())


def test_it_starts_from_the_position_given_and_drops_a_repeat_after_a_resume() -> None:
    async def run() -> None:
        async with scripted_service(
            sends(live("bounty.created", 1, 21, "21.a"), close=1001),
            sends(live("bounty.created", 1, 21, "21.a"), live("bounty.finalized", 1, 22, "22.a")),
        ) as service, watching(service.url, since="20.a") as watched:
            await watched.until(lambda: len(watched.events) == 2, "the message after the repeat")
            assert service.paths == ["/ws/events?since=20.a", "/ws/events?since=21.a"]
            assert [e.seq for e in watched.events] == [21, 22]
            assert watched.snapshots == []
    asyncio.run(run())


def test_a_message_it_cannot_apply_ends_the_connection_and_it_resumes_from_the_last_one_applied() -> None:
    async def run() -> None:
        async with scripted_service(
            sends(complete(3, "3.a"), "not JSON"),
            sends(live("bounty.created", 1, 4, "4.a")),
        ) as service, watching(service.url) as watched:
            await watched.until(lambda: len(watched.events) == 1, "the message on the second connection")
            assert service.paths == ["/ws/events", "/ws/events?since=3.a"]
            assert [code for code, _ in watched.disconnects] == [4000]
    asyncio.run(run())


def test_a_drop_during_a_snapshot_reconnects_without_since() -> None:
    async def run() -> None:
        async with scripted_service(
            sends(complete(3, "3.a"), {"type": "resync", "payload": {"from_block": 1, "to_block": 9}, "seq": 4,
                                       "position": "4.a"}, snapshot_bounty(1, 4), close=1011),
            sends(snapshot_bounty(1, 5), snapshot_bounty(2, 5), complete(5, "5.a", bounties=2)),
        ) as service, watching(service.url) as watched:
            await watched.until(lambda: len(watched.snapshots) == 2, "the second snapshot")
            assert service.paths == ["/ws/events", "/ws/events"]
            assert [[b["id"] for b in s.bounties] for s in watched.snapshots] == [[], [1, 2]]
    asyncio.run(run())


def test_it_backs_off_doubling_while_the_service_cannot_be_reached_and_longer_after_a_1013() -> None:
    async def run() -> None:
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            refusing = f"http://127.0.0.1:{unused.getsockname()[1]}"  # nothing listens there
        backoff = Backoff(initial=0.01, ceiling=0.04, rng=lambda: 1.0)
        async with watching(refusing, backoff=backoff) as watched:
            await watched.until(lambda: len(watched.disconnects) >= 4, "four refused connections")
            assert watched.disconnects[:4] == [(1006, 0.01), (1006, 0.02), (1006, 0.04), (1006, 0.04)]
        async with scripted_service(sends(close=1013), sends(close=1013)) as service:
            backoff = Backoff(initial=0.01, ceiling=1.0, rng=lambda: 1.0)
            async with watching(service.url, backoff=backoff) as watched:
                await watched.until(lambda: len(watched.disconnects) >= 2, "two 1013 closes")
                assert watched.disconnects[:2] == [(1013, 0.05), (1013, 0.1)]
    asyncio.run(run())


def test_it_comes_back_within_the_restart_window_after_a_1012_and_on_the_backoff_after_a_1011() -> None:
    async def run() -> None:
        async with scripted_service(
            sends(complete(3, "3.a"), close=1012),  # the server restarts
            sends(close=1012),                      # and again, before a message: no quick return
            sends(live("bounty.created", 1, 4, "4.a"), close=1011),
        ) as service:
            backoff = Backoff(initial=1.0, ceiling=1.0, restart_window=0.05, rng=lambda: 0.5)
            async with watching(service.url, backoff=backoff) as watched:
                await watched.until(lambda: len(service.opened_at) == 4, "the fourth connection")
                assert watched.disconnects == [(1012, 0.025), (1012, 0.75), (1011, 0.75)]
                first, second, third, fourth = service.opened_at
                assert second - first < 0.5
                assert third - second >= 0.75
                assert fourth - third >= 0.75
                assert service.paths == ["/ws/events", "/ws/events?since=3.a", "/ws/events?since=3.a",
                                         "/ws/events?since=4.a"]
    asyncio.run(run())


def test_while_the_server_restarts_it_retries_within_the_window_and_is_back_soon_after_it_listens() -> None:
    async def run() -> None:
        async def restart(connection: ServerConnection) -> None:
            await connection.send(json.dumps(complete(3, "3.a")))
            old_server.server.close()  # the old process stops listening; this connection stays open
            await connection.close(1012)

        old = ScriptedService([restart])
        async with serve(old.handle, "127.0.0.1", 0) as old_server:
            port = next(iter(old_server.sockets)).getsockname()[1]
            backoff = Backoff(initial=1.0, ceiling=1.0, restart_window=0.1, rng=lambda: 0.5)
            async with watching(f"http://127.0.0.1:{port}", backoff=backoff) as watched:
                await watched.until(lambda: len(watched.disconnects) >= 4, "three refused connections after the 1012")
                new = ScriptedService([sends(live("bounty.created", 1, 4, "4.a"))])
                async with serve(new.handle, "127.0.0.1", port):
                    listening_at = time.monotonic()
                    await watched.until(lambda: len(watched.events) == 1, "the message of the new process")
                    refused = len(watched.disconnects) - 1
                    assert watched.disconnects == [(1012, 0.05)] + [(1006, pytest.approx(0.075))] * refused
                assert new.paths == ["/ws/events?since=3.a"]
                # within a pause of the window, not the doubling pause of 0.5 s or more
                assert new.opened_at[0] - listening_at < 0.5
    asyncio.run(run())
