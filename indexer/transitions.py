"""Every state transition of the mirrored records, in one place.

A batch of decoded events is applied to a `RecordStore`: the records the batch touches, loaded
in a few queries up front, changed in memory by the `apply_*` functions below, and written
back in bulk. Each application adds the change-log messages it causes to the store (the record
as the API serializes it, right after the change; a bulk backfill keeps none) and returns the
undo entries that restore the previous state if the log's block is orphaned by a
reorganisation (none for blocks too deep for one to reach).

`save` renders each record it writes once, from its final state: the search text and the JSON
body (records.representation) that lists and snapshots send as they are. A message keeps the
record's mutable fields as they were right after its change, and `RecordStore.payload` gives
the rendered body when the record has not changed since, or renders the earlier state: the
batch's records go to the database first, and the database indexes them meanwhile.

Undo entries are JSON: `{"kind": "bounty", "id": 7, "before": null}` removes a record the log
created; `{"kind": ..., "id": ..., "before": {"status": "open", ...}}` restores fields.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from django.db.models import F
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from indexer.bulk import RowStream, convert_rows, insert_rows, update_rows
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
from records.changes import MessageType
from records.kinds import BY_NAME, Kind
from records.kinds import KINDS as RECORD_KINDS
from records.models import (
    Bounty,
    BountyStatus,
    Deployment,
    Dispute,
    DisputeStatus,
    Submission,
    SubmissionStatus,
)
from records.representation import JsonRecord, record_body, record_json
from records.search import join_fields, search_fields

Record = Bounty | Submission | Dispute
UndoEntry = dict[str, Any]
_R = TypeVar("_R", Bounty, Submission, Dispute)

# The contract's SubmissionStatus enum, as DisputeResolved carries it.
SUBMISSION_STATUS_BY_ENUM = {
    0: SubmissionStatus.SUBMITTED,
    1: SubmissionStatus.DISPUTED,
    2: SubmissionStatus.ACCEPTED,
    3: SubmissionStatus.REJECTED,
    4: SubmissionStatus.REFUNDED,
}
logger = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = tuple(kind.name for kind in RECORD_KINDS)  # parents before children
# What `save()` writes back for a changed record: the mutable fields (records.kinds: what undo
# restores) and the search text and body.
_WRITTEN_FIELDS = {kind.name: [*kind.mutable_fields, "search_text", "body"] for kind in RECORD_KINDS}
# What `save()` writes for a new record: every column but the primary key.
_INSERTED_FIELDS: dict[Kind, list[str]] = {
    kind.name: [f.attname for f in kind.model._meta.concrete_fields if not f.primary_key] for kind in RECORD_KINDS
}
_LATEST_DATETIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def chain_time(timestamp: int) -> datetime:
    """A chain timestamp as an aware UTC datetime; beyond year 9999 it is clamped to the last second."""
    try:
        return datetime.fromtimestamp(timestamp, UTC)
    except (OverflowError, ValueError, OSError):
        return _LATEST_DATETIME


@dataclass(slots=True)
class Message:
    """A change-log message about one record; `RecordStore.payload` renders its payload."""

    type: MessageType
    kind: Kind
    key: int
    block_number: int
    state: tuple[Any, ...] = ()  # the record's mutable fields (records.kinds) right after the change
    removed: JsonRecord | None = None  # the last payload of a record that no longer exists


@dataclass
class RecordStore:
    """The records of one deployment that a batch reads and writes."""

    deployment: Deployment
    bounties: dict[int, Bounty] = field(default_factory=dict)
    submissions: dict[int, Submission] = field(default_factory=dict)
    disputes: dict[int, Dispute] = field(default_factory=dict)
    created: set[tuple[Kind, int]] = field(default_factory=set)
    changed: set[tuple[Kind, int]] = field(default_factory=set)
    removed: set[tuple[Kind, int]] = field(default_factory=set)
    # The change-log messages of the applied events, in order; None: none are kept (a bulk backfill).
    messages: list[Message] | None = field(default_factory=list)
    # The event being applied: its block, and its undo entries (None: it needs none).
    block_number: int = 0
    undo: list[UndoEntry] | None = None

    def load(self, events: Iterable[RecordEvent]) -> None:
        """Fetches every existing record the events refer to, one query per kind."""
        wanted: dict[Kind, set[int]] = {"bounty": set(), "submission": set(), "dispute": set()}
        for event in events:
            for kind, key in _references(event):
                wanted[kind].add(key)
        for kind, keys in wanted.items():
            self.load_keys(kind, keys)

    def load_keys(self, kind: Kind, keys: Iterable[int]) -> None:
        model, id_field, table = self._table(kind)
        missing = sorted(k for k in keys if k not in table)
        for start in range(0, len(missing), 900):  # SQLite's bound-parameter limit
            chunk = missing[start : start + 900]
            query = model.objects.filter(deployment=self.deployment, **{f"{id_field}__in": chunk})
            for record in query:
                table[getattr(record, id_field)] = record

    def get(self, kind: Kind, key: int) -> Any:
        table: dict[int, Any] = getattr(self, BY_NAME[kind].resource)
        if key not in table:
            raise InconsistentChain(
                f"{kind} {key} is not in the mirror; is BOUNTY_START_BLOCK after the contract's deployment block?"
            )
        return table[key]

    def add(self, kind: Kind, key: int, record: Record) -> None:
        """A record the current event creates."""
        table = self._table(kind)[2]
        if key in table:
            raise InconsistentChain(f"{kind} {key} is created twice")
        table[key] = record
        self.created.add((kind, key))
        if self.undo is not None:
            self.undo.append({"kind": kind, "id": key, "before": None})

    def change(self, kind: Kind, key: int) -> Any:
        """An existing record the current event changes (after noting its undo entry)."""
        record = self.get(kind, key)
        if self.undo is not None:
            before = {name: getattr(record, name) for name in BY_NAME[kind].mutable_fields}
            self.undo.append({"kind": kind, "id": key, "before": before})
        self.touch(kind, key)
        return record

    def log(self, type_: MessageType, kind: Kind, key: int) -> None:
        """The change-log message of the current event about a record as it is now."""
        if self.messages is not None:
            self.messages.append(self.message(type_, kind, key, self.block_number))

    def touch(self, kind: Kind, key: int) -> None:
        if (kind, key) not in self.created:
            self.changed.add((kind, key))

    def remove(self, kind: Kind, key: int) -> None:
        self.removed.add((kind, key))
        self.changed.discard((kind, key))

    def save(self, stream: RowStream | None = None) -> None:
        """Renders and writes back in bulk (`render`, then `Writes.write`)."""
        self.render().write(stream)

    def render(self) -> Writes:
        """What to write back, with every record it writes rendered: the deployment's record
        totals, removals (children first), changes, and creations (parents first). Reads the
        database only for a record just before the new ones that is not in the store."""
        writes = Writes(self.deployment)
        writes.deltas = {kind: sum(k == kind for k, _ in self.created) - sum(k == kind for k, _ in self.removed)
                         for kind in KINDS}
        for kind in reversed(KINDS):
            model, id_field, table = self._table(kind)
            gone = [key for k, key in self.removed if k == kind]
            if gone:
                writes.removals.append((model, id_field, gone))
                for key in gone:
                    table.pop(key, None)
        for kind in KINDS:
            model, id_field, table = self._table(kind)
            dirty = [key for k, key in sorted(self.changed) if k == kind and key in table]
            # A record whose status is as the database has it, rendered, needs only its counters
            # written: most changes in a backfill are a parent's counter going up.
            rendered = [self._render(kind, key) for key in dirty]
            for names, keys in ((_WRITTEN_FIELDS[kind], [k for k, again in zip(dirty, rendered, strict=True) if again]),
                                (list(BY_NAME[kind].mutable_fields),
                                 [k for k, again in zip(dirty, rendered, strict=True) if not again])):
                if keys:
                    rows = [[self.deployment.pk, key, *(getattr(table[key], name) for name in names)] for key in keys]
                    writes.updates.append((model, ("deployment_id", id_field), names, rows))
        writes.out_of_order = self._out_of_chain_order()
        for kind in KINDS:
            model, _, table = self._table(kind)
            new = [key for k, key in sorted(self.created) if k == kind]
            if not new:
                continue
            columns = _INSERTED_FIELDS[kind]
            rows = []
            for key in new:
                self._render(kind, key)
                rows.append([getattr(table[key], name) for name in columns])
            writes.inserts.append((model, columns, rows))
        return writes

    def _out_of_chain_order(self) -> list[str]:
        """The deployment's `<kind>_in_chain_order` flags to clear, because a kind's new records
        are older than the records before them by ID (records.chronology), which chain order
        rules out; cleared on the deployment object at once, so later batches skip the check."""
        flags = []
        for kind in KINDS:
            flag = BY_NAME[kind].in_chain_order_field
            if not getattr(self.deployment, flag):
                continue
            model, id_field, table = self._table(kind)
            new = sorted(key for k, key in self.created if k == kind)
            if not new:
                continue
            times = [table[key].created_at for key in new]
            before = table.get(new[0] - 1)  # IDs are dense: this is the record before, when the store has it
            previous = before.created_at if before is not None else (
                model.objects.filter(deployment=self.deployment, **{f"{id_field}__lt": new[0]})
                .order_by(f"-{id_field}").values_list("created_at", flat=True).first())
            if previous is not None:
                times.insert(0, previous)
            if any(later < earlier for earlier, later in itertools.pairwise(times)):
                logger.warning("%s %d or a later one is older than the %s before it: the deployment's %ss are no "
                               "longer in chain order, and their deep pages sorted by created_at take the slower "
                               "path", kind, new[0], kind, kind)
                flags.append(flag)
                setattr(self.deployment, flag, False)
        return flags

    def _table(self, kind: Kind) -> tuple[type[Any], str, dict[int, Any]]:
        described = BY_NAME[kind]
        return described.model, described.id_field, getattr(self, described.resource)

    def _render(self, kind: Kind, key: int) -> bool:
        """Renders what the record stores about itself: its search text and its JSON body (which
        the read API and the websocket send as they are); False when they are as last rendered.

        Of the fields a transition changes only the status is in either (the counters are not),
        so a record rendered here before is rendered again only when its status changed, and
        then by putting the new status into its search fields and its body: a backfill changes
        most records after the batch that created them."""
        record = self.get(kind, key)
        rendered: _Rendered | None = record.__dict__.get("_rendered")
        status = record.status
        if rendered is not None:
            if rendered.status == status:
                return False
            fields = list(rendered.fields)
            fields[BY_NAME[kind].search_fields.index("status")] = str(status).lower()
            body = record.body.replace(_status_member(rendered.status), _status_member(status), 1)
        else:
            fields = search_fields(record)
            body = record_body(record, chain_id=self.deployment.chain_id,
                               contract_address=self.deployment.contract_address)
        record.search_text = join_fields(fields)
        record.body = body
        record._rendered = _Rendered(status, fields)
        return True

    def message(self, type_: MessageType, kind: Kind, key: int, block_number: int) -> Message:
        """A message about the record as it is now."""
        record = self.get(kind, key)
        return Message(type_, kind, key, block_number, tuple(getattr(record, f) for f in BY_NAME[kind].mutable_fields))

    def payload(self, message: Message) -> JsonRecord | orjson.Fragment:
        """The message's record as the API serializes it, as it was right after the change: the
        body `save` rendered when the record has not changed since."""
        if message.removed is not None:
            return message.removed
        record = self.get(message.kind, message.key)
        names = BY_NAME[message.kind].mutable_fields
        now = tuple(getattr(record, name) for name in names)
        if now == message.state:
            if (message.kind, message.key) in self.created or (message.kind, message.key) in self.changed:
                return orjson.Fragment(record.body)  # rendered by `save` from this same state
            return self.json(message.kind, message.key)
        for name, value in zip(names, message.state, strict=True):
            setattr(record, name, value)
        try:
            return self.json(message.kind, message.key)
        finally:
            for name, value in zip(names, now, strict=True):
                setattr(record, name, value)

    def json(self, kind: Kind, key: int) -> JsonRecord:
        return record_json(self.get(kind, key), chain_id=self.deployment.chain_id,
                           contract_address=self.deployment.contract_address)


@dataclass(frozen=True, slots=True)
class _Rendered:
    """What `RecordStore._render` rendered a record's search text and body from."""

    status: str
    fields: list[str]


