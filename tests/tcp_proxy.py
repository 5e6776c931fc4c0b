"""A loopback TCP proxy for the tests: forwards each connection to a target, and can stop
answering (bytes in flight and new connections wait: a host gone silent, or a link that stalls, so
that a streaming standby lags behind its primary), refuse connections (a server stopped), cut
every open connection (a server killed), and send new connections elsewhere (a virtual address
moved to a promoted standby, as a failover does)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Self

from contracts.devchain import free_port

CHUNK = 64 * 1024


class TcpProxy:
    def __init__(self, host: str, port: int) -> None:
        self.port = free_port()
        self.target = (host, port)
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp proxy", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the TCP proxy did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._call(self._stop_listening)
        self._call(self._cancel_connections)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _cancel_connections(self) -> None:
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def blackhole(self) -> None:
        """Nothing is answered: the bytes of open connections wait (what was read, in the proxy;
        the rest, in the sockets), and new connections are accepted and wait too, until `forward`."""
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def refuse(self) -> None:
        """The open connections are closed and new ones refused, until `forward`."""
        self._call(self._stop_listening)

    def forward(self) -> None:
        """Forwards again, what waited first."""
        self._call(self._listen)
        self._loop.call_soon_threadsafe(self._flowing.set)

    def cut(self) -> None:
        """Closes every open connection (reset), as a server killed under them leaves them."""
        self._call(self._close_all)

    def retarget(self, host: str, port: int) -> None:
        """New connections go to `host:port`; the open ones are cut."""
        self.target = (host, port)
        self.cut()

    def _call(self, function: Callable[[], object]) -> None:
        async def run() -> None:
            result = function()
            if asyncio.iscoroutine(result):
                await result
        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._connect, "127.0.0.1", self.port)

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._close_all()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _connect(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._writers.add(client_writer)
        await self._flowing.wait()  # a silent host accepts and answers nothing
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._writers.discard(client_writer)
            client_writer.transport.abort()
            return
        self._writers.add(upstream_writer)
        await asyncio.gather(self._pump(client_reader, upstream_writer), self._pump(upstream_reader, client_writer))
        for writer in (client_writer, upstream_writer):
            self._writers.discard(writer)
            writer.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(CHUNK):
                await self._flowing.wait()
                if writer.transport.is_closing():
                    break
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
