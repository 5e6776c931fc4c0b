"""Run by tests/docs/test_read_hops.py in a process of its own: a `GET /bounties/<id>` and a
websocket snapshot through the service's ASGI application (bountysite.asgi, as daphne runs it),
with every thread's calls watched (the main thread's from the first read on); prints, as JSON, the
modules of ours that each read called, in the order first called."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
OURS = tuple(str(ROOT / package) + os.sep for package in ("bountysite", "records"))
called: dict[str, None] = {}


def watch(frame: FrameType, event: str, arg: Any) -> None:
    if event == "call" and frame.f_code.co_filename.startswith(OURS) and frame.f_code.co_name != "<module>":
        called.setdefault(str(Path(frame.f_code.co_filename).relative_to(ROOT)), None)


async def get(application: Any, path: str, query: bytes) -> int:
    from asgiref.testing import ApplicationCommunicator

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), (b"accept", b"application/json")],
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80)}
    communicator: Any = cast(Any, ApplicationCommunicator)(application, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(30)
    while (await communicator.receive_output(30)).get("more_body"):
        pass
    return int(start["status"])


async def snapshot(application: Any) -> str:
    from channels.testing import WebsocketCommunicator

    communicator = WebsocketCommunicator(application, "/ws/events")
    connected, _ = await communicator.connect(30)
    assert connected
    while (message := json.loads(await communicator.receive_from(30)))["type"] != "snapshot.complete":
        pass
    await communicator.disconnect()
    return str(message["position"])


def main() -> None:
    # Every thread started from here on is watched from its start (a thread cannot be watched
    # later); this one from the first read on: what loading the service and its first request
    # call is no read's, and watching it took most of the run.
    threading.setprofile(watch)
    import django

    django.setup()
    from bountysite.asgi import application

    bounty = sys.argv[1]
    asyncio.run(get(application, "/health", b""))  # Django loads its URLs and views on a first request
    called.clear()  # what the threads called while the process started is no read's
    sys.setprofile(watch)
    status = asyncio.run(get(application, f"/bounties/{bounty}", b""))
    assert status == 200, status
    get_modules = list(called)
    called.clear()
    asyncio.run(snapshot(application))
    snapshot_modules = list(called)
    sys.setprofile(None)
    threading.setprofile(None)
    print(json.dumps({"get": get_modules, "snapshot": snapshot_modules}))
    sys.stdout.flush()
    os._exit(0)  # the feed's and the lanes' threads are not waited for


if __name__ == "__main__":
    main()
