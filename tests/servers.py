"""Real daphne server processes of the service, for tests that go through a real server."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import httpx
from django.db import connection

from contracts.devchain import free_port

PROJECT_DIR = Path(__file__).resolve().parent.parent
DAPHNE = str(Path(sys.executable).parent / "daphne")


class Log(threading.Thread):
    """What a process writes to a pipe, read as it comes. A pipe nobody reads fills at 64 KiB and
    then blocks the process's next write: a daphne's event loop stops there, every handshake and
    request with it."""

    def __init__(self, pipe: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.chunks: list[bytes] = []
        self.start()

    def run(self) -> None:
        with self.pipe:
            for chunk in iter(partial(os.read, self.pipe.fileno(), 65_536), b""):
                self.chunks.append(chunk)

    def text(self, *, ended: bool) -> str:
        """What was written so far; `ended`: the process has exited, so all of it."""
        if ended:
            self.join(timeout=10)
        return b"".join(self.chunks).decode(errors="replace")


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    stderr: Log

    def log(self) -> str:
        """What the server has written to stderr (its log): all of it once it has stopped."""
        return self.stderr.text(ended=self.process.poll() is not None)

    def url(self, query: str = "") -> str:
        return f"ws://127.0.0.1:{self.port}/ws/events{query}"

    def http(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def database_url() -> str:
    """The test database, as DATABASE_URL for a server or indexer process that shares it."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


def start_daphne(env: dict[str, str], application: str = "bountysite.asgi:application",
                 cwd: Path = PROJECT_DIR) -> Server:
    """daphne serving `application` from the project at `cwd` (another release's, for an upgrade)."""
    port = free_port()
    return serve_command([DAPHNE, "-b", "127.0.0.1", "-p", str(port), application], port, env, cwd=cwd)


@contextmanager
def serving(application: str) -> Iterator[Server]:
    """daphne serving the bare ASGI `application` (a test's own, not the service) with this
    process's environment, stopped afterwards."""
    server = start_daphne(dict(os.environ), application)
    try:
        yield server
    finally:
        stop(server.process)


def serve_command(command: list[str], port: int, env: dict[str, str],
                  preexec: Callable[[], None] | None = None, cwd: Path = PROJECT_DIR) -> Server:
    """Starts `command` in `cwd`, a daphne that listens on `port` (after `preexec` in the child, if
    given), and waits until it does."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               preexec_fn=preexec)
    assert process.stderr is not None
    server = Server(process, port, Log(process.stderr))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"daphne exited: {server.log()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.05)
    raise AssertionError("daphne did not start listening")


def descriptors(pid: int) -> list[str]:
    """What a process's open descriptors point at (Linux /proc): `socket:[inode]`, a path ..."""
    targets = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            targets.append(os.readlink(fd))
        except OSError:  # closed meanwhile
            continue
    return targets


def connections_to(pid: int, port: int) -> int:
    """How many TCP connections of a process have `port` as their peer's port: its socket
    descriptors' inodes looked up in the kernel's TCP tables (the process's network namespace)."""
    inodes = {target[8:-1] for target in descriptors(pid) if target.startswith("socket:[")}
    count = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                count += 1
    return count


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for_line(process: subprocess.Popen[str], needle: str, timeout: float = 120) -> list[str]:
    """The lines `process` printed up to the first one containing `needle`; fails if it never does."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if needle in line:
            return lines
    kill(process)
    raise AssertionError(f"{needle!r} never printed; output:\n" + "\n".join(lines))


def kill(process: subprocess.Popen[Any]) -> None:
    """Kills `process` and waits for it: with its children when it leads a session of its own
    (scripts/dev, whose anvil would otherwise stay on its port)."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    process.wait()


@dataclass(frozen=True)
class DevService:
    url: str  # the web server
    rpc_url: str  # the dev chain's JSON-RPC


