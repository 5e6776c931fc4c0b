"""The writer of bench/reconnect_storm.py: a process that seeds the bench's database and then commits
one change at a time, `interval` seconds apart, as the indexer commits them.

The seed is bench/ws_fairness.py's (the bounties as the indexer writes them, each body rendered by
records.representation.record_body) and each change is bench/ws_broadcast.py's `commit_burst(1)`:
one transaction that locks the sync state, writes the next change-log entry (numbered and chained
by indexer.changelog.advance_change_log, through indexer.bulk) and saves the state, then the
indexer's wake-up of the web processes' feeds (records.changes.notify_changes, over Redis). Each
commit's seq goes to shared memory (`head`) as soon as it returns, so the clients know what a new
connection must catch up to, and its time (perf_counter, the clock every process of the bench
reads) is kept for the delays.

Commands over the pipe, each answered once: ("start",) and ("pause",) the commits;
("position",) where a client with every change resumes, and its seq; ("commits",) every commit so
far, seq -> time; ("exit",).
"""

from __future__ import annotations

import os
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any


def writer_worker(pipe: Connection, env: dict[str, str], head: Any, bounties: int, interval: float) -> None:
    try:
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        from ws_fairness import seed

        size = seed(bounties)
        seeded = time.perf_counter() - started
        from ws_broadcast import commit_burst, current_position

        commits: dict[int, float] = dict(commit_burst(1))  # the head then has a digest to resume from
        head.value = max(commits)
    except Exception:
        pipe.send(RuntimeError(traceback.format_exc()))
        return
    pipe.send((seeded, size))
    writing = False
    due = time.perf_counter()
    while True:
        wait = max(0.0, due - time.perf_counter()) if writing else None
        if pipe.poll(wait):
            command = pipe.recv()
            kind = command[0]
            if kind == "start":
                writing, due = True, time.perf_counter()
                pipe.send(None)
            elif kind == "pause":
                writing = False
                pipe.send(None)
            elif kind == "position":
                position = current_position()
                pipe.send((str(position), position.seq))
            elif kind == "commits":
                pipe.send(dict(commits))
            elif kind == "exit":
                pipe.send(None)
                return
            continue
        try:
            committed = commit_burst(1)
        except Exception as error:  # printed by the bench; the next commit tries again
            print(f"the writer's commit failed: {type(error).__name__}: {error}", flush=True)
            due = time.perf_counter() + interval
            continue
        commits.update(committed)
        head.value = max(committed)
        due = max(due + interval, time.perf_counter())
