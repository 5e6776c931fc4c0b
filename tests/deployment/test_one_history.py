"""One history, as an operator lives it on PostgreSQL (docs/operations.md, "Restoring a backup",
"Promoting a standby", "Re-indexing and switching over"), with the same Redis throughout: a backup
taken while the service ran, restored (its catch-up change by change, and in bulk); a streaming
standby that lagged (what it receives held back), promoted when the primary dies, under a web
process that keeps running; and a re-index into a new database, the web process switched over.

Websocket clients resume with the positions they held before (one from before the backup or the
lag, which both histories share, one from after it) and must end with exactly the records the
service serves; a client whose position both histories share gets no snapshot; no request with an
ETag from before is answered 304 for another body, nor with an old cached body. A webhook endpoint
registered before ends with them too: sent again what followed its position, or `resync` and the
new history's changes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection
from standardwebhooks.webhooks import Webhook
from web3 import Web3
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from contracts.devchain import DevDeployment, free_port
from tests.chain import Chain
from tests.contracts.scenario import board, make_bounty, make_dispute, make_submission, resolve
from tests.faulty_proxy import FaultyProxy
from tests.indexer.conftest import process_env
from tests.indexer.test_run_indexer_command import wait_until
from tests.indexer.test_stopping import STOP_WITHIN
from tests.servers import PROJECT_DIR, Server, ThrowawayPostgres, start_daphne, stop
from tests.webhooks.conftest import WORKER_ENV, ReceiverProcess, register_in

pytestmark = pytest.mark.django_db(transaction=True)

KINDS = {"bounty": "bounties", "submission": "submissions", "dispute": "disputes"}
# Answers whose tags and kept bodies must not cross histories: unpaged lists, a page, records and
# overviews.
TAGGED = ["/bounties", "/submissions", "/disputes", "/bounties?limit=2", "/bounties/1", "/submissions/1",
          "/bounties/1/overview", "/submissions/1/overview"]
RECORDS = {"/bounties/1": ("bounty", 1), "/submissions/1": ("submission", 1)}


TEMPLATE = "migrated"  # a database the module's tests copy: migrated once, not once a test


@pytest.fixture(scope="module")
def cluster(anvil_chain: tuple[Web3, DevDeployment], tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[ThrowawayPostgres]:
    """A PostgreSQL server of the module's own, with a migrated database to copy."""
    if connection.vendor != "postgresql":
        pytest.skip("restores, promotes and switches PostgreSQL servers of its own")
    with ThrowawayPostgres() as server:
        template = Service(Chain(*anvil_chain), tmp_path_factory.mktemp("template"), server.create_database(TEMPLATE))
        template.migrate()
        yield server


@pytest.fixture
def hook_receiver() -> Iterator[ReceiverProcess]:
    """A webhook receiver process (tests.webhooks.receiver)."""
    process = ReceiverProcess(free_port())
    process.start()
    try:
        yield process
    finally:
        process.kill()


# ---------------------------------------------------------------------------- the service


