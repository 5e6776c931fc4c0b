"""The start-up's start block (indexer.startup.find_start_block): with BOUNTY_START_BLOCK unset, the
contract's deployment block found by bisection on eth_getCode through the node, in about log2(head)
calls, stored and shown in /health, with no getLogs below it; a node that keeps no old state stops
run_indexer naming BOUNTY_START_BLOCK, never a silent read from block 0, unless an explorer names
the contract's first log (tests/explorer.py), which the node's header of that block confirms.

The node is a fresh anvil of the module's own (the session's chain, reverted after every test, does
not keep the state of its first blocks for long) behind tests/node_proxy.py, which presents QUIET
empty blocks before the chain's first real one: the contract then stands thousands of blocks into
the chain. No block below it is read: no getLogs range and no header by number."""

from __future__ import annotations

import math
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contracts.devchain import Anvil, deploy_reference_contracts, free_port
from indexer.health import indexer_health
from indexer.models import SyncState
from indexer.sync import Indexer
from records.models import Bounty, Deployment
from tests.chain import Chain
from tests.explorer import FakeBlockscout
from tests.indexer.conftest import catch_up_to_head, config_for, process_env
from tests.indexer.test_run_indexer_command import create_bounty, run, start, wait_until
from tests.node_proxy import NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)

QUIET = 9_000  # empty blocks presented between the genesis block and the chain's first


@pytest.fixture(scope="module")
def archive() -> Iterator[Chain]:
    """A chain of its own, whose every block's state anvil still holds."""
    anvil = Anvil(port=free_port())
    w3 = anvil.start()
    try:
        yield Chain(w3, deploy_reference_contracts(w3, anvil.rpc_url))
    finally:
        anvil.stop()


def _deployed(chain: Chain) -> int:
    """The bounty contract's deployment block as the proxy presents it (the token's comes first)."""
    address = chain.board.address
    return next(n for n in range(chain.w3.eth.block_number + 1) if chain.w3.eth.get_code(address, n)) + QUIET


def _env_without_a_start_block(chain: Chain, node: NodeProxy) -> dict[str, str]:
    env = process_env(chain, BOUNTY_RPC_URL=node.url)
    del env["BOUNTY_START_BLOCK"]
    return env


def test_an_unset_start_block_is_the_contracts_deployment_block_found_in_log2_head_calls(archive: Chain) -> None:
    chain = archive
    create_bounty(chain, "ipfs://found-from-the-deployment-block")
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(gap=QUIET, gap_after=0)) as node:
        process = start(_env_without_a_start_block(chain, node))
        try:
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://found-from-the-deployment-block").exists(),
                       timeout=60)
            head = chain.w3.eth.block_number + QUIET
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
        stats = node.stats
    deployed = _deployed(chain)
    assert process.returncode == 0, output
    assert SyncState.objects.get().found_start_block == deployed
    assert f"the contract was deployed in block {deployed}: indexing from there" in output
    age = head - deployed
    assert stats.calls["eth_getCode"] <= 2 * math.ceil(math.log2(age)) + 3  # back from the head, then bisection
    assert stats.lowest_block_read is not None and stats.lowest_block_read >= deployed
    assert Bounty.objects.count() == chain.board.functions.bountyCount().call()
    health = indexer_health(Deployment.objects.get())
    assert (health["start_block"], health["start_block_found"]) == (deployed, True)


def test_the_found_start_block_is_kept_and_read_from_the_database_next_time(archive: Chain) -> None:
    chain = archive
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(gap=QUIET, gap_after=0)) as node:
        first = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_START_BLOCK=None))
        first.find_start_block()
        asked = node.reset_stats().calls["eth_getCode"]
        again = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_START_BLOCK=None))
        again.find_start_block()
        catch_up_to_head(again)
        stats = node.reset_stats()
    assert asked >= 3 and stats.calls["eth_getCode"] == 0
    assert first.config.start_block == again.config.start_block == _deployed(chain)
    assert stats.lowest_block_read == again.config.start_block


def test_a_node_without_the_old_state_stops_it_naming_bounty_start_block(chain: Chain) -> None:
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(gap=QUIET, gap_after=0, state_kept=4)) as node:
        result = run(_env_without_a_start_block(chain, node))
        stats = node.stats
    assert result.returncode == 1
    assert "cannot tell when the contract at BOUNTY_CONTRACT_ADDRESS" in result.stderr
    assert "keeps no state that old); set BOUNTY_START_BLOCK to the block of the contract's creation" in result.stderr
    assert "Traceback" not in result.stderr
    assert stats.calls["eth_getLogs"] == 0
    assert SyncState.objects.get().last_indexed_block is None


def test_a_contract_deployed_within_the_state_a_full_node_keeps_is_found(archive: Chain) -> None:
    chain = archive
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(state_kept=64)) as node:  # no gap: deployed blocks ago
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_START_BLOCK=None))
        indexer.find_start_block()
    assert indexer.config.start_block == _deployed(chain) - QUIET


def test_a_configured_start_block_is_shown_as_configured(chain: Chain, settings: Any) -> None:
    settings.BOUNTY_START_BLOCK = chain.deployment.start_block
    indexer = Indexer(config_for(chain))
    indexer.find_start_block()  # nothing to find
    catch_up_to_head(indexer)
    health = indexer_health(Deployment.objects.get())
    assert (health["start_block"], health["start_block_found"]) == (chain.deployment.start_block, False)
    assert SyncState.objects.get().found_start_block is None


def test_a_node_without_the_old_state_beside_an_explorer_starts_at_the_contracts_first_log(chain: Chain) -> None:
    create_bounty(chain, "ipfs://found-by-the-explorer")
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(gap=QUIET, gap_after=0, state_kept=4)) as node, \
            NodeProxy(chain.deployment.rpc_url, NodeLimits(gap=QUIET, gap_after=0)) as presented, \
            FakeBlockscout(presented.url) as explorer:
        first_log = int(presented_logs(presented, chain.deployment.contract_address)[0]["blockNumber"], 16)
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_START_BLOCK=None,
                                     BOUNTY_EXPLORER_RPC_URL=explorer.url))
        indexer.find_start_block()
        catch_up_to_head(indexer)
        stats = node.stats
    assert indexer.config.start_block == first_log > QUIET
    assert stats.lowest_block_read is not None and stats.lowest_block_read >= first_log
    assert Bounty.objects.filter(prompt="ipfs://found-by-the-explorer").exists()
    assert Bounty.objects.count() == chain.board.functions.bountyCount().call()


def presented_logs(node: NodeProxy, address: str) -> list[dict[str, Any]]:
    answer = httpx.post(node.url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [
        {"address": address, "fromBlock": "0x0", "toBlock": "latest"}]}).json()
    logs: list[dict[str, Any]] = answer["result"]
    return logs
