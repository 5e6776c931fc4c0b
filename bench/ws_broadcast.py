"""Websocket `/ws/events` benchmark: broadcast latency to many clients, snapshot throughput.

    .venv/bin/python bench/ws_broadcast.py [--clients 1000] [--changes 1000]
        [--records 100000] [--client-processes 2] [--database sqlite:////tmp/ws-bench/db.sqlite3]
        [--redis redis://127.0.0.1:6379/12] [--poll-ms N] [--resource-clients 1000,5000]

1. Broadcast: `--clients` websocket clients, spread over `--client-processes` processes, follow
   a daphne process serving bountysite.asgi as deploy/bounty-web@.service does. The benchmark
   commits `--changes` change-log entries as the indexer does (one transaction each, in a burst)
   and notifies the feeds; per change, the time from its commit to its receipt at the last
   client. p50 and p99 (target p99 < 250 ms). With `--redis` the server and the committing
   process share a channels_redis layer (as in production) and the notification wakes the feed;
   without it the feed finds the changes by polling every BOUNTY_WS_POLL_MS.
2. The floor: the same client processes and burst against a plain `websockets` server process
   that broadcasts each change it gets on a control connection (websockets.broadcast). Printed
   as the ratio daphne/floor.
3. Snapshot: one client reads the snapshot of `--records` bounties: records/s (target 20,000).
4. Resources: for each count of `--resource-clients`, that many clients follow the feed while the
   benchmark counts the server process's descriptors and, with `--redis`, its TCP connections to
   Redis (from /proc: its sockets whose peer is Redis's port); printed with the idle server's,
   and the descriptors each client adds.

The clients measure the server, not themselves: each is a lean websocket reader on a raw
asyncio transport that walks frame headers, counts text frames and stamps each received chunk
once (the frames it completes arrive at that moment); it checks the seq of the last frame of
each chunk, so a lost, repeated or reordered message fails the run. No JSON is parsed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR)]

import orjson  # noqa: E402

from records.history import Position  # noqa: E402
from tests.servers import connections_to, descriptors  # noqa: E402

SECRET_KEY = "bench-ws-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKL"
CONTRACT = "0x" + "ab" * 20
USDC = "0x" + "cd" * 20
PAYLOAD = {"id": 1, "status": "open", "prompt": "x" * 300}
_DIGITS = re.compile(rb"[0-9]+")

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
    async with websockets.serve(handler, "127.0.0.1", int(sys.argv[1]), max_queue=None, ping_interval=None,
                                compression=None):
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


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ---------------------------------------------------------------------------- lean clients


class LeanClient(asyncio.Protocol):
    """A websocket client that reads `expected` text messages and stamps each chunk it receives.

    `first_seq` given: the live messages must carry seqs first_seq, first_seq + 1, ... in order;
    the seq of the last message of each chunk is checked against the count."""

    def __init__(self, port: int, path: str, expected: int, first_seq: int | None) -> None:
        self.request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n").encode()
        self.expected = expected
        self.first_seq = first_seq
        self.received = 0
        self.marks: list[tuple[int, float]] = []  # (messages received so far, when)
        self.buffer = b""
        self.upgraded = False
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.warm: asyncio.Future[None] = loop.create_future()  # the first message arrived
        self.done: asyncio.Future[None] = loop.create_future()
        if expected == 0:
            self.done.set_result(None)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        for future in (self.opened, self.warm, self.done):
            if not future.done():
                future.set_exception(ConnectionError(f"closed after {self.received} messages"))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self.buffer + data if self.buffer else data
        if not self.upgraded:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 101"):
                self.opened.set_exception(ConnectionError(buffer[:end].decode("latin1")))
                return
            self.upgraded = True
            self.opened.set_result(None)
            buffer = buffer[end + 4:]
        position, size, received, last = 0, len(buffer), self.received, -1
        while size - position >= 2:
            length, head = buffer[position + 1] & 0x7F, 2
            if length == 126:
                if size - position < 4:
                    break
                length, head = (buffer[position + 2] << 8) | buffer[position + 3], 4
            elif length == 127:
                if size - position < 10:
                    break
                length, head = int.from_bytes(buffer[position + 2:position + 10], "big"), 10
            end = position + head + length
            if end > size:
                break
            opcode = buffer[position] & 0x0F
            if opcode == 1:
                received += 1
                last = end
            elif opcode == 9:  # ping: a masked pong (zero mask) with the same payload
                self.transport.write(bytes([0x8A, 0x80 | length, 0, 0, 0, 0]) + buffer[position + head:end])
            elif opcode == 8:
                self.connection_lost(None)
            position = end
        self.buffer = buffer[position:]
        if received != self.received:
            if self.first_seq is not None:
                seq = int(_DIGITS.match(buffer, buffer.rindex(b'"seq":', 0, last) + 6)[0])  # type: ignore[index]
                if seq != self.first_seq + received - 1:
                    self.done.set_exception(AssertionError(f"message {received} has seq {seq}"))
                    return
            self.received = received
            self.marks.append((received, now))
            if not self.warm.done():
                self.warm.set_result(None)
            if received >= self.expected and not self.done.done():
                self.done.set_result(None)


async def open_lean(port: int, path: str, count: int, expected: int, first_seq: int | None) -> list[LeanClient]:
    loop = asyncio.get_running_loop()
    clients: list[LeanClient] = []
    for start in range(0, count, 50):
        batch = [LeanClient(port, path, expected, first_seq) for _ in range(start, min(count, start + 50))]
        await asyncio.gather(*[loop.create_connection(lambda c=c: c, "127.0.0.1", port) for c in batch])  # type: ignore[misc]
        await asyncio.gather(*[c.opened for c in batch])
        clients += batch
    return clients


def arrivals(clients: list[LeanClient], expected: int) -> list[float]:
    """Per message index, the time it reached the last of `clients`."""
    latest = [0.0] * expected
    for client in clients:
        done = 0
        for received, at in client.marks:
            for index in range(done, min(received, expected)):
                if at > latest[index]:
                    latest[index] = at
            done = received
    return latest


def client_worker(pipe: Connection) -> None:
    """A client process: on ("run", port, path, count, expected, first_seq) it opens `count`
    clients, answers "ready", "warm" once each has its first message (the server has it following
    the feed) and, once each has its `expected` messages, their arrivals."""

    async def run(port: int, path: str, count: int, expected: int, first_seq: int | None) -> list[float]:
        clients = await open_lean(port, path, count, expected, first_seq)
        pipe.send("ready")
        try:
            await asyncio.wait_for(asyncio.gather(*[c.warm for c in clients]), 120)
            pipe.send("warm")
            await asyncio.wait_for(asyncio.gather(*[c.done for c in clients]), 600)
        finally:
            for client in clients:
                client.transport.close()
        return arrivals(clients, expected)

    while (command := pipe.recv()) != "stop":
        try:
            pipe.send(asyncio.run(run(*command[1:])))
        except Exception as error:  # reported to the main process
            pipe.send(error)


class ClientProcesses:
    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes = []
        for _ in range(count):
            ours, theirs = context.Pipe()
            process = context.Process(target=client_worker, args=(theirs,), daemon=True)
            process.start()
            self.pipes.append(ours)
            self.processes.append(process)

    def open(self, port: int, path: str, clients: int, expected: int, first_seq: int | None) -> None:
        for n, pipe in enumerate(self.pipes):
            share = clients // len(self.pipes) + (n < clients % len(self.pipes))
            pipe.send(("run", port, path, share, expected, first_seq))
        self.wait()

    def wait(self) -> None:
        for pipe in self.pipes:
            self._answer(pipe, 120)

    def arrivals(self) -> list[float]:
        per_process = [self._answer(pipe, 660) for pipe in self.pipes]
        return [max(times) for times in zip(*per_process, strict=True)]

    @staticmethod
    def _answer(pipe: Connection, timeout: float) -> Any:
        if not pipe.poll(timeout):
            raise SystemExit("a client process did not answer")
        answer = pipe.recv()
        if isinstance(answer, Exception):
            raise SystemExit(f"a client process failed: {answer!r}")
        return answer

    def cpu_seconds(self) -> float:
        return sum(sum(cpu_seconds(process.pid or 0)) for process in self.processes)

    def stop(self) -> None:
        for pipe, process in zip(self.pipes, self.processes, strict=True):
            pipe.send("stop")
            process.join(10)


def broadcast_daphne(pool: ClientProcesses, server: int, port: int, clients: int, changes: int) -> list[float]:
    """The first change (not measured) shows that every client is following the feed."""
    since = current_position()
    pool.open(port, f"/ws/events?since={since}", clients, changes + 1, since.seq + 1)
    commit_burst(1)
    pool.wait()
    cpu = cpu_seconds(server), pool.cpu_seconds()
    started = time.perf_counter()
    committed = commit_burst(changes)
    burst = time.perf_counter() - started
    received = pool.arrivals()
    (user, system), clients_cpu = [(a - b) for a, b in zip(cpu_seconds(server), cpu[0], strict=True)], \
        pool.cpu_seconds() - cpu[1]
    print(f"  the commits took {burst * 1000:.0f} ms; meanwhile daphne used {user:.2f} s user + {system:.2f} s "
          f"system CPU, the client processes {clients_cpu:.2f} s", flush=True)
    return [(received[seq - since.seq - 1] - at) * 1000 for seq, at in committed.items()]


def broadcast_floor(pool: ClientProcesses, port: int, clients: int, changes: int) -> list[float]:
    import websockets.sync.client

    pool.open(port, "/", clients, changes + 1, 1)
    sent: list[float] = []
    with websockets.sync.client.connect(f"ws://127.0.0.1:{port}/control", ping_interval=None) as control:
        for seq in range(1, changes + 2):
            sent.append(time.perf_counter())
            control.send(orjson.dumps({"type": "bounty.updated", "payload": PAYLOAD, "seq": seq,
                                       "position": f"{seq}.{'0' * 32}"}).decode())  # as long as the service's
            if seq == 1:
                pool.wait()
        received = pool.arrivals()
    return [(arrived - at) * 1000 for arrived, at in zip(received[1:], sent[1:], strict=True)]


def resources(pool: ClientProcesses, server: int, port: int, clients: int, redis_port: int | None) -> tuple[int, int]:
    """The server's descriptors and Redis connections while `clients` clients follow the feed
    (each has received a first live message, so each was admitted, its Redis calls made)."""
    since = current_position()
    pool.open(port, f"/ws/events?since={since}", clients, 2, since.seq + 1)
    commit_burst(1)
    pool.wait()
    counted = len(descriptors(server)), connections_to(server, redis_port) if redis_port else 0
    commit_burst(1)  # the second message each client waits for: then they close
    pool.arrivals()
    return counted


def snapshot_rate(port: int, records: int) -> float:
    async def read() -> float:
        started = time.perf_counter()
        (client,) = await open_lean(port, "/ws/events", 1, records, None)
        await client.done
        client.transport.close()
        return records / (time.perf_counter() - started)

    return asyncio.run(read())


# ---------------------------------------------------------------------------- the database side


def seed(records: int) -> None:
    """The active deployment with `records` bounties (kept between runs), each with its stored JSON
    body and search text as the indexer writes them, so that the snapshot sends real records."""
    from datetime import UTC, datetime

    from indexer.models import SyncState
    from records.models import Bounty, Deployment
    from records.representation import record_body
    from records.search import join_fields, search_fields

    deployment, _ = Deployment.objects.get_or_create(chain_id=91342, contract_address=CONTRACT,
                                                     defaults={"usdc_address": USDC})
    SyncState.objects.get_or_create(deployment=deployment)

    def rendered(bounty: Bounty) -> Bounty:
        bounty.body = record_body(bounty, chain_id=deployment.chain_id, contract_address=deployment.contract_address)
        bounty.search_text = join_fields(search_fields(bounty))
        return bounty

    # Rows an earlier version of this benchmark seeded without their body.
    while bodiless := list(Bounty.objects.filter(deployment=deployment, body="")[:5_000]):
        Bounty.objects.bulk_update([rendered(bounty) for bounty in bodiless], ["body", "search_text"])
    have = Bounty.objects.filter(deployment=deployment).count()
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    for start in range(have + 1, records + 1, 5_000):
        Bounty.objects.bulk_create([rendered(Bounty(
            deployment=deployment, bounty_id=n, prompt=f"bounty {n} " + "x" * 200, bounty_amount=10**8,
            fee_amount=25 * 10**5, bond_amount=10**7, duration=86_400, poster="0x" + f"{n:040x}",
            deadline=moment, challenge_window=86_400, metadata_uri=f"ipfs://{n}", metadata_hash="0x" + "11" * 32,
            tx_hash="0x" + f"{n:064x}", block_number=n, log_index=0, created_at=moment,
        )) for n in range(start, min(records, start + 4_999) + 1)])


def commit_burst(changes: int) -> dict[int, float]:
    """`changes` commits of one change each, as the indexer writes them (indexer.changelog: the
    next seq, its digest chained on the one before); seq -> commit time."""
    from django.db import transaction

    from indexer.bulk import insert_rows
    from indexer.changelog import CHANGE_COLUMNS, advance_change_log
    from indexer.models import ChangeLogEntry, SyncState
    from records.changes import MessageType, notify_changes

    committed: dict[int, float] = {}
    for _ in range(changes):
        with transaction.atomic():
            state = SyncState.objects.select_for_update().select_related("deployment").get()
            insert_rows(ChangeLogEntry, CHANGE_COLUMNS,
                        advance_change_log(state.deployment, state, [(MessageType.BOUNTY_UPDATED, PAYLOAD, 1)]))
            state.save(update_fields=["last_seq", "last_digest"])
        committed[state.last_seq] = time.perf_counter()
        notify_changes(state.deployment_id, state.last_seq)
    return committed


def current_position() -> Position:
    """Where a client that has every change so far resumes (`?since=`)."""
    from indexer.models import SyncState
    from records.selectors import head_position

    return head_position(SyncState.objects.values_list("deployment_id", flat=True).get())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--database", default="sqlite:////tmp/ws-bench/db.sqlite3")
    parser.add_argument("--redis", help="REDIS_URL of the server and the committer (default: none)")
    parser.add_argument("--poll-ms", type=int, help="BOUNTY_WS_POLL_MS of the server (default: the service's)")
    parser.add_argument("--resource-clients", default="1000,5000",
                        help="client counts at which to count the server's descriptors and Redis connections")
    parser.add_argument("--profile-server", metavar="FILE", help="run daphne under cProfile, its stats to FILE")
    args = parser.parse_args()
    resource_clients = [int(count) for count in args.resource_clients.split(",") if count]
    most = max([args.clients, *resource_clients])
    limit, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * most + 1_000
    if limit < wanted and (hard == resource.RLIM_INFINITY or wanted <= hard):
        limit = wanted
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))  # the server and the clients inherit it
    if limit < most + 1_000:
        print(f"descriptors are limited to {limit} (ulimit -n): counting at most {limit - 1_000} clients")
        resource_clients = [count for count in resource_clients if count <= limit - 1_000]
    Path("/tmp/ws-bench").mkdir(exist_ok=True)
    env = {**os.environ, "DATABASE_URL": args.database, "DJANGO_SECRET_KEY": SECRET_KEY,
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "BOUNTY_CONTRACT_ADDRESS": CONTRACT, "BOUNTY_USDC_ADDRESS": USDC,
           "BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT": str(2 * most + 10), "BOUNTY_WS_CONNECTS_PER_MINUTE": "0",
           "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    os.environ.pop("REDIS_URL", None)
    if args.redis:
        env["REDIS_URL"] = args.redis
    if args.poll_ms:
        env["BOUNTY_WS_POLL_MS"] = str(args.poll_ms)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    seed(args.records)
    cache.delete("ws:connections:127.0.0.1")  # counts left by an earlier run's server (Redis)

    pool = ClientProcesses(args.client_processes)
    port = free_port()
    profile = [sys.executable, "-m", "cProfile", "-o", args.profile_server] if args.profile_server else []
    command = [str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port), "--ping-interval", "20",
               "--ping-timeout", "20", "--websocket_timeout", "-1", "--websocket-max-message-size",
               str(settings.BOUNTY_WS_MAX_MESSAGE_BYTES), "bountysite.asgi:application"]
    server = subprocess.Popen([*profile, *command], cwd=PROJECT_DIR, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    floor_port = free_port()
    floor = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER, str(floor_port)])
    try:
        wait_listening(port, server)
        wait_listening(floor_port, floor)
        print(f"{args.database.split(':')[0]}, {'Redis' if args.redis else 'no Redis'}, poll "
              f"{settings.BOUNTY_WS_POLL_SECONDS * 1000:.0f} ms, {args.client_processes} client processes, "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        rate = snapshot_rate(port, args.records)
        print(f"snapshot of {args.records} records to one client: {rate:,.0f} records/s (target 20,000: "
              f"{'met' if rate >= 20_000 else 'NOT met'})", flush=True)
        daphne = broadcast_daphne(pool, server.pid, port, args.clients, args.changes)
        p50, p99 = statistics.median(daphne), percentile(daphne, 0.99)
        print(f"broadcast of {args.changes} changes to {args.clients} clients, commit -> last client:")
        print(f"  /ws/events (daphne): p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  max {max(daphne):8.1f} ms  "
              f"(target p99 < 250 ms: {'met' if p99 < 250 else 'NOT met'})", flush=True)
        plain = broadcast_floor(pool, floor_port, args.clients, args.changes)
        f50, f99 = statistics.median(plain), percentile(plain, 0.99)
        print(f"  plain websockets:    p50 {f50:8.1f} ms  p99 {f99:8.1f} ms  max {max(plain):8.1f} ms")
        print(f"  ratio daphne/floor:  p50 {p50 / f50:8.2f} x   p99 {p99 / f99:8.2f} x", flush=True)
        redis_port = (urlparse(args.redis).port or 6379) if args.redis else None
        idle = len(descriptors(server.pid)), connections_to(server.pid, redis_port) if redis_port else 0
        print(f"server process resources (idle: {idle[0]} descriptors, {idle[1]} Redis connections):", flush=True)
        for count in resource_clients:
            fds, to_redis = resources(pool, server.pid, port, count, redis_port)
            print(f"  {count:6,} clients: {fds:6,} descriptors ({(fds - idle[0]) / count:.2f} per client), "
                  f"{f'{to_redis} Redis connections' if redis_port else 'no Redis'}", flush=True)
    finally:
        pool.stop()
        for process in (server, floor):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
