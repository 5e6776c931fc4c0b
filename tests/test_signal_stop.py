"""A stop asked for by SIGTERM (bountysite.stopping.SignalStop, run_indexer's and devchain's)
ends the main thread's wait however the signal falls: a process waiting in short waits, as
an indexer's main thread does between polls, is sent SIGTERM round after round at random moments."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def rounds_until_a_hang(kind: str, rounds: int) -> str:
    """What the process said after the rounds: every stop ended, or the round that hung."""
    process = subprocess.Popen([sys.executable, "-m", "tests.stop_rounds", kind, str(rounds)], cwd=PROJECT_DIR,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    try:
        rng = random.Random(20261202)
        for _ in range(rounds):
            line = process.stdout.readline().strip()
            if line != "ready":
                return line
            time.sleep(rng.uniform(0, 0.002))
            process.send_signal(signal.SIGTERM)
        return process.stdout.readline().strip()
    finally:
        process.kill()
        process.wait()


def test_a_stop_asked_by_sigterm_ends_the_main_threads_wait_every_time() -> None:
    assert rounds_until_a_hang("signal-stop", 1000) == "stopped every time"


def test_an_event_set_in_the_signal_handler_hangs_the_main_thread_so_the_handler_must_not_set_it() -> None:
    """Why SignalStop exists: Event.set called from the handler waits for the Event's lock, which
    the interrupted wait holds (CPython 3.11: within a few dozen rounds). Should a CPython no
    longer hang so, this fails, and SignalStop's thread can go."""
    assert rounds_until_a_hang("event-set-in-handler", 3000).startswith("hung in round")
