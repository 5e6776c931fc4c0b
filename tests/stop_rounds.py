"""A process that waits for a stop over and over, as an indexer's main thread does (tests/test_signal_stop.py):
each round makes a stop, says `ready`, and waits on it in short waits until the signal the test sends
sets it. A round that has not ended 5 s after its signal is a hang: said, and the process exits 3.

    python -m tests.stop_rounds {signal-stop|event-set-in-handler} ROUNDS
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from bountysite.stopping import SignalStop


def _watch(done: threading.Event, round_number: int) -> None:
    if not done.wait(5):
        print(f"hung in round {round_number}", flush=True)
        os._exit(3)


def _event_set_in_handler() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def main(kind: str, rounds: int) -> None:
    for round_number in range(rounds):
        stop = SignalStop((signal.SIGTERM,)) if kind == "signal-stop" else _event_set_in_handler()
        done = threading.Event()
        threading.Thread(target=_watch, args=(done, round_number), daemon=True).start()
        print("ready", flush=True)
        while not stop.wait(0.0001):
            pass
        done.set()
    print("stopped every time", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
