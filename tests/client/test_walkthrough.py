"""bounty_client/README.md's walk-through, run as written, so that it cannot rot.

The dev chain of its step 1 (`./scripts/dev --fresh`) is stood in for by what that script runs:
anvil with the reference contracts and the demo activity, a `manage.py run_indexer` process and a
daphne server. The websocket watcher of step 2 runs in the background; every later shell block
runs in order in one bash session (as in the reader's third terminal), with the dev URLs swapped
for the test's. A plain text block (```text) right after a shell block is what that block must
print, exactly; other output blocks are illustrations.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bounty_client import metadata_hash
from contracts.demo import seed_demo_activity
from tests.chain import Chain
from tests.servers import PROJECT_DIR, Server

pytestmark = [pytest.mark.chain, pytest.mark.django_db(transaction=True)]

README = PROJECT_DIR / "bounty_client" / "README.md"
SECTION = "## Walk-through: post a bounty on the dev chain"
DEV_SERVICE, DEV_WEBSOCKET, DEV_RPC = "http://127.0.0.1:8000", "ws://127.0.0.1:8000", "http://127.0.0.1:8545"
DEMO_COUNTS = {"bounties": 4, "submissions": 6, "disputes": 6}  # the demo activity: the watcher's snapshot
BOUNTY_ID = 5  # the first after the demo's four
MARK = "@@ walk-through block {} @@"  # a line between the outputs of the shell blocks


def walkthrough_blocks() -> list[tuple[str, str]]:
    """The (language, text) of every fenced block of the README's walk-through section, in order."""
    section = README.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)


def json_documents(text: str) -> list[Any]:
    """The JSON documents printed one after the other (curl adds no newline)."""
    decoder, documents, position = json.JSONDecoder(), [], 0
    while position < len(text.rstrip()):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    return documents


def wait_for_the_indexer(service: str, head: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{service}/health").json()["indexer"]["last_indexed_block"] == head:
                return
        time.sleep(0.05)
    raise AssertionError(f"the indexer did not reach block {head}")


class Watcher:
    """The websocket watcher of step 2, run in the background; its printed lines in a queue."""

    def __init__(self, code: str, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(["bash", "-c", code], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def messages_until(self, done: Callable[[dict[str, Any]], bool], timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        messages: list[dict[str, Any]] = []
        while not messages or not done(messages[-1]):
            try:
                messages.append(json.loads(self.lines.get(timeout=max(0.01, deadline - time.monotonic()))))
            except queue.Empty:
                raise AssertionError(f"the watcher printed {len(messages)} messages, not the one awaited") from None
        return messages

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=10)


def test_the_walkthrough_runs_as_written(chain: Chain, servers: Callable[..., Server],
                                         indexer_process: Callable[[], Any], tmp_path: Path) -> None:
    (start_language, start), (watch_language, watch), *steps = walkthrough_blocks()
    assert (start_language, start) == ("sh", "./scripts/dev --fresh\n")
    assert watch_language == "sh" and f"{DEV_WEBSOCKET}/ws/events" in watch

    seed_demo_activity(chain.w3, chain.deployment)
    server = servers()
    indexer_process()
    service = f"http://127.0.0.1:{server.port}"

    def here(text: str) -> str:
        return (text.replace(DEV_SERVICE, service).replace(DEV_WEBSOCKET, f"ws://127.0.0.1:{server.port}")
                .replace(DEV_RPC, chain.deployment.rpc_url))

    # The reader's checkout: var/ and the virtualenv, with the repository importable.
    (tmp_path / "var").mkdir()
    (tmp_path / ".venv").symlink_to(PROJECT_DIR / ".venv")
    env = {name: value for name, value in os.environ.items() if not name.startswith("BOUNTY_")}
    env.update(PYTHONPATH=str(PROJECT_DIR), PYTHONUNBUFFERED="1")

    wait_for_the_indexer(service, head=chain.w3.eth.block_number)  # as ./scripts/dev is, once it is up
    watcher = Watcher(here(watch), tmp_path, env)
    try:
        messages: list[dict[str, Any]] = watcher.messages_until(lambda _: True)  # connected: snapshot read
        script, waited = ["set -euo pipefail"], False
        commands = [(index, code) for index, (language, code) in enumerate(steps) if language == "sh"]
        for index, code in commands:
            if "curl" in code and not waited:
                # The reader takes longer than the indexer's poll to type the next command.
                script.append(f"until curl -sf -o /dev/null {service}/bounties/{BOUNTY_ID}; do sleep 0.1; done")
                waited = True
            script += [f"printf '\\n{MARK.format(index)}\\n'", here(code)]
        result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stderr

        printed = dict(zip([index for index, _ in commands],
                           re.split(r"\n@@ walk-through block \d+ @@\n", "\n" + result.stdout)[1:],
                           strict=True))
        for index, output in printed.items():
            following = steps[index + 1] if index + 1 < len(steps) else None
            if following is not None and following[0] == "text":
                assert output.rstrip("\n") == following[1].rstrip("\n"), steps[index][1]

        metadata = json.loads((tmp_path / "var" / "bounty.json").read_text(encoding="utf-8"))
        (search, bounty, overview) = next(
            json_documents(output) for index, output in printed.items() if "curl" in steps[index][1]
        )
        assert [row["id"] for row in search["items"]] == [BOUNTY_ID]
        assert (bounty["id"], bounty["status"], bounty["bounty_amount"], bounty["metadata_hash"]) == (
            BOUNTY_ID, "open", "25000000", metadata_hash(metadata))
        assert bounty["poster"] == chain.account(1)
        assert overview["bounty"]["id"] == BOUNTY_ID

        messages += watcher.messages_until(lambda message: message["type"] == "snapshot.complete")
        messages += watcher.messages_until(lambda message: "snapshot" not in message)
        *snapshot, complete, live = messages
        assert len(snapshot) == sum(DEMO_COUNTS.values()) and all(message["snapshot"] is True for message in snapshot)
        assert (complete["type"], complete["payload"]) == ("snapshot.complete", DEMO_COUNTS)
        assert live["type"] == "bounty.created" and live["seq"] > complete["seq"]
        assert {name: live["payload"][name] for name in ("id", "metadata_hash")} == {
            "id": BOUNTY_ID, "metadata_hash": metadata_hash(metadata)}
    finally:
        watcher.stop()
