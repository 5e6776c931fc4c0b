"""The mirror proven against the contract (indexer.proof, `manage.py verify_mirror`): after a sync
of the demo activity (records of every kind in every status) it equals the contract field by field
at the block it is indexed to; a field changed by hand, a record missing and a counter that drifted
are each named with the record and the field, and the command exits 1."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from contracts.demo import seed_demo_activity
from indexer.sync import Indexer
from records.models import Bounty, Dispute, Submission
from tests.chain import Chain
from tests.indexer.conftest import catch_up_to_head, config_for, process_env
from tests.indexer.test_run_indexer_command import PROJECT_DIR, create_bounty, start, wait_until
from tests.node_proxy import NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)


def verify(chain: Chain, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "verify_mirror", *args], cwd=PROJECT_DIR,
                          env=process_env(chain), capture_output=True, text=True, timeout=60)


@pytest.fixture
def mirrored(chain: Chain) -> Indexer:
    seed_demo_activity(chain.w3, chain.deployment)
    indexer = Indexer(config_for(chain))
    indexer.ensure_deployment()
    catch_up_to_head(indexer)
    return indexer


def test_a_synced_mirror_equals_the_contract(chain: Chain, mirrored: Indexer) -> None:
    result = verify(chain)
    assert result.returncode == 0, result.stderr
    counts = chain.board.functions
    expected = (f"the mirror ({counts.bountyCount().call()} bounties, {counts.submissionCount().call()} submissions, "
                f"{counts.disputeCount().call()} disputes) equals the contract at block {chain.w3.eth.block_number}")
    assert expected in result.stdout


def test_a_status_changed_by_hand_is_named_with_its_record_and_field(chain: Chain, mirrored: Indexer) -> None:
    bounty = Bounty.objects.get(bounty_id=2)
    changed = "refunded" if bounty.status != "refunded" else "open"
    Bounty.objects.filter(pk=bounty.pk).update(status=changed)
    result = verify(chain)
    assert result.returncode == 1
    assert f"bounty 2: status is '{changed}' in the mirror, '{bounty.status}' in the contract" in result.stderr
    assert "differs from the contract at block" in result.stderr and "in 1 fields" in result.stderr


def test_a_lost_record_and_the_counters_it_leaves_wrong_are_named(chain: Chain, mirrored: Indexer) -> None:
    dispute = Dispute.objects.order_by("dispute_id").first()
    assert dispute is not None
    Dispute.objects.filter(pk=dispute.pk).delete()
    Submission.objects.filter(submission_id=1).update(claimant="0x" + "00" * 20)
    result = verify(chain)
    assert result.returncode == 1
    assert "the dispute count: count is" in result.stderr
    assert f"dispute {dispute.dispute_id}: record is None in the mirror, 'held' in the contract" in result.stderr
    assert "submission 1: claimant is '0x0000000000000000000000000000000000000000' in the mirror" in result.stderr


def test_another_block_than_the_mirrors_is_refused_saying_why(chain: Chain, mirrored: Indexer) -> None:
    result = verify(chain, "--block", "1")
    assert result.returncode == 1
    assert f"the mirror is indexed to block {chain.w3.eth.block_number}, not 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_it_reads_one_snapshot_while_the_indexer_writes_on(chain: Chain, mirrored: Indexer) -> None:
    """A slow proof (a node 300 ms away that takes one call a request) holds neither the database
    nor the indexer up: a bounty posted meanwhile is indexed before the proof ends, and the proof,
    of the block the mirror was at when it began, passes."""
    indexer = start(process_env(chain))
    try:
        with NodeProxy(chain.deployment.rpc_url, NodeLimits(latency=0.3, max_batch=1)) as node:
            proof = subprocess.Popen([sys.executable, "manage.py", "verify_mirror"], cwd=PROJECT_DIR,
                                     env=process_env(chain, BOUNTY_RPC_URL=node.url), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            wait_until(lambda: node.stats.calls["eth_call"] >= 3, timeout=30)  # reading the contract
            create_bounty(chain, "ipfs://during-the-proof")
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://during-the-proof").exists(), timeout=3)
            assert proof.poll() is None, "the proof ended before the bounty was indexed: too quick to tell"
            output, errors = proof.communicate(timeout=60)
    finally:
        indexer.send_signal(signal.SIGTERM)
        indexer.communicate(timeout=30)
    assert proof.returncode == 0, errors
    assert "equals the contract at block" in output

