"""`run_indexer` with BOUNTY_INDEXER_METRICS_PORT serves Prometheus metrics that agree with the
chain: the last indexed block is the tip, the events applied by type are the chain's logs by
event, and a forced reorganisation counts one reorg of its depth."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections import Counter

import pytest

from contracts.demo import seed_demo_activity
from contracts.devchain import free_port
from indexer.events import EVENT_TYPES
from indexer.rpc import PHASES
from tests.chain import Chain
from tests.indexer.conftest import process_env
from tests.indexer.test_run_indexer_command import PROJECT_DIR, create_bounty, wait_until
from tests.metrics import Samples, parse, value
from tests.servers import stop

pytestmark = pytest.mark.django_db(transaction=True)

def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(response.read().decode())


def chain_events(chain: Chain) -> Counter[str]:
    counts: Counter[str] = Counter()
    for name in EVENT_TYPES:
        logs = getattr(chain.board.events, name)().get_logs(from_block=chain.deployment.start_block)
        counts[name] = len(logs)
    return counts


def test_the_metrics_agree_with_the_chain_and_count_a_reorg(chain: Chain) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    port = free_port()
    process = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR,
                               env=process_env(chain, BOUNTY_INDEXER_METRICS_PORT=str(port)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deployment = {"chain_id": str(chain.deployment.chain_id), "contract": chain.deployment.contract_address.lower()}
    try:
        tip = chain.w3.eth.block_number
        wait_until(lambda: _reachable(port) and value(scrape(port), "bounty_indexer_last_indexed_block") == tip,
                   timeout=60)
        samples = scrape(port)
        assert value(samples, "bounty_indexer_last_indexed_block", **deployment) == tip
        assert value(samples, "bounty_indexer_head_block", **deployment) == tip
        assert value(samples, "bounty_indexer_lag_blocks", **deployment) == 0
        assert value(samples, "bounty_indexer_is_writer", **deployment) == 1
        assert 0 < value(samples, "bounty_indexer_seconds_since_node_asked", **deployment) <= 2  # read at the scrape
        assert value(samples, "bounty_indexer_max_wait_seconds", **deployment) == 15
        # An automine chain's blocks keep no rhythm (test_clock.py has one that does).
        assert value(samples, "bounty_indexer_block_rhythm_seconds", **deployment) == 0
        assert value(samples, "bounty_indexer_block_rhythm_trusted_since_seconds", **deployment) == 0
        phases = {phase: value(samples, "bounty_indexer_rpc_phase_calls_total", phase=phase, **deployment)
                  for phase in PHASES}
        assert phases["startup"] >= 2 and phases["realtime"] >= 1  # the checks; the polls of the head
        # Each call counted for one phase: the totals agree (asked again if a scrape fell between the two
        # counters' updates).
        wait_until(lambda: _calls_by_phase_add_up(scrape(port), deployment), timeout=5)
        expected = chain_events(chain)
        assert sum(expected.values()) > 0 and all(expected[name] > 0 for name in EVENT_TYPES)
        applied = {name: value(samples, "bounty_indexer_events_applied_total", type=name, **deployment)
                   for name in EVENT_TYPES}
        assert applied == expected
        assert value(samples, "bounty_indexer_rpc_requests_total", method="eth_getLogs") >= 1
        assert value(samples, "bounty_indexer_rpc_requests_total", method="eth_chainId") == 1
        assert value(samples, "bounty_indexer_batch_seconds_count", **deployment) >= 1
        assert value(samples, "bounty_indexer_reorgs_total", **deployment) == 0
        for kind in ("timeout", "rate_limited", "server_error", "range_limit", "other"):
            assert value(samples, "bounty_indexer_rpc_errors_total", kind=kind) == 0

        fork = chain.w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[arg-type]
        create_bounty(chain, "ipfs://orphaned-1")
        create_bounty(chain, "ipfs://orphaned-2")
        orphaned_tip = chain.w3.eth.block_number
        wait_until(lambda: value(scrape(port), "bounty_indexer_last_indexed_block") == orphaned_tip)
        assert chain.w3.provider.make_request("evm_revert", [fork])["result"] is True  # type: ignore[arg-type]
        for n in range(5):  # a longer branch: the indexed tip's block changes
            create_bounty(chain, f"ipfs://new-branch-{n}")
        new_tip = chain.w3.eth.block_number
        wait_until(lambda: value(scrape(port), "bounty_indexer_last_indexed_block") == new_tip)
        samples = scrape(port)
        assert value(samples, "bounty_indexer_reorgs_total", **deployment) == 1
        assert value(samples, "bounty_indexer_reorg_depth_count", **deployment) == 1
        assert value(samples, "bounty_indexer_reorg_depth_sum", **deployment) == orphaned_tip - tip
        assert value(samples, "bounty_indexer_events_applied_total", type="BountyCreated", **deployment) == (
            expected["BountyCreated"] + 2 + 5)  # the orphaned ones were applied, then undone
    finally:
        stop(process)


def _calls_by_phase_add_up(samples: Samples, deployment: dict[str, str]) -> bool:
    by_phase = sum(value(samples, "bounty_indexer_rpc_phase_calls_total", phase=phase, **deployment)
                   for phase in PHASES)
    return by_phase == value(samples, "bounty_indexer_rpc_requests_total", **deployment)


def _reachable(port: int) -> bool:
    try:
        scrape(port)
    except OSError:
        return False
    return True
