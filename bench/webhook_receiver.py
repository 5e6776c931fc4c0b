"""The receiver of bench/webhooks.py: tests/webhooks/receiver.py run as it is (its application,
routes, listen backlog and `listening` line; each delivery kept and answered as its name's
behaviour says), but for `GET /stats?seqs=1`, which also gives each delivery's `seq`, read from its
body, and status, so that the bench can match a delivery to its change and check each endpoint's
order. `GET /stats` without it answers as the tests' receiver does.

    python bench/webhook_receiver.py PORT
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.webhooks import receiver


class BenchReceiver(receiver.Receiver):
    async def stats(self, request: web.Request) -> web.Response:
        """Per name, `[arrived, seq, status]` of each delivery in order of arrival (`?seqs=1`)."""
        if not request.query.get("seqs"):
            return await super().stats(request)
        return web.json_response({name: [[d["arrived"], json.loads(d["body"]).get("seq"), d["status"]] for d in found]
                                  for name, found in self.deliveries.items()})


if __name__ == "__main__":
    # The tests' application makes its `Receiver` by this name: this one is made in its place, so
    # that what serves the deliveries is the tests' receiver, unchanged.
    receiver.Receiver = BenchReceiver  # type: ignore[misc]
    asyncio.run(receiver.main(int(sys.argv[1])))
