"""Websocket `/ws/events` benchmark: broadcast latency to many clients, snapshot throughput.

    cd /work/main && .venv/bin/python bench/ws_broadcast.py [--clients 1000] [--changes 1000]
        [--records 100000] [--database sqlite:////tmp/ws-bench/db.sqlite3]

1. Broadcast: `--clients` websocket clients (one asyncio process, on loopback) follow a daphne
   process serving bountysite.asgi as deploy/bounty-web.service does. The benchmark commits
   `--changes` change-log entries as the indexer does (one transaction each, in a burst) and
   notifies the feed; per change, the time from its commit to its receipt at the last client.
   p50 and p99 (target p99 < 250 ms).
2. The floor: the same clients and burst against a plain `websockets` server process that
   broadcasts each change it gets on a control connection (websockets.broadcast). Printed as
   the ratio daphne/floor.
3. Snapshot: one client reads the snapshot of `--records` bounties: records/s (target 20,000).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR)]

import orjson  # noqa: E402
import websockets  # noqa: E402

SECRET_KEY = "bench-ws-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKL"
CONTRACT = "0x" + "ab" * 20
USDC = "0x" + "cd" * 20

FLOOR_SERVER = """
import asyncio, sys, websockets
clients = set()
async def handler(ws):
    if ws.request.path == "/control":
        async for message in ws:
            websockets.broadcast(clients, message)
        return
    clients.add(ws)
    try:
        await ws.wait_closed()
    finally:
        clients.discard(ws)
async def main():
    async with websockets.serve(handler, "127.0.0.1", int(sys.argv[1]), max_queue=None, ping_interval=None):
        await asyncio.Future()
asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not start")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def open_clients(url: str, count: int) -> list[Any]:
    clients: list[Any] = []
    for start in range(0, count, 100):
        clients += await asyncio.gather(*[websockets.connect(url, max_queue=None, open_timeout=60, ping_interval=None)
                                          for _ in range(start, min(count, start + 100))])
    return clients


async def collect(client: Any, count: int, key: str, arrivals: dict[int, float]) -> None:
    """Records, per change, the latest arrival among all clients."""
    for _ in range(count):
        message = orjson.loads(await client.recv())
        n = message[key] if key == "seq" else message["payload"]["n"]
        now = time.perf_counter()
        if now > arrivals.get(n, 0.0):
            arrivals[n] = now


async def broadcast_daphne(url: str, clients_count: int, changes: int) -> list[float]:
    from asgiref.sync import sync_to_async

    clients = await open_clients(url + "?since=" + str(await sync_to_async(current_seq)()), clients_count)
    arrivals: dict[int, float] = {}
    readers = [asyncio.create_task(collect(c, changes, "seq", arrivals)) for c in clients]
    await asyncio.sleep(1)
    committed = await sync_to_async(commit_burst)(changes)
    await asyncio.wait_for(asyncio.gather(*readers), 600)
    for client in clients:
        await client.close()
    return [(arrivals[seq] - at) * 1000 for seq, at in committed.items()]


async def broadcast_floor(port: int, clients_count: int, changes: int) -> list[float]:
    clients = await open_clients(f"ws://127.0.0.1:{port}/", clients_count)
    control = await websockets.connect(f"ws://127.0.0.1:{port}/control")
    arrivals: dict[int, float] = {}
    readers = [asyncio.create_task(collect(c, changes, "n", arrivals)) for c in clients]
    await asyncio.sleep(1)
    sent: dict[int, float] = {}
    for n in range(changes):
        sent[n] = time.perf_counter()
        await control.send(orjson.dumps({"type": "bounty.updated", "payload": {"n": n, **PAYLOAD}, "seq": n})
                           .decode())
    await asyncio.wait_for(asyncio.gather(*readers), 600)
    for client in [*clients, control]:
        await client.close()
    return [(arrivals[n] - at) * 1000 for n, at in sent.items()]


async def snapshot_rate(url: str, records: int) -> float:
    started = time.perf_counter()
    async with websockets.connect(url, max_queue=None, max_size=None) as client:
        for _ in range(records):
            await client.recv()
    return records / (time.perf_counter() - started)


