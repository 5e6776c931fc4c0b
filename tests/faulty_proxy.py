"""A TCP proxy on loopback in front of a server (PostgreSQL, for the tests of an indexer whose
database goes away, and of a standby that lags and is promoted), which the test switches between
forwarding and the ways a server is lost:

- `refuse()`: its port refuses connections and the open ones are closed, as a server stopped;
- `blackhole()`: connections are accepted and nothing more is ever answered, on the new ones and
  the open ones alike, as a host that died or was cut off by the network (no FIN, no RST);
- `cut()`: the open connections are reset (RST), as a server killed mid-transaction or mid-commit;
- `blackhole_after(needle)`: forwards until a client sends bytes holding `needle` (a statement:
  `COMMIT`, `COPY`), which reach the server, then turns into a blackhole: the server did the work
  and its answer never comes, as with a host lost mid-commit;
- `forward()`: back to forwarding. The connections a blackhole held are closed: the server sees
  them end (and a session's advisory lock go), as its keepalives would find in the end;
- `retarget(host, port)`: new connections to another server, the open ones reset (a failover);
- `delay(seconds)`: forwarding goes on, each chunk held `seconds` first (a server far away).

One thread runs it all over a selector; each switch returns once that thread has applied it, so
that what the test does next meets the new behaviour. It never blocks on a socket: what a side
does not take at once waits in that side's own buffer until it is writable, so a client reading
one connection only once another has moved on (pg_basebackup's backup and its WAL stream) cannot
hold up the thread that moves the other.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Self

from contracts.devchain import free_port

FORWARD, REFUSE, BLACKHOLE = "forward", "refuse", "blackhole"


class FaultyProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self.mode = FORWARD
        self.accepted = 0  # connections accepted, in every mode
        self.swallowed = 0  # bytes either side sent that a blackhole never passed on: the fault met them
        self._selector = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        # Each open socket, the client's and the server's side of a connection, to the other side
        # (None: a connection accepted in a blackhole, which has no server's side).
        self._peers: dict[socket.socket, socket.socket | None] = {}
        self._clients: set[socket.socket] = set()  # the clients' sides
        self._needle: bytes | None = None  # blackhole_after's
        self._needle_met = threading.Event()
        self._commands: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = queue.SimpleQueue()
        self.latency = 0.0  # delay()'s
        self._unsent: dict[socket.socket, bytearray] = {}  # what a side has not taken yet, in order
        self._close_when_sent: set[socket.socket] = set()  # sides whose other side has closed
        self._delayed: collections.deque[tuple[float, socket.socket, socket.socket, bytes]] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._running = True
        self._thread = threading.Thread(target=self._serve, name="faulty proxy", daemon=True)

    def __enter__(self) -> Self:
        self._listen()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.refuse()
        self._running = False
        self._wake_w.send(b"x")
        self._thread.join(5)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # ------------------------------------------------------------------ what the test switches

    def forward(self) -> None:
        def apply() -> None:
            if self.mode == BLACKHOLE:
                self._close_all()
            self.mode = FORWARD
            if self._listener is None:
                self._listen()
        self._apply(apply)

    def refuse(self) -> None:
        def apply() -> None:
            self.mode = REFUSE
            if self._listener is not None:
                self._selector.unregister(self._listener)
                self._listener.close()
                self._listener = None
            self._close_all()
        self._apply(apply)

    def blackhole(self) -> None:
        def apply() -> None:
            self.mode = BLACKHOLE
            if self._listener is None:
                self._listen()
        self._apply(apply)

    def cut(self) -> None:
        """Resets every open connection, both sides (the mode stays)."""
        self._apply(lambda: self._close_all(reset=True))

    def retarget(self, host: str, port: int) -> None:
        """New connections go to `host:port`, and the open ones are reset: a virtual address moved
        to another server (a promoted standby), as a failover moves it."""
        def apply() -> None:
            self.upstream = (host, port)
            self._close_all(reset=True)
        self._apply(apply)

    def blackhole_after(self, needle: bytes) -> threading.Event:
        """The blackhole from the first bytes a client sends holding `needle`, those forwarded;
        the Event returned is set then."""
        def apply() -> None:
            self._needle = needle
            self._needle_met.clear()
        self._apply(apply)
        return self._needle_met

    # ------------------------------------------------------------------ the proxy's thread

    def delay(self, seconds: float) -> None:
        def apply() -> None:
            self.latency = seconds
        self._apply(apply)

    def _apply(self, command: Callable[[], None]) -> None:
        done = threading.Event()
        self._commands.put((command, done))
        self._wake_w.send(b"x")
        if not done.wait(10):
            raise RuntimeError("the proxy did not apply the switch")

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ)

    def _close(self, sock: socket.socket, reset: bool = False) -> None:
        if sock not in self._peers:  # closed already
            return
        del self._peers[sock]
        self._unsent.pop(sock, None)
        self._close_when_sent.discard(sock)
        self._clients.discard(sock)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def _close_all(self, reset: bool = False) -> None:
        for sock in list(self._peers):
            self._close(sock, reset)

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        client.setblocking(False)
        upstream: socket.socket | None = None
        if self.mode == FORWARD:
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                return
            upstream.setblocking(False)
            self._peers[upstream] = client
            self._selector.register(upstream, selectors.EVENT_READ)
        self._peers[client] = upstream
        self._clients.add(client)
        self._selector.register(client, selectors.EVENT_READ)

    def _pump(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        peer = self._peers.get(sock)
        if not data:  # that side closed: so does the other, unless nothing is told in a blackhole
            self._close(sock)
            if peer is not None and self.mode != BLACKHOLE:
                if peer in self._unsent:  # once it has taken what it was sent
                    self._close_when_sent.add(peer)
                else:
                    self._close(peer)
            return
        if self.mode != FORWARD or peer is None or peer not in self._peers:
            self.swallowed += len(data)
            return  # swallowed, never answered
        if self.latency or self._delayed:  # in order behind what waits already
            self._delayed.append((time.monotonic() + self.latency, sock, peer, data))
            return
        self._send(sock, peer, data)

    def _send(self, sock: socket.socket, peer: socket.socket, data: bytes) -> None:
        if peer not in self._peers:
            return
        unsent = self._unsent.get(peer)
        if unsent is not None:  # behind what waits already
            unsent += data
        else:
            try:
                sent = peer.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._close(sock)
                self._close(peer)
                return
            if sent < len(data):
                self._unsent[peer] = bytearray(data[sent:])
                self._selector.modify(peer, selectors.EVENT_READ | selectors.EVENT_WRITE)
        if self._needle is not None and sock in self._clients and self._needle in data:
            self._needle = None
            self.mode = BLACKHOLE
            self._needle_met.set()

    def _send_unsent(self, sock: socket.socket) -> None:
        """Sends what `sock` took too little of before, now that it is writable."""
        unsent = self._unsent.get(sock)
        if unsent is None:
            return
        try:
            sent = sock.send(unsent)
        except BlockingIOError:
            return
        except OSError:
            peer = self._peers.get(sock)
            self._close(sock)
            if peer is not None:
                self._close(peer)
            return
        del unsent[:sent]
        if not unsent:
            del self._unsent[sock]
            if sock in self._close_when_sent:
                self._close(sock)
            else:
                self._selector.modify(sock, selectors.EVENT_READ)

    def _send_due(self) -> float:
        """Sends the delayed chunks that are due; the seconds until the next one is."""
        while self._delayed and self._delayed[0][0] <= time.monotonic():
            _, sock, peer, data = self._delayed.popleft()
            self._send(sock, peer, data)
        return max(0.0, self._delayed[0][0] - time.monotonic()) if self._delayed else 0.5

    def _serve(self) -> None:
        while self._running:
            for key, events in self._selector.select(timeout=min(0.5, self._send_due())):
                sock = key.fileobj
                if sock is self._wake_r:
                    self._wake_r.recv(4096)
                    while not self._commands.empty():
                        command, done = self._commands.get()
                        command()
                        done.set()
                elif sock is self._listener:
                    self._accept()
                elif isinstance(sock, socket.socket) and sock in self._peers:
                    if events & selectors.EVENT_WRITE:
                        self._send_unsent(sock)
                    if events & selectors.EVENT_READ and sock in self._peers:
                        self._pump(sock)
