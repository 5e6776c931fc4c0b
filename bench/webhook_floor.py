"""The floor of bench/webhooks.py: what this machine can deliver at most, with no worker. A bare
sender, in a process of its own, posts a body of a change's size, signed as a delivery is
(standardwebhooks' v1 HMAC, webhook-id and webhook-timestamp), to each of ENDPOINTS names of the
receiver (`/hook/e<n>`), each one request at a time as the worker sends an endpoint its changes, all
of them at once, for SECONDS; then it prints how many were answered 2xx and its CPU seconds (a JSON line).

No database, no change log, no positions, no attempts written: every delivery the worker makes
costs at least this, so that its deliveries a second against these are what the worker's own work
costs, on the same machine in the same run.

    python bench/webhook_floor.py URL_PREFIX ENDPOINTS SECONDS BODY_BYTES
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sys
import time

import aiohttp

SECRET = b"bench-floor-secret"


async def main(prefix: str, endpoints: int, seconds: float, size: int) -> None:
    body = json.dumps({"type": "bounty.updated", "payload": {"pad": "x" * max(0, size - 80)}, "seq": 1,
                       "position": "1:" + "0" * 16}).encode()
    delivered = failed = 0
    deadline = time.monotonic() + seconds

    async def endpoint(session: aiohttp.ClientSession, n: int) -> None:
        nonlocal delivered, failed
        url = f"{prefix}/hook/e{n}"
        count = 0
        while time.monotonic() < deadline:
            count += 1
            webhook_id, timestamp = f"msg_{n}_{count}", str(int(time.time()))
            mac = hmac.new(SECRET, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
            headers = {"content-type": "application/json", "webhook-id": webhook_id, "webhook-timestamp": timestamp,
                       "webhook-signature": "v1," + base64.b64encode(mac).decode()}
            try:
                async with session.post(url, data=body, headers=headers, allow_redirects=False) as answer:
                    await answer.read()
                    if 200 <= answer.status < 300:
                        delivered += 1
                    else:
                        failed += 1
            except (aiohttp.ClientError, OSError):
                failed += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
                                     timeout=aiohttp.ClientTimeout(total=10)) as session:
        started = time.monotonic()
        await asyncio.gather(*(endpoint(session, n) for n in range(endpoints)))
        took = time.monotonic() - started
    print(json.dumps({"delivered": delivered, "failed": failed, "seconds": took, "cpu_s": time.process_time()}),
          flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])))
