"""`manage.py run_indexer` as operators run it: a process that refuses bad configuration, follows
the chain, stops cleanly on SIGTERM, and never writes beside another indexer of the deployment."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contracts.demo import _Demo
from contracts.devchain import _deploy, free_port
from indexer import indexes
from indexer.models import IndexStateChoice, SyncState
from records.models import Bounty
from tests.chain import USDC, Chain
from tests.indexer.conftest import process_env
from tests.indexer.test_rpc import Reply, local_server

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.django_db(transaction=True)


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR, env=env,
                          capture_output=True, text=True, timeout=60)


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def create_bounty(chain: Chain, uri: str) -> None:
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    chain.send(chain.board.functions.createBounty(uri, b"\x01" * 32, 10 * USDC, 3600), chain.account(1))


def test_it_refuses_a_node_on_another_chain(chain: Chain) -> None:
    result = run(process_env(chain, BOUNTY_CHAIN_ID="1"))
    assert result.returncode == 1
    assert "is on chain 91342, but BOUNTY_CHAIN_ID is 1" in result.stderr


def test_a_start_block_after_the_contracts_deployment_stops_it_saying_so_without_a_traceback(chain: Chain) -> None:
    demo = _Demo(chain.w3, chain.deployment)
    bounty = demo.create_bounty(demo.actors.poster, "created before the start block", 10, 3600)
    start_block = chain.w3.eth.block_number + 1
    demo.submit(bounty, demo.actors.claimants[0], "a submission of a bounty the mirror never saw")
    chain.w3.provider.make_request("anvil_mine", [hex(64)])  # type: ignore[arg-type]  # read by range, twice
    result = run(process_env(chain, BOUNTY_START_BLOCK=str(start_block)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bounty 1 is not in the mirror; is BOUNTY_START_BLOCK after the contract's deployment block?" in \
        result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("missing", ["BOUNTY_RPC_URL", "BOUNTY_CONTRACT_ADDRESS", "BOUNTY_USDC_ADDRESS"])
def test_it_names_missing_configuration(chain: Chain, missing: str) -> None:
    env = process_env(chain)
    del env[missing]
    result = run(env)
    assert result.returncode == 1
    assert f"missing configuration: {missing}" in result.stderr


def test_it_refuses_an_address_without_a_contract(chain: Chain) -> None:
    result = run(process_env(chain, BOUNTY_CONTRACT_ADDRESS="0x" + "12" * 20))
    assert result.returncode == 1
    assert "no contract at BOUNTY_CONTRACT_ADDRESS" in result.stderr


def test_it_refuses_swapped_contract_and_token_addresses(chain: Chain) -> None:
    board, usdc = chain.deployment.contract_address, chain.deployment.usdc_address
    result = run(process_env(chain, BOUNTY_CONTRACT_ADDRESS=usdc, BOUNTY_USDC_ADDRESS=board))
    assert result.returncode == 1
    assert f"the contract at BOUNTY_CONTRACT_ADDRESS {usdc.lower()} is not a bounty contract" in result.stderr
    assert "Traceback" not in result.stderr


def test_it_refuses_a_token_other_than_the_contracts(chain: Chain) -> None:
    other = "0x" + "34" * 20
    result = run(process_env(chain, BOUNTY_USDC_ADDRESS=other))
    assert result.returncode == 1
    usdc = chain.deployment.usdc_address.lower()
    assert f"holds the token {usdc}, but BOUNTY_USDC_ADDRESS is {other}: set BOUNTY_USDC_ADDRESS={usdc}" \
        in result.stderr


def test_it_refuses_a_token_without_six_decimals(chain: Chain) -> None:
    # A bounty contract whose "token" is another bounty contract: it has no decimals() at all.
    board, _ = _deploy(chain.w3, "BountyBoard", chain.account(0), chain.board.address)
    result = run(process_env(chain, BOUNTY_CONTRACT_ADDRESS=board, BOUNTY_USDC_ADDRESS=chain.board.address))
    assert result.returncode == 1
    assert f"the token at BOUNTY_USDC_ADDRESS {chain.board.address.lower()} answered decimals() = nothing, not 6" \
        in result.stderr


def test_it_refuses_a_block_tag_the_node_does_not_resolve(chain: Chain) -> None:
    def no_safe_block(request: Any) -> Reply:
        calls = request if isinstance(request, list) else [request]
        if any(call["params"][:1] == ["safe"] for call in calls):
            error = {"code": -32602, "message": "invalid block tag safe"}
            answers = [{"jsonrpc": "2.0", "id": call["id"], "error": error} for call in calls]
            return Reply.json(answers if isinstance(request, list) else answers[0])
        forwarded = urllib.request.Request(chain.deployment.rpc_url, data=json.dumps(request).encode(),
                                           headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(forwarded, timeout=10) as response:
            return Reply(body=response.read())

    with local_server(no_safe_block) as url:
        result = run(process_env(chain, BOUNTY_RPC_URL=url, BOUNTY_CONFIRMATIONS="safe"))
    assert result.returncode == 1
    assert "does not give its safe block (BOUNTY_CONFIRMATIONS=safe): JSON-RPC error -32602: invalid block tag " \
        "safe; set BOUNTY_CONFIRMATIONS to a number of blocks" in result.stderr


def test_it_says_to_migrate_an_unmigrated_database(chain: Chain, tmp_path: Path) -> None:
    result = run(process_env(chain, DATABASE_URL=f"sqlite:///{tmp_path / 'new.sqlite3'}"))
    assert result.returncode == 1
    assert "the database is not migrated (" in result.stderr
    assert "run `manage.py migrate` first" in result.stderr
    assert "Traceback" not in result.stderr and "no such table" not in result.stderr


def test_an_unreachable_node_is_waited_for_and_named_without_its_api_key(chain: Chain) -> None:
    port = free_port()  # nothing listens there
    process = start(process_env(chain, BOUNTY_RPC_URL=f"http://127.0.0.1:{port}/v2/sEcReT0123456789?key=hidden"))
    time.sleep(6)  # the first request's retries, then the indexer's own waits
    assert process.poll() is None, "an unreachable node is never fatal"
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert f"the node at http://127.0.0.1:{port}/v2/***?key=***: connection failed: ConnectError" in output
    assert "asking again for as long as it takes" in output
    assert "sEcReT" not in output and "hidden" not in output  # nor in any log line


def test_it_follows_the_chain_and_stops_cleanly_on_sigterm(chain: Chain) -> None:
    process = start(process_env(chain))
    try:
        create_bounty(chain, "ipfs://first")
        wait_until(lambda: Bounty.objects.filter(prompt="ipfs://first").exists())
        create_bounty(chain, "ipfs://second")
        wait_until(lambda: Bounty.objects.filter(prompt="ipfs://second").exists())
        state = SyncState.objects.get()
        assert state.last_indexed_block == chain.w3.eth.block_number
        assert state.last_heartbeat is not None
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "indexer stopped" in output
    assert "applied blocks" in output


def test_a_second_indexer_of_the_deployment_waits_for_the_first(chain: Chain) -> None:
    first = start(process_env(chain))
    create_bounty(chain, "ipfs://one")
    wait_until(lambda: Bounty.objects.exists())
    second = start(process_env(chain))
    try:
        assert second.stdout is not None
        line = ""
        deadline = time.monotonic() + 30
        while "another indexer holds" not in line and time.monotonic() < deadline:
            line = second.stdout.readline()
        assert "another indexer holds" in line
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
        create_bounty(chain, "ipfs://two")
        wait_until(lambda: Bounty.objects.filter(prompt="ipfs://two").exists())
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.communicate(timeout=30)
    assert second.returncode == 0
    assert Bounty.objects.count() == 2


def test_a_first_sync_shows_the_index_build_as_a_phase_with_its_duration(chain: Chain) -> None:
    create_bounty(chain, "ipfs://before-the-first-start")
    process = start(process_env(chain))
    try:
        wait_until(lambda: Bounty.objects.exists() and indexes.index_state() == IndexStateChoice.READY)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    count = len(indexes.secondary_indexes())
    lines = [line.split(": ", 1)[1] for line in output.splitlines() if "indexer.index_build: " in line]
    phases = [line for line in lines if line.startswith(("bulk backfill", "index build"))]
    assert phases[0] == f"bulk backfill from block {chain.deployment.start_block}: {count} secondary indexes " \
                        "deferred until it has caught up"
    assert phases[1] == f"index build: creating {count} indexes on the record tables"
    assert re.fullmatch(rf"index build: done, {count} indexes in \d+\.\d s", phases[2]), phases
    assert indexes.missing_indexes() == []