@functools.cache
def _status_member(status: str) -> str:
    """The status as a member of a record's JSON body (no other member or string can hold this
    text: a string's quotes are escaped)."""
    return '"status":' + orjson.dumps(status).decode()


@dataclass
class Writes:
    """A batch's writes to the record tables, rendered: `write` sends them (in the caller's
    transaction), possibly from another thread than the one that rendered them."""

    deployment: Deployment
    deltas: dict[Kind, int] = field(default_factory=dict)
    removals: list[tuple[type[Any], str, list[int]]] = field(default_factory=list)
    updates: list[tuple[type[Any], tuple[str, str], list[str], Sequence[Sequence[Any]]]] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    inserts: list[tuple[type[Any], list[str], Sequence[Sequence[Any]]]] = field(default_factory=list)

    def converted(self) -> Writes:
        """These writes with their rows' values converted for the database ahead (bulk.convert_rows)."""
        return dataclasses.replace(
            self,
            updates=[(model, keys, names, convert_rows(model, [*keys, *names], rows))
                     for model, keys, names, rows in self.updates],
            inserts=[(model, columns, convert_rows(model, columns, rows)) for model, columns, rows in self.inserts],
        )

    def write(self, stream: RowStream | None = None) -> None:
        """Sends the writes; the inserts through `stream` when given."""
        deployment = Deployment.objects.filter(pk=self.deployment.pk)
        if any(self.deltas.values()):
            deployment.update(**{f"{kind}_total": F(f"{kind}_total") + delta
                                 for kind, delta in self.deltas.items() if delta})
        for model, id_field, gone in self.removals:
            model.objects.filter(deployment=self.deployment, **{f"{id_field}__in": gone}).delete()
        for model, keys, names, rows in self.updates:
            update_rows(model, keys, names, rows)
        if self.out_of_order:  # before `stream` owns the connection
            deployment.update(**dict.fromkeys(self.out_of_order, False))
        for model, columns, rows in self.inserts:
            if stream is not None:
                stream.insert(model, columns, rows)
            else:
                insert_rows(model, columns, rows)


