"""A JSON-RPC server made on loopback for the tests and benches: an aiohttp app on a free port,
served from a thread of its own with a client session for what it stands in front of, that can go
away (its port refusing connections, the open ones cut) and come back. tests/node_proxy.py (a node
far away) and tests/explorer.py (a Blockscout) are made on it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Self

from aiohttp import ClientSession, web

from contracts.devchain import free_port


def numbered_span(call: Any) -> int | None:
    """The blocks an eth_getLogs call asks for, when its range is given by block numbers (None for
    any other call, a block hash, or a tag such as "latest")."""
    if not isinstance(call, dict) or call.get("method") != "eth_getLogs":
        return None
    query = (call.get("params") or [{}])[0]
    try:
        return int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1
    except (KeyError, TypeError, ValueError):
        return None


class LoopbackServer:
    name = "loopback server"  # as a failure to start names it
    path = "/{tail:.*}"  # the route POSTs are answered on

    def __init__(self) -> None:
        self.port = free_port()
        self._down = False  # between go_down and come_back
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the {self.name} did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def go_down(self) -> None:
        """The server goes away: its port refuses connections (and the open ones are closed) until
        `come_back`, as a provider's maintenance or a network blip does."""
        self._down = True  # a connection kept alive is cut at its next request
        asyncio.run_coroutine_threadsafe(self._site.stop(), self._loop).result(10)

    def come_back(self) -> None:
        async def restart() -> None:
            self._down = False
            self._site = web.TCPSite(self._runner, "127.0.0.1", self.port)
            await self._site.start()

        asyncio.run_coroutine_threadsafe(restart(), self._loop).result(10)

    def cut_if_down(self, request: web.Request) -> web.Response | None:
        """For a request on a connection kept alive while the server is down: the connection cut,
        no answer (the Response is never sent)."""
        if self._down and request.transport is not None:
            request.transport.abort()
            return web.Response(status=503)
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        await self._runner.cleanup()  # closes the connections still open and their handlers
        await self._session.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post(self.path, self.handle)
        self._runner = runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        self._site = web.TCPSite(runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(self._site.start())
        self._session = self._loop.run_until_complete(self._open_session())
        self._ready.set()
        self._loop.run_forever()

    @staticmethod
    async def _open_session() -> ClientSession:
        return ClientSession()
