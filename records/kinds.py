"""The three record kinds, each described once: what the read side, the indexer and the schema
need to know about a bounty, a submission or a dispute beyond its model's fields.

Everything per kind reads its descriptor here: the models' sort indexes (records.models), the
lists' sort keys, totals and fast paths (records.selectors), the filters' parents and the sort
parameter (records.api.filters), the search text (records.search), the chain-order flags
(records.chronology), the body's counter (records.representation), the routes and the schema
(records.api), and the indexer's store, transitions, deferred indexes and proof (indexer.store,
indexer.transitions, indexer.indexes, indexer.index_build, indexer.proof). docs/development.md
shows how to add a sort key or a counter.

This module imports no model (records.models reads it to declare its indexes); `model` finds
the kind's model in the app registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from django.apps import apps

from records.changes import MessageType

if TYPE_CHECKING:
    from records.models import Bounty, Dispute, Submission

Kind = Literal["bounty", "submission", "dispute"]
Resource = Literal["bounties", "submissions", "disputes"]


@dataclass(frozen=True)
class RecordKind:
    name: Kind  # the noun: messages, the indexer's stores, "bounty 7 not found"
    resource: Resource  # the plural: the route, the list's operation IDs
    model_name: str  # in the `records` app
    id_field: str  # the on-chain ID, unique per deployment
    # The sort keys of the list (docs/api.md, Parameters), aliases included: key -> model field.
    sort_keys: Mapping[str, str]
    # Sort fields without an index of their own (long text: a sort by them reads the table).
    unindexed_sort_fields: tuple[str, ...]
    # The values `q` matches, in the order the search text keeps them (records.search). Changing
    # it changes what is stored: a data migration must rewrite `search_text`.
    search_fields: tuple[str, ...]
    parents: tuple[str, ...]  # filters by a parent's ID, meaningful within one deployment
    counter: str | None  # the counter of its children it carries in lists and overviews
    # Fields a transition may change on an existing record; a reorganisation restores exactly these.
    # The indexer's render cache (indexer.store.RecordStore._render) re-renders a record's search
    # text and body only for the status: tests/indexer/test_store.py fails for another one in either.
    mutable_fields: tuple[str, ...]
    created: MessageType  # the change type of a new record, and of its snapshot message
    updated: MessageType  # the change type of a record changed as a side effect, or restored
    removed: MessageType  # the change type of a record whose creating block was orphaned
    # The contract's view functions for the kind: its record count and one record by ID (the
    # proof of a mirror, indexer.proof, and the deferred indexes' size, indexer.index_build).
    count_getter: str
    getter: str

    @cached_property  # read per record by the indexer's store: looked up in the app registry once
    def model(self) -> type[Bounty] | type[Submission] | type[Dispute]:
        model: Any = apps.get_model("records", self.model_name)
        return model  # type: ignore[no-any-return]

    @property
    def total_field(self) -> str:
        """Deployment's count of the kind's records."""
        return f"{self.name}_total"

    @property
    def in_chain_order_field(self) -> str:
        """Deployment's flag: the kind's records' created_at order is their ID order (records.chronology)."""
        return f"{self.name}_in_chain_order"

    @property
    def indexed_sort_fields(self) -> list[str]:
        """The fields that get a sort index (records.models): each sorted-by field once, but the
        ID (its own index) and the long texts."""
        fields = dict.fromkeys(self.sort_keys.values())
        return [field for field in fields if field != self.id_field and field not in self.unindexed_sort_fields]


BOUNTY = RecordKind(
    name="bounty", resource="bounties", model_name="Bounty", id_field="bounty_id",
    sort_keys={
        "id": "bounty_id", "created_at": "created_at", "deadline": "deadline", "reward": "bounty_amount",
        "bounty_amount": "bounty_amount", "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status",
        "poster": "poster", "prompt": "prompt", "submissions": "submission_count",
        "submission_count": "submission_count",
    },
    unindexed_sort_fields=("prompt",),
    search_fields=("bounty_id", "status", "poster", "metadata_uri", "metadata_hash", "tx_hash", "prompt"),
    parents=(),
    counter="submission_count",
    mutable_fields=("status", "submission_count"),
    created=MessageType.BOUNTY_CREATED, updated=MessageType.BOUNTY_UPDATED, removed=MessageType.BOUNTY_REMOVED,
    count_getter="bountyCount", getter="getBounty",
)
SUBMISSION = RecordKind(
    name="submission", resource="submissions", model_name="Submission", id_field="submission_id",
    sort_keys={
        "id": "submission_id", "created_at": "created_at", "submitted": "created_at", "bounty": "bounty_id",
        "bounty_id": "bounty_id", "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status",
        "claimant": "claimant", "content": "content", "review": "review_deadline",
        "review_deadline": "review_deadline", "disputes": "dispute_count", "dispute_count": "dispute_count",
    },
    unindexed_sort_fields=("content",),
    search_fields=("submission_id", "bounty_id", "status", "tile_id", "claimant", "metadata_uri", "metadata_hash",
                   "tx_hash", "content"),
    parents=("bounty_id",),
    counter="dispute_count",
    mutable_fields=("status", "dispute_count"),
    created=MessageType.SUBMISSION_CREATED, updated=MessageType.SUBMISSION_UPDATED,
    removed=MessageType.SUBMISSION_REMOVED,
    count_getter="submissionCount", getter="getSubmission",
)
DISPUTE = RecordKind(
    name="dispute", resource="disputes", model_name="Dispute", id_field="dispute_id",
    sort_keys={
        "id": "dispute_id", "created_at": "created_at", "submitted": "created_at", "bounty": "bounty_id",
        "bounty_id": "bounty_id", "submission": "submission_id", "submission_id": "submission_id",
        "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status", "challenger": "challenger_id",
        "reason": "reason",
    },
    unindexed_sort_fields=("reason",),
    search_fields=("dispute_id", "bounty_id", "submission_id", "status", "challenger_id", "metadata_uri",
                   "metadata_hash", "tx_hash", "reason"),
    parents=("bounty_id", "submission_id"),
    counter=None,
    mutable_fields=("status",),
    created=MessageType.DISPUTE_CREATED, updated=MessageType.DISPUTE_UPDATED, removed=MessageType.DISPUTE_REMOVED,
    count_getter="disputeCount", getter="getDispute",
)

KINDS: tuple[RecordKind, ...] = (BOUNTY, SUBMISSION, DISPUTE)  # parents before children
BY_NAME: dict[Kind, RecordKind] = {kind.name: kind for kind in KINDS}
BY_RESOURCE: dict[Resource, RecordKind] = {kind.resource: kind for kind in KINDS}


def kind_of(record: Any) -> RecordKind:
    """The kind of a record (of a current or a migration's historical model)."""
    return BY_NAME[type(record)._meta.model_name]


_Registered = TypeVar("_Registered")


def registry(table: dict[Kind, Any], what: str) -> Callable[[RecordKind], Callable[[_Registered], _Registered]]:
    """A decorator that registers what each kind has one of (its renderer, its overview, its
    viewset) in `table`, by the kind's name, beside the definition; a second one for a kind fails
    the import."""
    def of(kind: RecordKind) -> Callable[[_Registered], _Registered]:
        def register(item: _Registered) -> _Registered:
            if kind.name in table:
                raise ImportError(f"two {what}s of the {kind.name}: {getattr(table[kind.name], '__name__', '?')} "
                                  f"and {getattr(item, '__name__', '?')}")
            table[kind.name] = item
            return item
        return register
    return of