def _new(model: type[_R], **values: Any) -> _R:
    """A new record from its field values by attname, the rest at their defaults.

    What `Model.__init__` does for attnames, without its per-field checks and its pre_init and
    post_init signals (no receiver for these models): a quarter of its cost, which is a large
    part of a backfill's in-memory work."""
    listened = (pre_init.receivers or post_init.receivers) and (
        pre_init.has_listeners(model) or post_init.has_listeners(model))
    if listened:
        arguments = [values[f.attname] if f.attname in values else f.get_default() for f in model._meta.concrete_fields]
        construct: Callable[..., _R] = model  # the stubs' plugin reads *args as the primary key
        return construct(*arguments)
    record = model.__new__(model)
    record._state = ModelState()
    fields = record.__dict__
    constants, computed = _defaults(model)
    fields.update(constants)
    fields.update(values)
    for field_ in computed:
        if field_.attname not in values:
            fields[field_.attname] = field_.get_default()
    return record


@functools.cache
def _defaults(model: type[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The model's fields' defaults: those that are constants (immutable, so shared), by attname,
    and the fields whose default is computed per record."""
    constants, computed = {}, []
    for field_ in model._meta.concrete_fields:
        if field_.has_default() and callable(field_.default):
            computed.append(field_)
        else:
            constants[field_.attname] = field_.get_default()
    return constants, computed


def _references(event: RecordEvent) -> list[tuple[Kind, int]]:
    match event:
        case BountyCreated():
            return []
        case SubmissionCreated(bounty_id=bounty_id):
            return [("bounty", bounty_id)]
        case DisputeCreated(submission_id=submission_id):
            return [("submission", submission_id)]
        case DisputeResolved(dispute_id=dispute_id, submission_id=submission_id) | DisputeCancelled(
            dispute_id=dispute_id, submission_id=submission_id
        ):
            return [("dispute", dispute_id), ("submission", submission_id)]
        case BountyFinalized(bounty_id=bounty_id, submission_id=submission_id):
            return [("bounty", bounty_id), ("submission", submission_id)]
        case BountyRefunded(bounty_id=bounty_id):
            return [("bounty", bounty_id)]
        case SubmissionRefunded(submission_id=submission_id):
            return [("submission", submission_id)]


def _source(event: RecordEvent, block_time: datetime) -> dict[str, Any]:
    return {
        "tx_hash": event.log.tx_hash,
        "block_number": event.log.block_number,
        "log_index": event.log.log_index,
        "created_at": block_time,
    }


def apply_bounty_created(store: RecordStore, event: BountyCreated, block_time: datetime) -> None:
    bounty = _new(
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


def apply_submission_created(store: RecordStore, event: SubmissionCreated, block_time: datetime) -> None:
    bounty: Bounty = store.change("bounty", event.bounty_id)
    submission = _new(
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


def apply_dispute_created(store: RecordStore, event: DisputeCreated, block_time: datetime) -> None:
    submission: Submission = store.change("submission", event.submission_id)
    dispute = _new(
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


def apply_dispute_resolved(store: RecordStore, event: DisputeResolved, block_time: datetime) -> None:
    submission_status = SUBMISSION_STATUS_BY_ENUM.get(event.submission_status)
    if submission_status is None:
        raise InconsistentChain(f"DisputeResolved carries unknown submission status {event.submission_status}")
    store.change("dispute", event.dispute_id).status = DisputeStatus.UPHELD if event.upheld else DisputeStatus.REJECTED
    store.change("submission", event.submission_id).status = submission_status
    store.log(MessageType.DISPUTE_RESOLVED, "dispute", event.dispute_id)
    store.log(MessageType.SUBMISSION_UPDATED, "submission", event.submission_id)


def apply_dispute_cancelled(store: RecordStore, event: DisputeCancelled, block_time: datetime) -> None:
    store.change("dispute", event.dispute_id).status = DisputeStatus.CANCELLED
    store.log(MessageType.DISPUTE_CANCELLED, "dispute", event.dispute_id)


def apply_bounty_finalized(store: RecordStore, event: BountyFinalized, block_time: datetime) -> None:
    store.change("bounty", event.bounty_id).status = BountyStatus.RESOLVED
    store.change("submission", event.submission_id).status = SubmissionStatus.ACCEPTED
    store.log(MessageType.BOUNTY_FINALIZED, "bounty", event.bounty_id)
    store.log(MessageType.SUBMISSION_UPDATED, "submission", event.submission_id)


def apply_bounty_refunded(store: RecordStore, event: BountyRefunded, block_time: datetime) -> None:
    store.change("bounty", event.bounty_id).status = BountyStatus.REFUNDED
    store.log(MessageType.BOUNTY_REFUNDED, "bounty", event.bounty_id)


def apply_submission_refunded(store: RecordStore, event: SubmissionRefunded, block_time: datetime) -> None:
    store.change("submission", event.submission_id).status = SubmissionStatus.REFUNDED
    store.log(MessageType.SUBMISSION_REFUNDED, "submission", event.submission_id)


_APPLY: dict[type[Any], Callable[[RecordStore, Any, datetime], None]] = {
    BountyCreated: apply_bounty_created,
    SubmissionCreated: apply_submission_created,
    DisputeCreated: apply_dispute_created,
    DisputeResolved: apply_dispute_resolved,
    DisputeCancelled: apply_dispute_cancelled,
    BountyFinalized: apply_bounty_finalized,
    BountyRefunded: apply_bounty_refunded,
    SubmissionRefunded: apply_submission_refunded,
}


def apply_event(store: RecordStore, event: RecordEvent, block_time: datetime, *, undo: bool = True) -> list[UndoEntry]:
    """Applies one decoded event to the store; returns its undo entries (none unless `undo`),
    which restore what it changed, newest last."""
    store.block_number = event.log.block_number
    store.undo = [] if undo else None
    _APPLY[type(event)](store, event, block_time)
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