PAYLOAD = {"id": 1, "status": "open", "prompt": "x" * 300}


def seed(records: int) -> None:
    """The active deployment with `records` bounties (kept between runs)."""
    from datetime import UTC, datetime

    from indexer.models import SyncState
    from records.models import Bounty, Deployment

    deployment, _ = Deployment.objects.get_or_create(chain_id=91342, contract_address=CONTRACT,
                                                     defaults={"usdc_address": USDC})
    SyncState.objects.get_or_create(deployment=deployment)
    have = Bounty.objects.filter(deployment=deployment).count()
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    for start in range(have + 1, records + 1, 5_000):
        Bounty.objects.bulk_create([Bounty(
            deployment=deployment, bounty_id=n, prompt=f"bounty {n} " + "x" * 200, bounty_amount=10**8,
            fee_amount=25 * 10**5, bond_amount=10**7, duration=86_400, poster="0x" + f"{n:040x}",
            deadline=moment, challenge_window=86_400, metadata_uri=f"ipfs://{n}", metadata_hash="0x" + "11" * 32,
            tx_hash="0x" + f"{n:064x}", block_number=n, log_index=0, created_at=moment, search_text="",
        ) for n in range(start, min(records, start + 4_999) + 1)])


def commit_burst(changes: int) -> dict[int, float]:
    """`changes` commits of one change each, as the indexer writes them; seq -> commit time."""
    from django.db import transaction

    from indexer.models import ChangeLogEntry, SyncState
    from records import live

    committed: dict[int, float] = {}
    for _ in range(changes):
        with transaction.atomic():
            state = SyncState.objects.select_for_update().get()
            state.last_seq += 1
            ChangeLogEntry.objects.create(deployment_id=state.deployment_id, seq=state.last_seq,
                                          type="bounty.updated", payload=PAYLOAD, block_number=1)
            state.save(update_fields=["last_seq"])
        committed[state.last_seq] = time.perf_counter()
        live.notify_changes()
    return committed


def current_seq() -> int:
    from indexer.models import SyncState

    return int(SyncState.objects.get().last_seq)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--database", default="sqlite:////tmp/ws-bench/db.sqlite3")
    args = parser.parse_args()
    Path("/tmp/ws-bench").mkdir(exist_ok=True)
    env = {**os.environ, "DATABASE_URL": args.database, "DJANGO_SECRET_KEY": SECRET_KEY,
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "BOUNTY_CONTRACT_ADDRESS": CONTRACT, "BOUNTY_USDC_ADDRESS": USDC,
           "BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT": str(args.clients + 10), "LOG_LEVEL": "WARNING"}
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    seed(args.records)

    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port),
                               "bountysite.asgi:application"], cwd=PROJECT_DIR, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    floor_port = free_port()
    floor = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER, str(floor_port)])
    try:
        wait_listening(port, server)
        wait_listening(floor_port, floor)
        url = f"ws://127.0.0.1:{port}/ws/events"
        rate = asyncio.run(snapshot_rate(url, args.records))
        print(f"snapshot of {args.records} records to one client: {rate:,.0f} records/s (target 20,000: "
              f"{'met' if rate >= 20_000 else 'NOT met'})", flush=True)
        daphne = asyncio.run(broadcast_daphne(url, args.clients, args.changes))
        p50, p99 = statistics.median(daphne), percentile(daphne, 0.99)
        print(f"broadcast of {args.changes} changes to {args.clients} clients, commit -> last client:")
        print(f"  /ws/events (daphne): p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  (target p99 < 250 ms: "
              f"{'met' if p99 < 250 else 'NOT met'})", flush=True)
        plain = asyncio.run(broadcast_floor(floor_port, args.clients, args.changes))
        f50, f99 = statistics.median(plain), percentile(plain, 0.99)
        print(f"  plain websockets:    p50 {f50:8.1f} ms  p99 {f99:8.1f} ms")
        print(f"  ratio daphne/floor:  p50 {p50 / f50:8.1f} x   p99 {p99 / f99:8.1f} x")
    finally:
        for process in (server, floor):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
