"""Every state transition of the mirrored records, in one place: the `apply_*` function of each
event, registered for it with the records it refers to (`@transition`), `apply_event`, which
applies one, and `undo_entries`, which reverts them.

A batch of decoded events is applied to a `RecordStore` (indexer.store), which holds the records
the batch touches (`references` names them, to load them up front). Each application changes
them in memory, adds the change-log messages it causes to the store (the record as the API
serializes it, right after the change; a bulk backfill keeps none) and returns the undo entries
that restore the previous state if the log's block is orphaned by a reorganisation (none for
blocks too deep for one to reach). The records it creates are built by indexer.writes.new_record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, get_args

from indexer.errors import InconsistentChain
from indexer.events import (
    BountyCreated,
    BountyFinalized,
    BountyRefunded,
    DisputeCancelled,
    DisputeCreated,
    DisputeResolved,
    RecordEvent,
    SubmissionCreated,
    SubmissionRefunded,
)
from indexer.store import Message, RecordStore, UndoEntry
from indexer.writes import new_record
from records.changes import MessageType
from records.kinds import BOUNTY, BY_NAME, DISPUTE, SUBMISSION, Kind, RecordKind
from records.models import (
    Bounty,
    BountyStatus,
    Dispute,
    DisputeStatus,
    Submission,
    SubmissionStatus,
)
from records.representation import JsonRecord

# The contract's SubmissionStatus enum, as DisputeResolved carries it.
SUBMISSION_STATUS_BY_ENUM = {
    0: SubmissionStatus.SUBMITTED,
    1: SubmissionStatus.DISPUTED,
    2: SubmissionStatus.ACCEPTED,
    3: SubmissionStatus.REJECTED,
    4: SubmissionStatus.REFUNDED,
}

_LATEST_DATETIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def chain_time(timestamp: int) -> datetime:
    """A chain timestamp as an aware UTC datetime; beyond year 9999 it is clamped to the last second."""
    try:
        return datetime.fromtimestamp(timestamp, UTC)
    except (OverflowError, ValueError, OSError):
        return _LATEST_DATETIME


@dataclass(frozen=True)
class Transition:
    """What one record event does: `apply` changes the store; `refers` names the kinds of the
    existing records it reads or changes, each found by that kind's ID field on the event
    (`SubmissionCreated.bounty_id`), so that the store loads them up front."""

    apply: Callable[[RecordStore, Any, datetime], None]
    refers: tuple[RecordKind, ...]


TRANSITIONS: dict[type[Any], Transition] = {}  # by event class; every RecordEvent has one (checked below)
_E = TypeVar("_E")


def transition(event: type[_E], *, refers: tuple[RecordKind, ...] = ()) -> Callable[
        [Callable[[RecordStore, _E, datetime], None]], Callable[[RecordStore, _E, datetime], None]]:
    """Registers the decorated function as what `event` does (docs/development.md, Adding a
    record event)."""
    def register(apply: Callable[[RecordStore, _E, datetime], None]) -> Callable[[RecordStore, _E, datetime], None]:
        if event in TRANSITIONS:
            raise ImportError(f"{event.__name__} has two transitions: {TRANSITIONS[event].apply.__name__} and "
                              f"{apply.__name__}")
        TRANSITIONS[event] = Transition(apply, refers)
        return apply
    return register


def references(events: Iterable[RecordEvent]) -> Iterator[tuple[Kind, int]]:
    """The existing records the events refer to, as (kind, ID): what `RecordStore.load` fetches."""
    for event in events:
        for kind in TRANSITIONS[type(event)].refers:
            yield kind.name, getattr(event, kind.id_field)


def _source(event: RecordEvent, block_time: datetime) -> dict[str, Any]:
    return {
        "tx_hash": event.log.tx_hash,
        "block_number": event.log.block_number,
        "log_index": event.log.log_index,
        "created_at": block_time,
    }


@transition(BountyCreated)
def apply_bounty_created(store: RecordStore, event: BountyCreated, block_time: datetime) -> None:
    bounty = new_record(
        Bounty,
        deployment_id=store.deployment.pk,
        bounty_id=event.bounty_id,
        prompt=event.metadata_uri,
        bounty_amount=event.reward_amount,
        fee_amount=event.fee_amount,
        bond_amount=event.bond_amount,
        duration=event.duration,
        status=BountyStatus.OPEN,
        poster=event.poster,
        deadline=chain_time(event.deadline),
        challenge_window=event.challenge_window,
        metadata_uri=event.metadata_uri,
        metadata_hash=event.metadata_hash,
        submission_count=0,
        **_source(event, block_time),
    )
    store.add("bounty", event.bounty_id, bounty)
    store.log(MessageType.BOUNTY_CREATED, "bounty", event.bounty_id)


@transition(SubmissionCreated, refers=(BOUNTY,))
def apply_submission_created(store: RecordStore, event: SubmissionCreated, block_time: datetime) -> None:
    bounty: Bounty = store.change("bounty", event.bounty_id)
    submission = new_record(
        Submission,
        deployment_id=store.deployment.pk,
        submission_id=event.submission_id,
        bounty_id=event.bounty_id,
        tile_id=event.claimant,
        content=event.metadata_uri,
        bond_amount=event.bond_amount,
        review_deadline=chain_time(event.review_deadline),
        status=SubmissionStatus.SUBMITTED,
        claimant=event.claimant,
        metadata_uri=event.metadata_uri,
        metadata_hash=event.metadata_hash,
        dispute_count=0,
        **_source(event, block_time),
    )
    store.add("submission", event.submission_id, submission)
    bounty.submission_count += 1
    store.log(MessageType.SUBMISSION_CREATED, "submission", event.submission_id)


@transition(DisputeCreated, refers=(SUBMISSION,))
def apply_dispute_created(store: RecordStore, event: DisputeCreated, block_time: datetime) -> None:
    submission: Submission = store.change("submission", event.submission_id)
    dispute = new_record(
        Dispute,
        deployment_id=store.deployment.pk,
        dispute_id=event.dispute_id,
        bounty_id=event.bounty_id,
        submission_id=event.submission_id,
        challenger_id=event.challenger,
        reason=event.metadata_uri,
        bond_amount=event.bond_amount,
        status=DisputeStatus.PENDING_HUMAN_REVIEW,
        metadata_uri=event.metadata_uri,
        metadata_hash=event.metadata_hash,
        **_source(event, block_time),
    )
    store.add("dispute", event.dispute_id, dispute)
    submission.status = SubmissionStatus.DISPUTED
    submission.dispute_count += 1
    store.log(MessageType.DISPUTE_CREATED, "dispute", event.dispute_id)
    store.log(MessageType.SUBMISSION_UPDATED, "submission", event.submission_id)


@transition(DisputeResolved, refers=(DISPUTE, SUBMISSION))
def apply_dispute_resolved(store: RecordStore, event: DisputeResolved, block_time: datetime) -> None:
    submission_status = SUBMISSION_STATUS_BY_ENUM.get(event.submission_status)
    if submission_status is None:
        raise InconsistentChain(f"DisputeResolved carries unknown submission status {event.submission_status}")
    store.change("dispute", event.dispute_id).status = DisputeStatus.UPHELD if event.upheld else DisputeStatus.REJECTED
    store.change("submission", event.submission_id).status = submission_status
    store.log(MessageType.DISPUTE_RESOLVED, "dispute", event.dispute_id)
    store.log(MessageType.SUBMISSION_UPDATED, "submission", event.submission_id)


@transition(DisputeCancelled, refers=(DISPUTE, SUBMISSION))
def apply_dispute_cancelled(store: RecordStore, event: DisputeCancelled, block_time: datetime) -> None:
    store.change("dispute", event.dispute_id).status = DisputeStatus.CANCELLED
    store.log(MessageType.DISPUTE_CANCELLED, "dispute", event.dispute_id)


@transition(BountyFinalized, refers=(BOUNTY, SUBMISSION))
def apply_bounty_finalized(store: RecordStore, event: BountyFinalized, block_time: datetime) -> None:
    store.change("bounty", event.bounty_id).status = BountyStatus.RESOLVED
    store.change("submission", event.submission_id).status = SubmissionStatus.ACCEPTED
    store.log(MessageType.BOUNTY_FINALIZED, "bounty", event.bounty_id)
    store.log(MessageType.SUBMISSION_UPDATED, "submission", event.submission_id)


@transition(BountyRefunded, refers=(BOUNTY,))
def apply_bounty_refunded(store: RecordStore, event: BountyRefunded, block_time: datetime) -> None:
    store.change("bounty", event.bounty_id).status = BountyStatus.REFUNDED
    store.log(MessageType.BOUNTY_REFUNDED, "bounty", event.bounty_id)


@transition(SubmissionRefunded, refers=(SUBMISSION,))
def apply_submission_refunded(store: RecordStore, event: SubmissionRefunded, block_time: datetime) -> None:
    store.change("submission", event.submission_id).status = SubmissionStatus.REFUNDED
    store.log(MessageType.SUBMISSION_REFUNDED, "submission", event.submission_id)


if missing := sorted(event.__name__ for event in set(get_args(RecordEvent)) - set(TRANSITIONS)):
    raise ImportError(f"record events without a transition (@transition): {', '.join(missing)}")


def apply_event(store: RecordStore, event: RecordEvent, block_time: datetime, *, undo: bool = True) -> list[UndoEntry]:
    """Applies one decoded event to the store; returns its undo entries (none unless `undo`),
    which restore what it changed, newest last."""
    store.block_number = event.log.block_number
    store.undo = [] if undo else None
    TRANSITIONS[type(event)].apply(store, event, block_time)
    return store.undo or []


def undo_entries(store: RecordStore, entries: list[UndoEntry], block_number: int) -> list[Message]:
    """Reverts the given undo entries (newest first) and returns the corrective messages:
    `<kind>.updated` with each surviving record in its restored state, `<kind>.removed` with the
    last payload of each removed record."""
    removed: dict[tuple[Kind, int], JsonRecord] = {}
    restored: list[tuple[Kind, int]] = []
    for entry in entries:
        kind: Kind = entry["kind"]
        key = int(entry["id"])
        store.load_keys(kind, [key])
        if entry["before"] is None:
            removed[(kind, key)] = store.json(kind, key)
            store.remove(kind, key)
            continue
        record = store.get(kind, key)
        for name, value in entry["before"].items():
            setattr(record, name, value)
        store.touch(kind, key)
        restored.append((kind, key))
    messages: list[Message] = []
    seen: set[tuple[Kind, int]] = set()
    for kind, key in restored:
        if (kind, key) in seen or (kind, key) in removed:
            continue
        seen.add((kind, key))
        messages.append(store.message(BY_NAME[kind].updated, kind, key, block_number))
    messages.extend(Message(BY_NAME[kind].removed, kind, key, block_number, removed=payload)
                    for (kind, key), payload in removed.items())
    return messages
