"""The mirror-equals-chain check shared by the indexer tests.

Reads every bounty, submission and dispute through the contract's view functions and the
creating events' logs, and compares them field by field with the database; also checks the
exactly-once ledger, the change log's sequence and its digests' chain (records.history).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast
from web3.contract import Contract

from indexer.models import AppliedLog, ChangeLogEntry, SyncState
from records.history import genesis_digest, next_digest
from records.models import Bounty, Deployment, Dispute, Submission
from records.representation import bounty_json, dispute_json, record_body, submission_json
from records.search import join_fields, search_fields

# The contract's enums and record events, written out from contracts/src/BountyBoard.sol on purpose,
# not read from the indexer (records.models, indexer.events): this is the oracle the mirror is
# checked against, so a status or an event the product drops or reorders fails here.
BOUNTY_STATUS = ["open", "resolved", "refunded"]
SUBMISSION_STATUS = ["submitted", "disputed", "accepted", "rejected", "refunded"]
DISPUTE_STATUS = ["pending_human_review", "upheld", "rejected", "cancelled"]
RECORD_EVENTS = ["BountyCreated", "SubmissionCreated", "DisputeCreated", "DisputeResolved", "DisputeCancelled",
                 "BountyFinalized", "BountyRefunded", "SubmissionRefunded"]


def _time(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def _sources(board: Contract, event: str, key: str) -> dict[int, tuple[str, int, int]]:
    logs = getattr(board.events, event)().get_logs(from_block=0)
    return {log["args"][key]: ("0x" + log["transactionHash"].hex(), log["blockNumber"], log["logIndex"])
            for log in logs}


def chain_state(board: Contract) -> dict[str, Any]:
    """Every record as the chain holds it, in the mirror's terms."""
    w3 = board.w3
    bounty_src = _sources(board, "BountyCreated", "bountyId")
    submission_src = _sources(board, "SubmissionCreated", "submissionId")
    dispute_src = _sources(board, "DisputeCreated", "disputeId")
    times = {}

    def block_time(number: int) -> datetime:
        if number not in times:
            times[number] = _time(w3.eth.get_block(number)["timestamp"])
        return times[number]

    bounties, submissions, disputes = {}, {}, {}
    dispute_counts: dict[int, int] = {}
    for i in range(1, board.functions.disputeCount().call() + 1):
        submission_id, challenger, status, bond, digest, uri = board.functions.getDispute(i).call()
        bounty_id = board.functions.getSubmission(submission_id).call()[0]
        tx, block, index = dispute_src[i]
        disputes[i] = dict(bounty_id=bounty_id, submission_id=submission_id, challenger_id=challenger.lower(),
                           reason=uri, bond_amount=bond, status=DISPUTE_STATUS[status], metadata_uri=uri,
                           metadata_hash="0x" + digest.hex(), tx_hash=tx, block_number=block, log_index=index,
                           created_at=block_time(block))
        dispute_counts[submission_id] = dispute_counts.get(submission_id, 0) + 1
    for i in range(1, board.functions.submissionCount().call() + 1):
        bounty_id, claimant, status, review_deadline, _, bond, digest, uri = board.functions.getSubmission(i).call()
        tx, block, index = submission_src[i]
        submissions[i] = dict(bounty_id=bounty_id, tile_id=claimant.lower(), claimant=claimant.lower(), content=uri,
                              bond_amount=bond, review_deadline=_time(review_deadline),
                              status=SUBMISSION_STATUS[status], metadata_uri=uri, metadata_hash="0x" + digest.hex(),
                              tx_hash=tx, block_number=block, log_index=index, created_at=block_time(block),
                              dispute_count=dispute_counts.get(i, 0))
    for i in range(1, board.functions.bountyCount().call() + 1):
        (poster, status, duration, deadline, window, reward, fee, bond, _, _, digest,
         uri) = board.functions.getBounty(i).call()
        tx, block, index = bounty_src[i]
        bounties[i] = dict(prompt=uri, bounty_amount=reward, fee_amount=fee, bond_amount=bond, duration=duration,
                           status=BOUNTY_STATUS[status], poster=poster.lower(), deadline=_time(deadline),
                           challenge_window=window, metadata_uri=uri, metadata_hash="0x" + digest.hex(),
                           tx_hash=tx, block_number=block, log_index=index, created_at=block_time(block),
                           submission_count=len(board.functions.submissionQueue(i).call()))
    return {"bounties": bounties, "submissions": submissions, "disputes": disputes}


