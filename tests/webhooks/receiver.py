"""A webhook receiver in a process of its own, for the tests and the bench (bench/webhooks.py):
`python -m tests.webhooks.receiver PORT` serves

- `POST /hook/<name>`: a delivery to endpoint `<name>`, kept with its headers and the time it
  arrived, answered as `<name>`'s behaviour says (status, delay, Retry-After, Location);
- `PUT /behaviour/<name>`: that behaviour, JSON `{"status": 200, "delay": 0, "retry_after": null,
  "location": null}`;
- `GET /deliveries/<name>`: what `<name>` was sent, in order of arrival (each kept once answered),
  with the deliveries it has in flight now and the most it had at once;
- `GET /stats`: per name, the count and the arrival times (for the bench).

It prints `listening` once it accepts connections.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import defaultdict
from typing import Any

from aiohttp import web


class Receiver:
    def __init__(self) -> None:
        self.deliveries: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.behaviour: dict[str, dict[str, Any]] = {}
        self.in_flight: dict[str, int] = defaultdict(int)
        self.most_in_flight: dict[str, int] = defaultdict(int)

    async def hook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.read()
        arrived = time.time()
        self.in_flight[name] += 1
        self.most_in_flight[name] = max(self.most_in_flight[name], self.in_flight[name])
        try:
            behaviour = self.behaviour.get(name, {})
            if behaviour.get("delay"):
                await asyncio.sleep(float(behaviour["delay"]))
            status = int(behaviour.get("status", 200))
            self.deliveries[name].append({
                "headers": {key.lower(): value for key, value in request.headers.items()},
                "body": body.decode(), "arrived": arrived, "status": status,
            })
            headers = {}
            if behaviour.get("retry_after") is not None:
                headers["Retry-After"] = str(behaviour["retry_after"])
            if behaviour.get("location"):
                headers["Location"] = str(behaviour["location"])
            return web.Response(status=status, text=str(behaviour.get("text", "ok")), headers=headers)
        finally:
            self.in_flight[name] -= 1

    async def set_behaviour(self, request: web.Request) -> web.Response:
        self.behaviour[request.match_info["name"]] = await request.json()
        return web.json_response({})

    async def delivered(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return web.json_response({"deliveries": self.deliveries.get(name, []), "in_flight": self.in_flight.get(name, 0),
                                  "most_in_flight": self.most_in_flight.get(name, 0)})

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({name: [d["arrived"] for d in found] for name, found in self.deliveries.items()})


def application() -> web.Application:
    receiver = Receiver()
    app = web.Application(client_max_size=16 * 1024**2)
    app.add_routes([web.post("/hook/{name}", receiver.hook), web.put("/behaviour/{name}", receiver.set_behaviour),
                    web.get("/deliveries/{name}", receiver.delivered), web.get("/stats", receiver.stats)])
    return app


async def main(port: int) -> None:
    runner = web.AppRunner(application(), access_log=None, handle_signals=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    print("listening", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
