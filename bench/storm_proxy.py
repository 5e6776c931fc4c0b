"""A loopback TCP proxy for bench/reconnect_storm.py's blips: it forwards every connection to the
server and, on command, drops them all at once (each side reset, as a network that lost them).

tests/faulty_proxy.py is the project's proxy for one test's few connections: one thread over a
selector, each upstream connection made blocking (up to 5 s) and a listen backlog of 64. In front
of thousands of reconnecting clients and a daphne whose backlog is 50, one connect waiting on a
full accept queue would stall every other connection, and the proxy would be what is measured.
This one is asyncio in a process of its own: upstream connections are made concurrently, each
side is read only as fast as the other takes it (asyncio's flow control), and it listens with the
backlog the bench gives it (the web unit's), so that its accept queue is never what is measured.

Commands over the pipe, each answered once: ("cut",) resets every connection, answering how many
and how long it took; ("stats",) the connections open and accepted so far and the upstream
connects that failed; ("exit",).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from multiprocessing.connection import Connection
from typing import Any


class Side(asyncio.Protocol):
    """One side of a forwarded connection: what it receives goes to its peer."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.peer: Side | None = None
        self.transport: Any = None
        self.pending: list[bytes] = []  # received before the peer was connected

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.proxy.open.add(self)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)
        else:
            self.pending.append(data)

    def connected(self, peer: Side) -> None:
        self.peer = peer
        for data in self.pending:
            peer.transport.write(data)
        self.pending = []

    def pause_writing(self) -> None:  # the peer reads no more than this side takes
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def eof_received(self) -> bool:
        if self.peer is not None and self.peer.transport is not None and self.peer.transport.can_write_eof():
            self.peer.transport.write_eof()
            return True  # half-closed: the other way goes on until the peer closes too
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.proxy.open.discard(self)
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()  # after what it has been given

    def reset(self) -> None:
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


class Proxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.open: set[Side] = set()
        self.accepted = 0
        self.upstream_failures = 0

    def client(self) -> Side:
        side = Side(self)
        self.accepted += 1
        asyncio.get_running_loop().create_task(self._connect(side))
        return side

    async def _connect(self, client: Side) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, server = await loop.create_connection(lambda: Side(self), "127.0.0.1", self.upstream_port)
        except OSError:
            self.upstream_failures += 1
            if client.transport is not None:
                client.transport.close()  # as a proxy whose upstream refuses: the client sees the end
            return
        if client.transport is None or client.transport.is_closing():
            server.transport.close()
            return
        server.connected(client)
        client.connected(server)

    def cut(self) -> tuple[int, float]:
        started = time.perf_counter()
        sides = list(self.open)
        for side in sides:
            side.peer = None  # no close passed on: both sides are reset here
        for side in sides:
            side.reset()
        return len(sides), time.perf_counter() - started


def proxy_worker(pipe: Connection, port: int, upstream_port: int, backlog: int) -> None:
    asyncio.run(_serve(pipe, port, upstream_port, backlog))


async def _serve(pipe: Connection, port: int, upstream_port: int, backlog: int) -> None:
    loop = asyncio.get_running_loop()
    proxy = Proxy(upstream_port)
    server = await loop.create_server(proxy.client, "127.0.0.1", port, backlog=backlog, reuse_address=True)
    commands: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
    loop.add_reader(pipe.fileno(), lambda: commands.put_nowait(pipe.recv()))
    pipe.send("listening")
    while True:
        command = await commands.get()
        if command[0] == "cut":
            pipe.send(proxy.cut())
        elif command[0] == "stats":
            pipe.send((len(proxy.open) // 2, proxy.accepted, proxy.upstream_failures))
        elif command[0] == "exit":
            server.close()
            pipe.send(None)
            return
