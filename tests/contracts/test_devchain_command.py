"""`manage.py devchain`: anvil with the reference contracts, roles, balances and demo data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from web3 import Web3

from contracts.demo import DEMO_CLOCK_ADVANCE
from contracts.devchain import DEV_FUNDING, bounty_contract, free_port, usdc_contract
from tests.servers import wait_for_line

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent

BOUNTY_STATUSES = {0: "open", 1: "resolved", 2: "refunded"}
SUBMISSION_STATUSES = {0: "submitted", 1: "disputed", 2: "accepted", 3: "rejected", 4: "refunded"}
DISPUTE_STATUSES = {0: "pending_human_review", 1: "upheld", 2: "rejected", 3: "cancelled"}


def _start_devchain(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "devchain", "--port", str(port),
         "--out", str(tmp_path / "devchain.json"), "--state", str(tmp_path / "state.json"), *extra],
        cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
    )
    return process, port


def _interrupt(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    return out


def test_it_deploys_sets_roles_funds_accounts_and_writes_devchain_json(tmp_path: Path) -> None:
    process, port = _start_devchain(tmp_path)
    try:
        printed = wait_for_line(process, "dev chain running")
        info = json.loads((tmp_path / "devchain.json").read_text())
        assert set(info) >= {"rpc_url", "chain_id", "contract_address", "usdc_address", "start_block"}
        assert info["rpc_url"] == f"http://127.0.0.1:{port}"
        assert info["chain_id"] == 91342
        assert any(info["contract_address"] in line for line in printed)

        w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
        assert w3.eth.chain_id == 91342
        board = bounty_contract(w3, info["contract_address"])
        usdc = usdc_contract(w3, info["usdc_address"])
        accounts = list(w3.eth.accounts)
        assert board.functions.owner().call() == accounts[0] == info["owner"]
        assert board.functions.arbiter().call() == accounts[0] == info["arbiter"]
        assert board.functions.usdc().call() == info["usdc_address"]
        assert [a for a in accounts if board.functions.isGrout(a).call()] == [accounts[3], accounts[4]]
        assert [usdc.functions.balanceOf(a).call() for a in accounts[:10]] == [DEV_FUNDING] * 10
        assert usdc.functions.decimals().call() == 6
        (first_tx,) = w3.eth.get_block(info["start_block"])["transactions"]
        assert isinstance(first_tx, bytes)
        assert w3.eth.get_transaction_receipt(first_tx)["contractAddress"] == info["usdc_address"]
    finally:
        out = _interrupt(process)
    assert process.returncode == 0
    assert "dev chain stopped" in out


def test_demo_seeds_every_status_and_a_restart_resumes_the_chain(tmp_path: Path) -> None:
    process, _ = _start_devchain(tmp_path, "--demo")
    try:
        wait_for_line(process, "dev chain running")
        info = json.loads((tmp_path / "devchain.json").read_text())
        w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
        board = bounty_contract(w3, info["contract_address"])
        bounties = Counter(
            BOUNTY_STATUSES[board.functions.getBounty(i).call()[1]]
            for i in range(1, board.functions.bountyCount().call() + 1)
        )
        submissions = Counter(
            SUBMISSION_STATUSES[board.functions.getSubmission(i).call()[2]]
            for i in range(1, board.functions.submissionCount().call() + 1)
        )
        disputes = Counter(
            DISPUTE_STATUSES[board.functions.getDispute(i).call()[2]]
            for i in range(1, board.functions.disputeCount().call() + 1)
        )
        head = w3.eth.block_number
    finally:
        _interrupt(process)
    assert set(bounties) == set(BOUNTY_STATUSES.values())
    assert set(submissions) == set(SUBMISSION_STATUSES.values())
    assert set(disputes) == set(DISPUTE_STATUSES.values())

    restarted, _ = _start_devchain(tmp_path, "--demo")
    try:
        printed = wait_for_line(restarted, "dev chain running")
        info = json.loads((tmp_path / "devchain.json").read_text())
        w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
        assert any("resumed the saved chain" in line for line in printed)
        assert w3.eth.block_number == head
        assert bounty_contract(w3, info["contract_address"]).functions.bountyCount().call() == sum(bounties.values())
    finally:
        _interrupt(restarted)


def test_a_new_demo_chain_ends_the_demo_with_its_clock_at_the_wall_clocks_time(tmp_path: Path) -> None:
    process, _ = _start_devchain(tmp_path, "--demo")
    try:
        wait_for_line(process, "dev chain running")
        now = time.time()
        w3 = Web3(Web3.HTTPProvider(json.loads((tmp_path / "devchain.json").read_text())["rpc_url"]))
        genesis = w3.eth.get_block(0)["timestamp"]
        head = w3.eth.get_block("latest")["timestamp"]
    finally:
        _interrupt(process)
    assert genesis < now - DEMO_CLOCK_ADVANCE
    # Nothing the demo created lies in the future, and the newest records are minutes old at most.
    assert now - 300 < head <= now + 2