@dataclass
class Service:
    """The indexer and a web process, started as their units start them, on `database_url`."""

    chain: Chain
    logs: Path
    database_url: str
    extra: dict[str, str] = field(default_factory=dict)
    indexer: subprocess.Popen[bytes] | None = None
    web: Server | None = None
    webhooks: subprocess.Popen[bytes] | None = None

    def env(self, **extra: str) -> dict[str, str]:
        return process_env(self.chain, DATABASE_URL=self.database_url, BOUNTY_INDEXER_POLL_MS="100",
                           BOUNTY_WS_POLL_MS="100", BOUNTY_TRUSTED_PROXIES="127.0.0.1", **{**self.extra, **extra})

    def migrate(self) -> None:
        done = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], cwd=PROJECT_DIR, env=self.env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def start_indexer(self, **extra: str) -> None:
        with (self.logs / "indexer.log").open("ab") as log:
            self.indexer = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR,
                                            env=self.env(**extra), stdout=subprocess.DEVNULL, stderr=log)

    def start_web(self) -> None:
        self.web = start_daphne(self.env())

    def start_webhooks(self) -> None:
        with (self.logs / "webhooks.log").open("ab") as log:
            self.webhooks = subprocess.Popen([sys.executable, "manage.py", "run_webhooks"], cwd=PROJECT_DIR,
                                             env=self.env(**WORKER_ENV), stdout=subprocess.DEVNULL, stderr=log)

    def start(self, **extra: str) -> None:
        self.start_indexer(**extra)
        self.start_web()
        self.start_webhooks()

    def stop(self) -> None:
        if self.webhooks is not None:
            stop(self.webhooks)
        if self.indexer is not None:
            stop(self.indexer)
        if self.web is not None:
            stop(self.web.process)

    def log(self) -> str:
        return (self.logs / "indexer.log").read_text(errors="replace")

    def head(self) -> int:
        """The seq of the newest change, as the database says (-1 while it cannot be asked)."""
        try:
            with psycopg.connect(self.database_url.replace("postgres://", "postgresql://"), connect_timeout=2) as db:
                row = db.execute("SELECT last_seq FROM indexer_syncstate").fetchone()
        except psycopg.Error:
            return -1
        return int(row[0]) if row else 0

    def caught_up(self) -> bool:
        """The mirror holds every record the contract has, past any bulk backfill."""
        assert self.web is not None
        try:
            health = httpx.get(self.web.http("/health"), timeout=5).json()
            bounties = httpx.get(self.web.http("/bounties"), timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return False
        indexer = health.get("indexer") or {}
        self.last_health = health
        return (indexer.get("synced") is True and indexer.get("backfill") is None
                and len(bounties) == board(self.chain).functions.bountyCount().call())

    def wait_caught_up(self, timeout: float = 60) -> None:
        try:
            wait_until(self.caught_up, timeout=timeout)
        except AssertionError:
            raise AssertionError(f"not caught up: {getattr(self, 'last_health', None)}\n{self.log()[-3000:]}") from None

    def served(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Every record the web process serves, by kind and id."""
        assert self.web is not None
        return {(kind, record["id"]): record for kind, resource in KINDS.items()
                for record in httpx.get(self.web.http(f"/{resource}"), timeout=10).json()}

    def tags(self) -> dict[str, tuple[str, bytes]]:
        """The ETag and body of each TAGGED answer, as a client keeps them."""
        assert self.web is not None
        answers = {path: httpx.get(self.web.http(path), timeout=10) for path in TAGGED}
        for path, answer in answers.items():
            assert answer.status_code == 200, (path, answer.text)
        return {path: (answer.headers["ETag"], answer.content) for path, answer in answers.items()}


@contextmanager
def running(chain: Chain, logs: Path, database_url: str, **extra: str) -> Iterator[Service]:
    """A service on `database_url`, stopped at the end."""
    logs.mkdir(exist_ok=True)
    service = Service(chain, logs, database_url, extra)
    try:
        yield service
    finally:
        service.stop()


def some_changes(chain: Chain) -> None:
    """New records and changes of every kind: two bounties, three submissions, a dispute resolved."""
    first, second = make_bounty(chain), make_bounty(chain)
    submission = make_submission(chain, first)
    make_submission(chain, first)
    make_submission(chain, second)
    resolve(chain, make_dispute(chain, submission), upheld=False)


# ---------------------------------------------------------------------------- a websocket client


@dataclass
class Follower:
    """A websocket client as docs/api.md describes one: every record by kind and id, and the
    position it resumes from; what each connection brought is kept."""

    records: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    position: str | None = None
    seq = 0
    building: dict[tuple[str, int], dict[str, Any]] | None = None
    connections: list[list[dict[str, Any]]] = field(default_factory=list)

    def apply(self, message: dict[str, Any]) -> None:
        kind, _, change = message["type"].partition(".")
        if message.get("snapshot"):
            self.building = {} if self.building is None else self.building
            self.building[kind, message["payload"]["id"]] = message["payload"]
            self.position = None
        elif message["type"] == "snapshot.complete":
            self.records, self.building = self.building or {}, None
            self.position, self.seq = message["position"], message["seq"]
        elif message["type"] == "resync":
            self.building, self.position = None, None
        elif message["seq"] > self.seq:
            if change == "removed":
                self.records.pop((kind, message["payload"]["id"]), None)
            else:
                self.records[kind, message["payload"]["id"]] = message["payload"]
            self.position, self.seq = message["position"], message["seq"]

    def follow(self, server: Server, until: Callable[[], bool], timeout: float = 30) -> None:
        """Connects (resuming from its position), applies messages until `until()` holds between
        them with no snapshot under way, and closes; reconnects after a close by the server."""
        deadline = time.monotonic() + timeout
        while True:
            query = "" if self.position is None else "?since=" + urllib.parse.quote(self.position, safe="")
            received: list[dict[str, Any]] = []
            self.connections.append(received)
            try:
                with connect(server.url(query), open_timeout=10, max_size=None) as ws:
                    while time.monotonic() < deadline:
                        if self.building is None and self.position is not None and until():
                            return
                        try:
                            message = json.loads(ws.recv(timeout=0.2))
                        except TimeoutError:
                            continue
                        received.append(message)
                        self.apply(message)
            except ConnectionClosed:
                time.sleep(0.2)
            assert time.monotonic() < deadline, f"not caught up: at seq {self.seq}, {received[-3:]}"

    def snapshot_on_connect(self, connection_index: int = -1) -> bool:
        """Whether that connection began with a snapshot (not one that followed a `resync`)."""
        received = self.connections[connection_index]
        return bool(received) and (received[0].get("snapshot") is True or received[0]["type"] == "snapshot.complete")

    def gaps(self) -> list[tuple[int, int]]:
        """(expected, received) seqs where a connection's live messages skipped or repeated one."""
        found = []
        for received in self.connections:
            expected = None
            for message in received:
                if message.get("snapshot") or message["type"] == "resync":
                    expected = None
                elif message["type"] == "snapshot.complete":
                    expected = message["seq"] + 1
                else:
                    if expected is not None and message["seq"] != expected:
                        found.append((expected, message["seq"]))
                    expected = message["seq"] + 1
        return found

    def resyncs(self, connection_index: int = -1) -> int:
        return sum(message["type"] == "resync" for message in self.connections[connection_index])


@dataclass
class WebhookFollower:
    """A webhook receiver as docs/api.md describes one (Webhooks): each delivery verified and
    applied once by its `webhook-id`, in order; on `resync`, the records read anew from the lists."""

    receiver: ReceiverProcess
    secret: str
    name: str = "history"
    records: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    seq = 0
    read = 0  # deliveries looked at so far
    handled: set[str] = field(default_factory=set)
    resyncs: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def registered(cls, service: Service, receiver: ReceiverProcess) -> WebhookFollower:
        """An endpoint registered now: it reads the records the service serves, then is sent what
        changes after that."""
        follower = cls(receiver, register_in(service.env(), receiver.url("history")))
        follower.records, follower.seq = service.served(), service.head()
        return follower

    def take(self, service: Service) -> None:
        deliveries = self.receiver.deliveries(self.name)
        for delivery in deliveries[self.read:]:
            self.read += 1
            message = Webhook(self.secret).verify(delivery["body"], delivery["headers"])
            if delivery["status"] != 200 or delivery["headers"]["webhook-id"] in self.handled:
                continue
            self.handled.add(delivery["headers"]["webhook-id"])
            kind, _, change = message["type"].partition(".")
            if message["type"] == "resync":
                self.resyncs.append(message)
                self.records = service.served()
            elif change == "removed":
                self.records.pop((kind, message["payload"]["id"]), None)
            else:
                self.records[kind, message["payload"]["id"]] = message["payload"]
            self.seq = message["seq"]

    def caught_up(self, service: Service) -> Callable[[], bool]:
        def done() -> bool:
            self.take(service)
            return self.seq >= service.head()
        return done


def caught_up_with(service: Service, follower: Follower) -> Callable[[], bool]:
    return lambda: follower.seq >= service.head()


def assert_holds_what_is_served(follower: Follower | WebhookFollower,
                                served: dict[tuple[str, int], dict[str, Any]]) -> None:
    """The follower holds exactly the served records, each as served (lists add counters)."""
    assert sorted(follower.records) == sorted(served)
    for key, payload in follower.records.items():
        assert {name: served[key][name] for name in payload} == payload, key


def assert_no_tag_crosses(service: Service, before: dict[str, tuple[str, bytes]]) -> None:
    """No answer with an ETag from before is a 304 for a body that differs now, and none is an old
    body kept in the cache: every body is what a fresh snapshot holds."""
    assert service.web is not None
    fresh = Follower()
    fresh.follow(service.web, caught_up_with(service, fresh))
    served = service.served()
    assert_holds_what_is_served(fresh, served)  # the lists: read fresh, not kept
    for path, (tag, body) in before.items():
        revalidated = httpx.get(service.web.http(path), headers={"If-None-Match": tag}, timeout=10)
        now = httpx.get(service.web.http(path), timeout=10)
        assert now.status_code == 200, (path, now.text)
        if revalidated.status_code == 304:
            assert now.content == body, f"{path}: 304 for a body that differs from the one tagged {tag}"
        else:
            assert revalidated.status_code == 200 and revalidated.content == now.content, path
        if path in RECORDS:
            assert now.json() == {name: served[RECORDS[path]][name] for name in now.json()}, path


def more_changes_than(service: Service, chain: Chain, seq: int) -> None:
    """New bounties until the service's seq is past `seq`: the new history numbers changes the old
    one numbered too."""
    while service.head() <= seq + 1:
        make_bounty(chain)
        service.wait_caught_up()


# ---------------------------------------------------------------------------- restoring a backup


@pytest.mark.parametrize("catch_up", ["change by change", "in bulk"])
def test_clients_resume_exactly_after_a_backup_is_restored(chain: Chain, cluster: ThrowawayPostgres,
                                                          tmp_path: Path, catch_up: str,
                                                          hook_receiver: ReceiverProcess) -> None:
    # In bulk: the catch-up after the restore writes no entry per change, then one `resync`.
    extra = ({"BOUNTY_DEFER_INDEXES": "always", "BOUNTY_HEALTH_MAX_LAG_BLOCKS": "0"} if catch_up == "in bulk"
             else {"BOUNTY_DEFER_INDEXES": "never"})
    with running(chain, tmp_path, cluster.create_database("bounty", template=TEMPLATE), **extra) as service:
        service.start()
        assert service.web is not None
        make_bounty(chain)
        make_bounty(chain)
        service.wait_caught_up()
        hooked = WebhookFollower.registered(service, hook_receiver)
        before_the_backup = Follower()
        before_the_backup.follow(service.web, caught_up_with(service, before_the_backup))

        backup = cluster.dump()
        some_changes(chain)
        service.wait_caught_up()
        after_the_backup = Follower()
        after_the_backup.follow(service.web, caught_up_with(service, after_the_backup))
        tags = service.tags()

        # As docs/operations.md says: stop the service, restore, start it again.
        service.stop()
        cluster.restore(backup)
        service.start()
        service.wait_caught_up(90)
        more_changes_than(service, chain, after_the_backup.seq)

        served = service.served()
        for follower in (before_the_backup, after_the_backup):
            follower.follow(service.web, caught_up_with(service, follower))
            assert_holds_what_is_served(follower, served)
        # The endpoint went back with the backup to its position then, and is sent what followed
        # again: the same changes (the same `webhook-id`s) change by change, or `resync` in bulk.
        wait_until(hooked.caught_up(service), timeout=60)
        assert_holds_what_is_served(hooked, served)
        assert len(hooked.resyncs) == (1 if catch_up == "in bulk" else 0)
        # Its position both histories share: no snapshot; in bulk, the `resync` and its snapshot.
        assert not before_the_backup.snapshot_on_connect()
        assert before_the_backup.resyncs() == (1 if catch_up == "in bulk" else 0)
        # In bulk, the changes after the backup were written without entries: another history. Change by
        # change, the same entries again: the same history, whose positions hold.
        assert after_the_backup.snapshot_on_connect() == (catch_up == "in bulk")
        assert_no_tag_crosses(service, tags)


# ---------------------------------------------------------------------------- promoting a standby


class Listening(threading.Thread):
    """A follower connected throughout, reconnecting (with its position) whenever it is closed."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server, self.follower, self.stopped = server, Follower(), threading.Event()

    def run(self) -> None:
        self.follower.follow(self.server, self.stopped.is_set, timeout=600)


def test_clients_resume_exactly_after_a_lagging_standby_is_promoted(chain: Chain, cluster: ThrowawayPostgres,
                                                                   tmp_path: Path) -> None:
    with (ThrowawayPostgres() as primary, FaultyProxy("127.0.0.1", primary.port) as replication,
          FaultyProxy("127.0.0.1", primary.port) as address):
        primary.restore(cluster.dump(TEMPLATE))  # migrated
        with (ThrowawayPostgres(standby_of=replication.port) as standby,
              running(chain, tmp_path, f"postgres://postgres@127.0.0.1:{address.port}/bounty") as service):
            service.start()
            assert service.web is not None
            replica = Service(chain, tmp_path, standby.url)  # to read how far the standby has replayed
            make_bounty(chain)
            make_bounty(chain)
            service.wait_caught_up()
            before_the_lag = Follower()
            before_the_lag.follow(service.web, caught_up_with(service, before_the_lag))
            wait_until(lambda: replica.head() == service.head())
            listening = Listening(service.web)
            listening.start()

            replication.blackhole()  # from here on the standby receives nothing: it lags
            some_changes(chain)
            service.wait_caught_up()
            after_the_lag = Follower()
            after_the_lag.follow(service.web, caught_up_with(service, after_the_lag))
            tags = service.tags()
            assert replica.head() < service.head()

            # The primary dies; the indexer stops on SIGTERM with its database gone.
            primary.stop("immediate")
            assert service.indexer is not None
            time.sleep(0.5)  # it meets the closed server
            started = time.monotonic()
            service.indexer.send_signal(signal.SIGTERM)
            service.indexer.wait(timeout=15)
            stopped_after = time.monotonic() - started
            # The standby is promoted and the address moved to it, under the running web process;
            # the indexer starts again, as systemd starts it.
            standby.promote()
            address.retarget("127.0.0.1", standby.port)
            service.start_indexer()
            service.wait_caught_up(90)
            more_changes_than(service, chain, after_the_lag.seq)

            listening.stopped.set()
            listening.join(60)
            served = service.served()
            for follower in (before_the_lag, after_the_lag):
                follower.follow(service.web, caught_up_with(service, follower))
                assert_holds_what_is_served(follower, served)
            assert_holds_what_is_served(listening.follower, served)
            assert listening.follower.gaps() == []
            assert not before_the_lag.snapshot_on_connect()
            assert_no_tag_crosses(service, tags)
    assert stopped_after < STOP_WITHIN, f"the indexer stopped {stopped_after:.2f} s after SIGTERM"


# ---------------------------------------------------------------------------- re-indexing and switching over


def test_clients_resume_exactly_after_a_reindex_and_a_switch_over(
        chain: Chain, cluster: ThrowawayPostgres, tmp_path: Path, hook_receiver: ReceiverProcess) -> None:
    with running(chain, tmp_path / "old", cluster.create_database("bounty", template=TEMPLATE)) as old:
        old.start()
        assert old.web is not None
        make_bounty(chain)
        make_bounty(chain)
        old.wait_caught_up()
        hooked = WebhookFollower.registered(old, hook_receiver)
        early = Follower()
        early.follow(old.web, caught_up_with(old, early))
        some_changes(chain)
        old.wait_caught_up()
        late = Follower()
        late.follow(old.web, caught_up_with(old, late))
        tags = old.tags()

        # As docs/operations.md says: a new database, indexed in bulk beside the old one (watched
        # through a web process of its own), the service's own data copied, the web processes
        # pointed at it.
        new_database = cluster.create_database("bounty_new", template=TEMPLATE)
        with running(chain, tmp_path / "new", new_database, BOUNTY_DEFER_INDEXES="always") as new:
            new.start()
            new.wait_caught_up(90)
            copied = subprocess.run([sys.executable, "manage.py", "dumpdata", "--natural-foreign", "--natural-primary",
                                     "auth.user", "records.moderatornote", "webhooks.endpoint",
                                     "-o", str(tmp_path / "own.json")],
                                    cwd=PROJECT_DIR, env=old.env(), capture_output=True, text=True, timeout=60)
            assert copied.returncode == 0, copied.stderr
            loaded = subprocess.run([sys.executable, "manage.py", "loaddata", str(tmp_path / "own.json")],
                                    cwd=PROJECT_DIR, env=new.env(), capture_output=True, text=True, timeout=60)
            assert loaded.returncode == 0, loaded.stderr
            old.stop()
            more_changes_than(new, chain, late.seq)

            assert new.web is not None
            served = new.served()
            for follower in (early, late):
                follower.follow(new.web, caught_up_with(new, follower))
                assert_holds_what_is_served(follower, served)
                assert follower.snapshot_on_connect()  # nothing of the old history is the new one's
            # The endpoint, copied with its position in the old history: `resync`, then the new one's.
            wait_until(hooked.caught_up(new), timeout=60)
            assert_holds_what_is_served(hooked, served)
            assert [message["payload"]["reason"] for message in hooked.resyncs] == ["history_changed"]
            assert_no_tag_crosses(new, tags)
