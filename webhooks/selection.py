"""Which changes an endpoint wants: its event types (none chosen: every type), and its optional
bounty and actor filters, matched against the record the change carries."""

from __future__ import annotations

from typing import Any, Protocol


class Filters(Protocol):
    @property
    def event_types(self) -> frozenset[str]: ...
    @property
    def bounty_id(self) -> int | None: ...
    @property
    def actor(self) -> str | None: ...


class Carried(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> Any: ...


# The fields of a record that name its actor: the bounty's poster, the submission's claimant,
# the dispute's challenger (docs/api.md, Records).
ACTOR_FIELDS = ("poster", "claimant", "challenger_id")


def wants(endpoint: Filters, event: Carried) -> bool:
    if endpoint.event_types and event.type not in endpoint.event_types:
        return False
    record = event.payload if isinstance(event.payload, dict) else {}
    if endpoint.bounty_id is not None:
        bounty_id = record.get("id") if event.type.startswith("bounty.") else record.get("bounty_id")
        if bounty_id != endpoint.bounty_id:
            return False
    if endpoint.actor is not None:
        actors = {str(record[name]).lower() for name in ACTOR_FIELDS if record.get(name)}
        if endpoint.actor.lower() not in actors:
            return False
    return True