def mirror_state(deployment: Deployment) -> dict[str, Any]:
    """Every record as the database holds it, in the same shape as `chain_state`."""
    def rows(model: type[Any], id_field: str, fields: list[str]) -> dict[int, dict[str, Any]]:
        return {r[id_field]: {f: r[f] for f in fields}
                for r in model.objects.filter(deployment=deployment).values(id_field, *fields)}

    common = ["metadata_uri", "metadata_hash", "tx_hash", "block_number", "log_index", "created_at"]
    return {
        "bounties": rows(Bounty, "bounty_id", ["prompt", "bounty_amount", "fee_amount", "bond_amount", "duration",
                                               "status", "poster", "deadline", "challenge_window",
                                               "submission_count", *common]),
        "submissions": rows(Submission, "submission_id", ["bounty_id", "tile_id", "claimant", "content",
                                                          "bond_amount", "review_deadline", "status",
                                                          "dispute_count", *common]),
        "disputes": rows(Dispute, "dispute_id", ["bounty_id", "submission_id", "challenger_id", "reason",
                                                 "bond_amount", "status", *common]),
    }


def record_log_count(board: Contract) -> int:
    return sum(len(getattr(board.events, name)().get_logs(from_block=0)) for name in RECORD_EVENTS)


def assert_mirror_equals_chain(board: Contract, deployment: Deployment) -> None:
    """The database mirrors the chain exactly, each log applied once, the change log gap-free."""
    expected, actual = chain_state(board), mirror_state(deployment)
    for kind in ("bounties", "submissions", "disputes"):
        assert sorted(actual[kind]) == sorted(expected[kind]), f"{kind}: ids differ"
        for key, fields in expected[kind].items():
            assert actual[kind][key] == fields, f"{kind} {key} differs"
    ledger = list(AppliedLog.objects.filter(deployment=deployment).values_list("tx_hash", "log_index"))
    assert len(ledger) == len(set(ledger)) == record_log_count(board), "each record log applied exactly once"
    seqs = list(ChangeLogEntry.objects.filter(deployment=deployment).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), "the change log has no gap and no repeat"
    assert SyncState.objects.get(deployment=deployment).last_seq == len(seqs)
    assert_change_log_is_chained(deployment)
    assert_bodies_are_current(deployment)
    flags = Deployment.objects.filter(pk=deployment.pk).values(
        "bounty_in_chain_order", "submission_in_chain_order", "dispute_in_chain_order").get()
    assert all(flags.values()), f"records are in chain order (records.chronology): {flags}"


def assert_change_log_is_chained(deployment: Deployment) -> None:
    """Each change-log entry's digest is the one of its seq, type, block and payload as stored,
    chained on the digest before it from the deployment's genesis (records.history, computed
    here again), and the sync state's last_digest is the newest entry's."""
    digest = genesis_digest(deployment.chain_id, deployment.contract_address)
    entries = (ChangeLogEntry.objects.filter(deployment=deployment).order_by("seq")
               .values_list("seq", "type", "block_number", Cast("payload", TextField()), "digest"))
    for seq, type_, block_number, text, stored in entries:
        digest = next_digest(digest, seq, type_, block_number, text.encode())
        assert stored == digest, f"the digest of seq {seq} is not chained on the one before"
    assert SyncState.objects.get(deployment=deployment).last_digest == (digest if entries else None)


def assert_bodies_are_current(deployment: Deployment) -> None:
    """Every record's stored JSON body and search text are what records.representation and
    records.search render of it now."""
    chain_id, address = deployment.chain_id, deployment.contract_address
    for model in (Bounty, Submission, Dispute):
        for record in model.objects.filter(deployment=deployment):
            assert record.body == record_body(record, chain_id=chain_id, contract_address=address), record
            assert record.search_text == join_fields(search_fields(record)), record


def replay(deployment: Deployment) -> dict[tuple[str, int], dict[str, Any]]:
    """What a live consumer holds after applying every change-log message in order."""
    state: dict[tuple[str, int], dict[str, Any]] = {}
    for kind_type, payload in ChangeLogEntry.objects.filter(deployment=deployment).order_by("seq").values_list(
        "type", "payload"
    ):
        kind, action = kind_type.split(".")
        if action == "removed":
            state.pop((kind, payload["id"]))
        else:
            state[(kind, payload["id"])] = payload
    return state


def current(deployment: Deployment) -> dict[tuple[str, int], dict[str, Any]]:
    chain_id, address = deployment.chain_id, deployment.contract_address
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for b in Bounty.objects.filter(deployment=deployment):
        records[("bounty", b.bounty_id)] = bounty_json(b, chain_id=chain_id, contract_address=address)
    for s in Submission.objects.filter(deployment=deployment):
        records[("submission", s.submission_id)] = submission_json(s, chain_id=chain_id, contract_address=address)
    for d in Dispute.objects.filter(deployment=deployment):
        records[("dispute", d.dispute_id)] = dispute_json(d, chain_id=chain_id, contract_address=address)
    return records


def assert_live_consumer_is_current(deployment: Deployment) -> None:
    """A consumer that upserts every message and drops `.removed` ones holds the current records."""
    assert replay(deployment) == current(deployment)
