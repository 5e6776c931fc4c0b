"""records.ws.messages: the snapshot's types spelled out for the type checker are the record
kinds' own (records.kinds), in their order."""

from __future__ import annotations

from typing import get_args, get_type_hints

from records.kinds import KINDS
from records.ws.messages import SnapshotCounts, SnapshotType, snapshot_type


def test_a_snapshot_message_is_typed_as_its_kind_is_created() -> None:
    assert list(get_args(SnapshotType)) == [kind.created.value for kind in KINDS]
    assert [snapshot_type(kind) for kind in KINDS] == [kind.created.value for kind in KINDS]


def test_the_snapshot_counts_each_kind_by_its_resource() -> None:
    assert list(get_type_hints(SnapshotCounts)) == [kind.resource for kind in KINDS]