@contextmanager
def start_dev_service(state: Path) -> Iterator[DevService]:
    """`scripts/dev --fresh` on ports of its own, with its state in `state`, on its embedded
    default (SQLite in the state folder, the in-memory channel layer) whatever database this test
    run uses; yielded once its indexer has caught up with the demo data."""
    port, chain_port = free_port(), free_port()
    log = state / "dev.log"
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("DEV_", "BOUNTY_")) and name not in {"DATABASE_URL", "REDIS_URL"}}
    with log.open("wb") as output:
        process = subprocess.Popen(
            ["scripts/dev", "--port", str(port), "--chain-port", str(chain_port), "--state-dir", str(state), "--fresh"],
            cwd=PROJECT_DIR, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    service = DevService(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{chain_port}")
    try:
        deadline = time.monotonic() + 240
        while f"dev: serving {service.url}/" not in log.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        while httpx.get(f"{service.url}/health").json()["status"] != "ok":
            assert time.monotonic() < deadline, "the indexer did not catch up"
            time.sleep(0.2)
        yield service
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have stopped by itself (a port taken)
            os.killpg(process.pid, signal.SIGTERM)  # scripts/dev stops its children
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kill(process)


@contextmanager
def origin(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A web server of its own on a free loopback port, in a thread (a page's origin, other than
    the service's): yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class ThrowawayPostgres:
    """A PostgreSQL server of a test's own (initdb in a temporary folder, a free port), which the
    test stops and starts as a restart or a failover would, with the binaries of the machine's
    PostgreSQL. As root (CI), the cluster belongs to the `postgres` user, as initdb requires.
    With `standby_of` (a port that reaches a primary, through a proxy, say), it is a streaming
    standby of that server instead, made with `pg_basebackup -R`, which `promote` makes a primary."""

    def __init__(self, standby_of: int | None = None, **settings: str) -> None:
        self.standby_of = standby_of
        self.settings = settings  # the server's own: recovery_min_apply_delay="2s", log_statement="all"
        # Not under pytest's tmp_path: the `postgres` user could not reach into root's folders.
        self.folder = Path(tempfile.mkdtemp(prefix="bounty-postgres-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.url = self.url_of("bounty")
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        if not bins:
            raise RuntimeError("PostgreSQL's binaries are not under /usr/lib/postgresql (apt-get install postgresql)")
        self.bin = bins[-1]

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def __enter__(self) -> ThrowawayPostgres:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        if self.standby_of is not None:
            self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.standby_of), "-U", "postgres",
                      "-D", str(self.data), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast")
            self.start()
            return self
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        self.create_database("bounty")
        return self

    def url_of(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """A database `name`, empty or a copy of `template` (`dropped` first if it exists); its URL."""
        self._run("dropdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "--force", "--if-exists",
                  name)
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  *(["-T", template] if template else []), name)
        return self.url_of(name)

    def dump(self, database: str = "bounty") -> Path:
        """`pg_dump -Fc` of `database`, as an operator's backup; the file it wrote."""
        path = Path(tempfile.mkstemp(prefix=f"{database}-", suffix=".pgdump", dir=self.folder)[1])
        if os.geteuid() == 0:
            shutil.chown(path, "postgres", "postgres")
        self._run("pg_dump", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-Fc", "-f", str(path),
                  database)
        return path

    def restore(self, dump: Path) -> None:
        """The database `bounty` dropped, created again and restored from `dump` (pg_restore)."""
        self.create_database("bounty")
        self._run("pg_restore", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "bounty",
                  "--no-owner", str(dump))

    def promote(self) -> None:
        """A standby made the primary (`pg_ctl promote`), once it has replayed what it received."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "promote")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.data / "server.log"), "-w", "start",
                  "-o", f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
                  + "".join(f" -c {name}={shlex.quote(value)}" for name, value in self.settings.items()))

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def __exit__(self, *exc_info: object) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


class ThrowawayRedis:
    """A Redis server of a test's own (a free port, no persistence), which the test stops, starts
    again on the same port, and freezes (SIGSTOP: it accepts connections and answers nothing, as
    a Redis swapping or stuck in a long command does), with the machine's `redis-server`."""

    def __init__(self, *options: str) -> None:
        self.options = options  # redis-server's own, e.g. "--maxmemory", "1mb"
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH (apt-get install redis-server)")
        self.binary = binary

    def __enter__(self) -> ThrowawayRedis:
        self.start()
        return self

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             *self.options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen server must run to exit
            self.process.terminate()
            self.process.wait(timeout=20)

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()
