"""The mirror proven against the contract's own state, not its logs.

Every other check of the indexer (the second reading, the reorganisation check) is built on logs:
a log that the node (or an explorer) never showed leaves no trace there. The contract's state
does: its record counters (`bountyCount`, `submissionCount`, `disputeCount`) and each record's
getter (`getBounty`, `getSubmission`, `getDispute`), read through the node at one block in
batched `eth_call`s, are compared field by field with the mirror as indexed to that block. The
children counters the mirror keeps (a bounty's submissions, a submission's disputes) are
compared with the children the contract holds. `manage.py verify_mirror` runs it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from eth_abi.abi import decode
from eth_abi.exceptions import DecodingError
from eth_utils.crypto import keccak

from contracts.artifacts import bounty_abi
from indexer.errors import IndexerError, NodeBehind, RetriesExhausted, RpcError
from indexer.models import IndexedBlock, SyncState
from indexer.rpc import RpcClient
from indexer.transitions import chain_time
from records.kinds import BOUNTY, BY_NAME, DISPUTE, KINDS, SUBMISSION, Kind, RecordKind
from records.models import Bounty, Deployment, Dispute, Submission
from records.snapshot import read_snapshot

if TYPE_CHECKING:
    from indexer.commit import Committer
    from indexer.explorer import ExplorerGuide
    from indexer.metrics import IndexerMetrics

logger = logging.getLogger(__name__)

COUNTERS = tuple(kind.count_getter for kind in KINDS)  # the contract's record counts
BEHIND_RETRIES = 2  # a block the node does not know, asked again before it is believed gone
PROOF_TRIES = 5  # proofs after a guided sync the node cannot answer, before the blocks are left unproven


@dataclass(frozen=True)
class Difference:
    """One field on which the mirror and the contract disagree (`record_id` None: a counter)."""

    kind: str
    record_id: int | None
    field: str
    mirror: Any
    contract: Any

    def __str__(self) -> str:
        what = f"{self.kind} {self.record_id}" if self.record_id is not None else f"the {self.kind} count"
        return f"{what}: {self.field} is {self.mirror!r} in the mirror, {self.contract!r} in the contract"


@dataclass(frozen=True)
class Proof:
    block: int
    records: Counter[str]  # compared, by kind
    calls: int  # eth_calls made
    differences: list[Difference]


# ----------------------------------------------------------------------------- the contract's side

@cache
def _function(name: str) -> tuple[bytes, list[str]]:
    """A view's selector and output types, from the contract's ABI (contracts/artifacts)."""
    for item in bounty_abi():
        if item.get("type") == "function" and item["name"] == name:
            inputs = ",".join(i["type"] for i in item["inputs"])
            return keccak(text=f"{name}({inputs})")[:4], [_type(output) for output in item["outputs"]]
    raise IndexerError(f"the contract's ABI has no view {name}")


def _type(item: dict[str, Any]) -> str:
    if item["type"] == "tuple":
        return "(" + ",".join(_type(component) for component in item["components"]) + ")"
    return str(item["type"])


def _call(name: str, argument: int | None, block: str, address: str) -> tuple[str, list[Any]]:
    selector, _ = _function(name)
    data = selector + (argument.to_bytes(32, "big") if argument is not None else b"")
    return "eth_call", [{"to": address, "data": "0x" + data.hex()}, {"blockHash": block}]  # EIP-1898


def _decoded(name: str, answer: Any) -> Any:
    _, types = _function(name)
    try:
        return decode(types, bytes.fromhex(answer[2:]))[0]
    except (TypeError, ValueError, DecodingError) as exc:
        raise IndexerError(f"the contract's {name} answered {answer!r}, which does not decode ({exc}): is "
                           "BOUNTY_CONTRACT_ADDRESS the bounty contract, on this node's chain?") from exc


def contract_state(rpc: RpcClient, address: str, block: str) -> tuple[dict[Kind, list[Any]], int]:
    """Each record kind's getter's answers at the block of hash `block`, by ID (from 1), and the
    calls made."""
    counts = [_decoded(name, answer) for name, answer in zip(
        COUNTERS, rpc.batch([_call(name, None, block, address) for name in COUNTERS], behind_retries=BEHIND_RETRIES),
        strict=True)]
    state: dict[Kind, list[Any]] = {}
    for kind, count in zip(KINDS, counts, strict=True):
        answers = rpc.batch([_call(kind.getter, record_id, block, address) for record_id in range(1, count + 1)],
                            behind_retries=BEHIND_RETRIES)
        state[kind.name] = [_decoded(kind.getter, answer) for answer in answers]
    return state, len(COUNTERS) + sum(counts)


# ----------------------------------------------------------------------------- the comparison

def _address(value: str) -> str:
    return value.lower()


def _hash(value: bytes) -> str:
    return "0x" + value.hex()


@cache
def _statuses(kind: Kind) -> list[str]:
    """The kind's statuses in the order of the contract's enum (the model's choices keep it)."""
    return [value for value, _ in BY_NAME[kind].model._meta.get_field("status").choices or []]


def _status(kind: RecordKind, held: int) -> str:
    values = _statuses(kind.name)
    return values[held] if 0 <= held < len(values) else f"a status the mirror does not know ({held})"


@dataclass(frozen=True)
class Mirror:
    block: int
    block_hash: str
    records: dict[Kind, dict[int, Any]]  # each kind's records by on-chain ID


def mirror_at(deployment: Deployment, block: int | None) -> Mirror:
    """The mirror's records and the block they are indexed to, read in one snapshot that does not
    hold the indexer up; IndexerError when `block` is given and the mirror is indexed to another
    (it holds no state of other blocks)."""
    with read_snapshot():
        indexed = SyncState.objects.filter(deployment=deployment).values_list("last_indexed_block", flat=True).first()
        if indexed is None:
            raise IndexerError("nothing is indexed yet: run run_indexer first")
        if block is not None and block != indexed:
            raise IndexerError(f"the mirror is indexed to block {indexed}, not {block}: it holds no state of other "
                               "blocks (leave --block out, or stop the indexer once it is at that block)")
        block_hash = IndexedBlock.objects.filter(deployment=deployment, number=indexed).values_list(
            "hash", flat=True).get()  # each batch's last block is kept
        return Mirror(indexed, block_hash, {
            kind.name: {getattr(record, kind.id_field): record
                        for record in kind.model.objects.filter(deployment=deployment)}
            for kind in KINDS})


@dataclass(frozen=True)
class Held:
    """The contract's records by kind, and the children counts the mirror keeps (a bounty's
    submissions, a submission's disputes: the first member of a submission's and a dispute's getter
    is its parent's ID)."""

    records: dict[Kind, list[Any]]
    submissions_of: Counter[int]
    disputes_of: Counter[int]

    @classmethod
    def of(cls, state: dict[Kind, list[Any]]) -> Held:
        return cls(state, Counter(held[0] for held in state[SUBMISSION.name]),
                   Counter(held[0] for held in state[DISPUTE.name]))


# Each kind's fields against its getter's answer (the tuple the contract's ABI declares).
Pairs = list[tuple[str, Any, Any]]


def _bounty_pairs(bounty: Bounty, held: tuple[Any, ...], contract: Held) -> Pairs:
    (poster, status, duration, deadline, window, reward, fee, bond, _, _, metadata_hash, metadata_uri) = held
    return [
        ("poster", bounty.poster, _address(poster)), ("status", bounty.status, _status(BOUNTY, status)),
        ("duration", bounty.duration, duration), ("deadline", bounty.deadline, chain_time(deadline)),
        ("challenge_window", bounty.challenge_window, window), ("bounty_amount", bounty.bounty_amount, reward),
        ("fee_amount", bounty.fee_amount, fee), ("bond_amount", bounty.bond_amount, bond),
        ("metadata_hash", bounty.metadata_hash, _hash(metadata_hash)),
        ("metadata_uri", bounty.metadata_uri, metadata_uri),
        ("submission_count", bounty.submission_count, contract.submissions_of[bounty.bounty_id]),
    ]


def _submission_pairs(submission: Submission, held: tuple[Any, ...], contract: Held) -> Pairs:
    (bounty_id, claimant, status, review_deadline, _, bond, metadata_hash, metadata_uri) = held
    return [
        ("bounty_id", submission.bounty_id, bounty_id), ("claimant", submission.claimant, _address(claimant)),
        ("status", submission.status, _status(SUBMISSION, status)),
        ("review_deadline", submission.review_deadline, chain_time(review_deadline)),
        ("bond_amount", submission.bond_amount, bond),
        ("metadata_hash", submission.metadata_hash, _hash(metadata_hash)),
        ("metadata_uri", submission.metadata_uri, metadata_uri),
        ("dispute_count", submission.dispute_count, contract.disputes_of[submission.submission_id]),
    ]


def _dispute_pairs(dispute: Dispute, held: tuple[Any, ...], contract: Held) -> Pairs:
    (submission_id, challenger, status, bond, metadata_hash, metadata_uri) = held
    submissions = contract.records[SUBMISSION.name]
    parent = submissions[submission_id - 1][0] if 0 < submission_id <= len(submissions) else None
    return [
        ("submission_id", dispute.submission_id, submission_id), ("bounty_id", dispute.bounty_id, parent),
        ("challenger", dispute.challenger_id, _address(challenger)),
        ("status", dispute.status, _status(DISPUTE, status)), ("bond_amount", dispute.bond_amount, bond),
        ("metadata_hash", dispute.metadata_hash, _hash(metadata_hash)),
        ("metadata_uri", dispute.metadata_uri, metadata_uri),
    ]


PAIRS: dict[Kind, Callable[[Any, tuple[Any, ...], Held], Pairs]] = {
    BOUNTY.name: _bounty_pairs, SUBMISSION.name: _submission_pairs, DISPUTE.name: _dispute_pairs}
if set(PAIRS) != set(BY_NAME):
    raise ImportError(f"indexer.proof compares {sorted(PAIRS)} with their getters, not every kind of records.kinds")


def differences(mirror: Mirror, state: dict[Kind, list[Any]]) -> tuple[list[Difference], Counter[str]]:
    """The mirror's records against the contract's."""
    found = [Difference(kind.name, None, "count", len(mirror.records[kind.name]), len(state[kind.name]))
             for kind in KINDS if len(mirror.records[kind.name]) != len(state[kind.name])]  # the counts first
    contract = Held.of(state)
    for kind in KINDS:
        mirrored, held_records = mirror.records[kind.name], state[kind.name]
        for number, held in enumerate(held_records, start=1):
            if (record := mirrored.get(number)) is None:
                found.append(Difference(kind.name, number, "record", None, "held"))
                continue
            found.extend(Difference(kind.name, number, field, value, expected)
                         for field, value, expected in PAIRS[kind.name](record, held, contract) if value != expected)
    return found, Counter({kind.name: len(mirror.records[kind.name]) for kind in KINDS})


def prove(rpc: RpcClient, deployment: Deployment, block: int | None = None) -> Proof:
    """The mirror against the contract at the block the mirror is indexed to (by that block's hash,
    so that a block since replaced is an error, never a false difference)."""
    mirror = mirror_at(deployment, block)
    try:
        state, calls = contract_state(rpc, deployment.contract_address, mirror.block_hash)
    except (NodeBehind, RpcError) as exc:
        if isinstance(exc, RetriesExhausted):
            raise
        raise IndexerError(f"the node cannot read the contract at block {mirror.block} ({mirror.block_hash}): {exc}; "
                           "if the block was replaced, the indexer undoes it: verify again once it has") from exc
    found, records = differences(mirror, state)
    return Proof(mirror.block, records, calls, found)


# ----------------------------------------------------------------------------- after a guided sync

@dataclass
class GuidedSyncProof:
    """The proof that settles a sync an explorer guided (indexer.explorer), once the indexer has
    caught up: the blocks the explorer said were empty were taken on its word, and the contract's
    state is what that word is checked against.

    Equal: the guided blocks are proven (`SyncState.guided_from_block` cleared: their hashes and
    undo entries may go as usual). A difference: the explorer hid a log. It is set aside for this
    process, and the blocks from the first guided one are read again by range through the node
    (indexer.reread: the second reading finds the lost logs and rolls back to the block before
    the first), then proven again. A difference that outlives that repair is not the explorer's: it
    is logged as an error with the fields, for verify_mirror and a person, and not repaired in a loop."""

    rpc: RpcClient
    metrics: IndexerMetrics
    committer: Committer
    repaired_from: int | None = None  # the guided blocks read again by range in this process
    repair_until: int = -1  # ... up to this block (the newest read by range when the repair began)
    failures: int = 0  # proofs in a row the node could not answer

    def repairing(self, state: SyncState) -> bool:
        """Whether the repair's second reading (indexer.reread, a window a step) has not yet come
        back to where it began: the proof waits for it."""
        first = state.guided_from_block
        return first is not None and self.repaired_from == first and state.read_twice_to(first) < self.repair_until

    def settle(self, deployment: Deployment, state: SyncState, guide: ExplorerGuide | None) -> bool:
        first = state.guided_from_block
        assert first is not None
        try:
            proof = prove(self.rpc, deployment)
        except IndexerError as exc:  # the tip replaced meanwhile, or a node that keeps no state that old
            self.failures += 1
            if self.failures < PROOF_TRIES:
                logger.warning("the mirror could not be proven against the contract yet (%d of %d tries): %s",
                               self.failures, PROOF_TRIES, exc)
                return False
            logger.error("the mirror could not be proven against the contract after %d tries (%s): the blocks from "
                         "%d on that the explorer guided stay unproven. Run manage.py verify_mirror through a node "
                         "that keeps the state of recent blocks", self.failures, exc, first)
            self._proven(state)
            return False
        self.failures = 0
        records = ", ".join(f"{count} {kind}" for kind, count in sorted(proof.records.items()))
        if not proof.differences:
            self.metrics.mirror_proven("equal")
            logger.info("the mirror (%s) equals the contract at block %d (%d eth_calls): the blocks from %d on that "
                        "the explorer guided are proven", records, proof.block, proof.calls, first)
            self._proven(state)
            return True
        self.metrics.mirror_proven("differs")
        shown = "; ".join(str(difference) for difference in proof.differences[:10])
        if self.repaired_from != first:
            self.repair(state, guide, f"the mirror ({records}) differs from the contract at block {proof.block} in "
                                      f"{len(proof.differences)} fields ({shown})")
            return True
        logger.error("the mirror (%s) still differs from the contract at block %d after blocks %d-%d were read again "
                     "by range, in %d fields: %s. Run manage.py verify_mirror; re-index into an empty database",
                     records, proof.block, first, proof.block, len(proof.differences), shown)
        self._proven(state)
        return True

    def _proven(self, state: SyncState) -> None:
        """Settled: the guided blocks' hashes and undo entries go as every other block's."""
        SyncState.objects.filter(pk=state.pk).update(guided_from_block=None)
        state.guided_from_block = None
        self.committer.guided_prepared = False

    def repair(self, state: SyncState, guide: ExplorerGuide | None, found: str) -> None:
        """The explorer hid a log (`found` says how it shows): set aside, and the guided blocks read
        again by range (those before the first guided one were read by range already)."""
        if guide is not None:
            guide.set_aside(found)
        first = state.guided_from_block
        if first is None:  # nothing guided is committed: the blocks ahead are read by range
            return
        self.repaired_from = first
        self.repair_until = state.read_twice_to(first)
        logger.warning("%s: the explorer hid logs. Reading the blocks from %d on again by range through the node to "
                       "repair them", found, first)
        SyncState.objects.filter(pk=state.pk).update(reread_block=first - 1)
        state.reread_block = first - 1
