"""The websocket clients of bench/reconnect_storm.py: lean, and reconnecting as the Python client does.

Each client follows `/ws/events` from an address of its own (`X-Forwarded-For`, through a proxy
the server trusts) and, when its connection ends, does what `bounty_client.events.watch_events`
does: it waits `Backoff.next_delay(close code)` (1006 when no close frame came, or no connection,
or the handshake was refused or timed out after `watch_events`'s `open_timeout`), resets the
backoff on every message, and connects again with `?since=<the last position>` (built by
`bounty_client.events.events_url`). The policy is the client library's own class, so the bench
follows it when it changes.

What is lean: a raw asyncio protocol per connection that walks the frame headers and reads only
the tail of each text frame (`seq` and `position` come last in a live message); no JSON is
parsed. Each client checks that the seqs it receives run on by one across its connections (a
repeat or a gap is counted), and counts every snapshot message (a resumed client must get none).

A process of them (`client_worker`) is driven over a pipe by the bench: it opens its share of
the clients, marks a storm's start, says how many have resumed, and hands over what each
received. A client has **resumed** once its new connection has delivered every change committed
before that connection was accepted (the writer's newest seq, read from shared memory at the
101): at the message of that seq, or at the 101 itself when it had missed nothing (counted only
once that connection delivers a message). Against the plain server, at its first message.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import os
import sys
import time
from array import array
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlsplit

from bounty_client.events import Backoff, events_url, watch_events

# watch_events's own: how long a connection may take to open (TCP and handshake).
OPEN_TIMEOUT: float = inspect.signature(watch_events).parameters["open_timeout"].default
NO_CLOSE_CODE = 1006
OPEN_BATCH = 50  # clients opened at once at the start, as daphne's listen backlog admits
USER_AGENT = f"Python/{sys.version_info[0]}.{sys.version_info[1]} websockets/bench"
TAIL = 160  # bytes at the end of a text frame that hold `"seq":n,"position":"..."}`
COMPLETE = b'{"type":"snapshot.complete"'
TICK = 0.05  # the event loop's lag is sampled this often


class Refused(Exception):
    """The handshake was answered with another status than 101."""

    def __init__(self, status: int) -> None:
        super().__init__(f"handshake answered {status}")
        self.status = status


class NotAccepted(Exception):
    """The connection ended before the handshake was answered (daphne drops an upgrade it has not
    accepted within its handshake timeout, 5 s)."""


class Wire(asyncio.Protocol):
    """One connection of a client: the upgrade, then frames."""

    def __init__(self, client: StormClient, request: bytes) -> None:
        self.client = client
        self.request = request
        self.buffer = bytearray()
        self.upgraded = False
        self.close_code: int | None = None
        self.messages = 0
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[float] = loop.create_future()
        self.closed: asyncio.Future[int] = loop.create_future()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(NotAccepted())
        if not self.closed.done():
            self.closed.set_result(self.close_code or NO_CLOSE_CODE)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            status = int(head.split(b" ", 2)[1])
            if status != 101:
                self.opened.set_exception(Refused(status))
                self.transport.close()
                return
            if b"\r\nsec-websocket-extensions:" in head:  # these clients read no compressed frames
                self.opened.set_exception(Refused(-1))
                self.transport.close()
                return
            self.upgraded = True
            del self.buffer[:end + 4]
            self.opened.set_result(now)
            self.client.accepted(self, now)
        self._frames(now)

    def _frames(self, now: float) -> None:
        buffer = self.buffer
        position, size = 0, len(buffer)
        while size - position >= 2:
            opcode, length, start = buffer[position] & 0x0F, buffer[position + 1] & 0x7F, position + 2
            if length == 126:
                if size - position < 4:
                    break
                length, start = int.from_bytes(buffer[position + 2:position + 4], "big"), position + 4
            elif length == 127:
                if size - position < 10:
                    break
                length, start = int.from_bytes(buffer[position + 2:position + 10], "big"), position + 10
            end = start + length
            if end > size:
                break
            position = end
            if opcode == 1:
                self.messages += 1
                self.client.message(self, bytes(buffer[start:min(start + 32, end)]),
                                    bytes(buffer[max(start, end - TAIL):end]), now)
            elif opcode == 9:  # ping: a pong with the same payload, masked (zero mask)
                self.transport.write(bytes((0x8A, 0x80 | length, 0, 0, 0, 0)) + bytes(buffer[start:end]))
            elif opcode == 8:
                self.close_code = int.from_bytes(buffer[start:start + 2], "big") if length >= 2 else 1005
                self.transport.write(bytes((0x88, 0x82, 0, 0, 0, 0)) + bytes(buffer[start:start + 2]))
                self.transport.close()
                break
        del buffer[:position]

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class StormClient:
    """A follower of the feed from `address` that reconnects as watch_events does."""

    def __init__(self, host: str, port: int, address: str, position: str, seq: int, plain: bool,
                 head: Any) -> None:
        self.host, self.port, self.address = host, port, address
        self.position, self.last_seq = position, seq
        self.plain = plain  # against the plain websockets server: no seqs to check
        self.head = head  # the writer's newest committed seq (shared memory)
        self.backoff = Backoff()
        self.stopped = False
        self.wire: Wire | None = None
        self.seqs = array("q")  # every message received: its seq (-1: a snapshot's), and when
        self.times = array("d")
        self.gaps = self.repeats = self.snapshots = 0
        self.attempts = 0
        self.outcomes: Counter[str] = Counter()  # how each connection ended: a close code, or why it failed
        self.pauses: list[float] = []
        self.storm_start: float | None = None
        self.dropped: float | None = None  # when the connection open at the storm's start ended
        self.resumed: float | None = None
        self.accepted_at: float | None = None  # the 101 of the connection it resumed on
        self._catch_up_to: int | None = None  # the seq the new connection must deliver
        self._tentative: tuple[Wire, float] | None = None  # accepted having missed nothing: its 101
        self.first_message = asyncio.get_running_loop().create_future()

    def mark(self, at: float) -> None:
        """A storm starts at `at`: what follows is counted for it."""
        self.storm_start, self.dropped, self.resumed, self.accepted_at = at, None, None, None
        self._catch_up_to = self._tentative = None
        self.attempts, self.outcomes, self.pauses = 0, Counter(), []

    def accepted(self, wire: Wire, at: float) -> None:
        if self.dropped is None or self.resumed is not None:
            return
        self.accepted_at = at
        if self.plain:
            return
        newest = int(self.head.value)
        if newest > self.last_seq:
            self._catch_up_to = newest
        else:
            self._tentative = (wire, at)

    def message(self, wire: Wire, head: bytes, tail: bytes, at: float) -> None:
        self.backoff.reset()
        if not self.first_message.done():
            self.first_message.set_result(None)
        if self.plain:
            self.seqs.append(0)
            self.times.append(at)
            if self.dropped is not None and self.resumed is None:
                self.resumed = at
            return
        found = tail.rfind(b'"position":"')
        if found < 0 or head.startswith(COMPLETE):  # a snapshot's record or its end
            self.snapshots += 1
            self.seqs.append(-1)
            self.times.append(at)
            return
        start = found + 12
        self.position = tail[start:tail.index(b'"', start)].decode()
        digits = tail.rindex(b'"seq":') + 6
        seq = int(tail[digits:tail.index(b",", digits)])
        if seq <= self.last_seq:
            self.repeats += 1
        else:
            self.gaps += seq > self.last_seq + 1
            self.last_seq = seq
        self.seqs.append(seq)
        self.times.append(at)
        if self.dropped is not None and self.resumed is None:
            if self._catch_up_to is not None and seq >= self._catch_up_to:
                self.resumed = at
            elif self._tentative is not None and self._tentative[0] is wire:
                self.resumed = self._tentative[1]

    def request(self) -> bytes:
        url = urlsplit(events_url(f"ws://{self.host}:{self.port}", self.position))
        key = base64.b64encode(os.urandom(16)).decode()
        return (f"GET {url.path}{'?' + url.query if url.query else ''} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
                f"User-Agent: {USER_AGENT}\r\nX-Forwarded-For: {self.address}\r\n\r\n").encode()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopped:
            wire = self.wire = Wire(self, self.request())
            self.attempts += 1
            code = NO_CLOSE_CODE
            try:
                async with asyncio.timeout(OPEN_TIMEOUT):
                    await loop.create_connection(lambda w=wire: w, self.host, self.port)
                    await wire.opened
            except Refused as refused:
                self.outcomes[f"refused {refused.status}" if refused.status > 0 else "compressed"] += 1
                wire.abort()
            except NotAccepted:
                self.outcomes["closed before 101"] += 1
            except TimeoutError:
                self.outcomes["open timed out"] += 1
                wire.abort()
            except OSError as error:
                self.outcomes[type(error).__name__] += 1
                wire.abort()
            else:
                code = await wire.closed
                self.outcomes[str(code)] += 1
            if self.storm_start is not None and self.dropped is None and time.perf_counter() >= self.storm_start:
                self.dropped = time.perf_counter()
            if self.resumed is None:
                self._catch_up_to = self._tentative = None
            if self.stopped:
                return
            pause = self.backoff.next_delay(code)
            self.pauses.append(pause)
            await asyncio.sleep(pause)

    def stop(self) -> None:
        self.stopped = True
        if self.wire is not None:
            self.wire.abort()


def client_worker(pipe: Connection, head: Any) -> None:
    """A process of clients, driven by the bench over `pipe` (see `Worker` below)."""
    asyncio.run(Worker(pipe, head).serve())


class Worker:
    """Commands, each answered once:

    ("open", host, port, addresses, position, seq, plain): opens a client from each address,
        OPEN_BATCH at a time (each batch accepted before the next): how many opened;
    ("following",): how many have received a message since they opened;
    ("mark", at): a storm starts at `at` (perf_counter); the event loop's lag is reset;
    ("status",): (resumed, dropped, the event loop's largest lag since the mark in seconds);
    ("collect",): what each client received, and its counts;
    ("close",): every client stopped; ("exit",).
    """

    def __init__(self, pipe: Connection, head: Any) -> None:
        self.pipe, self.head = pipe, head
        self.clients: list[StormClient] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.lag = 0.0

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        commands: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        loop.add_reader(self.pipe.fileno(), lambda: commands.put_nowait(self.pipe.recv()))
        ticker = asyncio.create_task(self._tick())
        while True:
            command = await commands.get()
            try:
                answer = await self.handle(command)
            except Exception as error:  # reported to the bench
                answer = error
            if command[0] == "exit":
                break
            self.pipe.send(answer)
        ticker.cancel()

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + TICK
            await asyncio.sleep(TICK)
            self.lag = max(self.lag, time.perf_counter() - due)

    async def handle(self, command: tuple[Any, ...]) -> Any:
        kind = command[0]
        if kind == "open":
            _, host, port, addresses, position, seq, plain = command
            opened = 0
            for start in range(0, len(addresses), OPEN_BATCH):
                batch = [StormClient(host, port, address, position, seq, plain, self.head)
                         for address in addresses[start:start + OPEN_BATCH]]
                self.clients += batch
                self.tasks += [asyncio.create_task(client.run()) for client in batch]
                await asyncio.sleep(0)  # each has made its first connection's Wire
                waits = [client.wire.opened for client in batch if client.wire is not None]
                results = await asyncio.gather(*waits, return_exceptions=True)
                opened += sum(not isinstance(result, BaseException) for result in results)
            return opened
        if kind == "following":
            return sum(client.first_message.done() for client in self.clients)
        if kind == "mark":
            for client in self.clients:
                client.mark(command[1])
            self.lag = 0.0
            return None
        if kind == "status":
            return (sum(client.resumed is not None for client in self.clients),
                    sum(client.dropped is not None for client in self.clients), self.lag)
        if kind == "collect":
            return [{"address": c.address, "seqs": c.seqs.tobytes(), "times": c.times.tobytes(), "gaps": c.gaps,
                     "repeats": c.repeats, "snapshots": c.snapshots, "attempts": c.attempts,
                     "outcomes": dict(c.outcomes), "pauses": c.pauses, "dropped": c.dropped, "resumed": c.resumed,
                     "accepted": c.accepted_at}
                    for c in self.clients]
        if kind == "close":
            for client in self.clients:
                client.stop()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.clients, self.tasks = [], []
            return None
        if kind == "exit":
            for client in self.clients:
                client.stop()
            return None
        raise ValueError(f"unknown command {kind!r}")
