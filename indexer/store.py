"""The unit of work of a batch (`RecordStore`): the records the batch reads and writes, its
change-log messages (`Message`), and the rendering of what it writes, with a cache of what each
record was rendered from.

The records a batch touches are loaded in a few queries up front (`load`), changed in memory by
the transitions (indexer.transitions, through `add` and `change`, which note each change's undo
entry and `log` its message), and rendered into a write plan (`render`, indexer.writes.Writes).
The store is keyed by record kind (records.kinds): a kind's records are `records[kind]`, by their
on-chain ID, and a catch-up carries them between batches (indexer.pipeline.RecordMemory).

`render` renders each record it writes once, from its final state: the search text and the JSON
body (records.representation) that lists and snapshots send as they are. A message keeps the
record's mutable fields as they were right after its change, and `payload` gives the rendered
body when the record has not changed since, or renders the earlier state: the batch's records go
to the database first, and the database indexes them meanwhile.

Undo entries are JSON: `{"kind": "bounty", "id": 7, "before": null}` removes a record the log
created; `{"kind": ..., "id": ..., "before": {"status": "open", ...}}` restores fields.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from indexer.bulk import RowStream
from indexer.errors import InconsistentChain
from indexer.writes import Writes
from records.changes import MessageType
from records.kinds import BY_NAME, Kind
from records.kinds import KINDS as RECORD_KINDS
from records.models import Bounty, Deployment, Dispute, Submission
from records.representation import JsonRecord, record_body, record_json
from records.search import join_fields, search_fields

Record = Bounty | Submission | Dispute
UndoEntry = dict[str, Any]
logger = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = tuple(kind.name for kind in RECORD_KINDS)  # parents before children
# What `render()` writes back for a changed record: the mutable fields (records.kinds: what undo
# restores) and the search text and body.
_WRITTEN_FIELDS = {kind.name: [*kind.mutable_fields, "search_text", "body"] for kind in RECORD_KINDS}
# What `render()` writes for a new record: every column but the primary key.
_INSERTED_FIELDS: dict[Kind, list[str]] = {
    kind.name: [f.attname for f in kind.model._meta.concrete_fields if not f.primary_key] for kind in RECORD_KINDS
}


def record_tables() -> dict[Kind, dict[int, Any]]:
    """An empty table of records, by on-chain ID, for each kind."""
    return {kind: {} for kind in KINDS}


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
    # By kind, then by on-chain ID: those loaded, created or carried from the batches before.
    records: dict[Kind, dict[int, Any]] = field(default_factory=record_tables)
    created: set[tuple[Kind, int]] = field(default_factory=set)
    changed: set[tuple[Kind, int]] = field(default_factory=set)
    removed: set[tuple[Kind, int]] = field(default_factory=set)
    # The change-log messages of the applied events, in order; None: none are kept (a bulk backfill).
    messages: list[Message] | None = field(default_factory=list)
    # The event being applied: its block, and its undo entries (None: it needs none).
    block_number: int = 0
    undo: list[UndoEntry] | None = None

    def load(self, references: Iterable[tuple[Kind, int]]) -> None:
        """Fetches every existing record of these (kind, ID) references (indexer.transitions.references),
        one query per kind."""
        wanted: dict[Kind, set[int]] = {kind: set() for kind in KINDS}
        for kind, key in references:
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
        table = self.records[kind]
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
        """Renders and writes back in bulk (`render`, then indexer.writes.Writes.write)."""
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
        return described.model, described.id_field, self.records[kind]

    def _render(self, kind: Kind, key: int) -> bool:
        """Renders what the record stores about itself: its search text and its JSON body (which
        the read API and the websocket send as they are); False when they are as last rendered.

        Of the fields a transition changes only the status is in either (the counters are not),
        so a record rendered here before is rendered again only when its status changed, and
        then by putting the new status into its search fields and its body: a backfill changes
        most records after the batch that created them. A new mutable field (records.kinds,
        `mutable_fields`) in either must be handled here: tests/indexer/test_store.py fails
        until it is."""
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
