"""The TypeScript client's websocket message types (clients/typescript/src/events.ts) are the
server's: `LiveType` names every change type of records.changes.MessageType but `resync` (which
`Message` handles apart), and each member of `LiveEvent` carries the payload of the record kind
its types belong to (records.kinds). A change type added on the server and not in the client, or
the other way round, fails here (docs/development.md, Adding a record event)."""

from __future__ import annotations

import re
from pathlib import Path

from records.changes import MessageType
from records.kinds import KINDS

EVENTS_TS = Path(__file__).resolve().parents[2] / "clients" / "typescript" / "src" / "events.ts"
_QUOTED = re.compile(r'"([a-z_]+\.[a-z_]+)"')


def _declaration(source: str, name: str) -> str:
    """The text of `export type <name> = ...;` (up to the `;` before a blank line)."""
    match = re.search(rf"export type {name} =(.*?);\n\s*\n", source, re.DOTALL)
    assert match, f"events.ts declares no type {name}"
    return match.group(1)


def test_live_type_names_every_change_type_of_the_server() -> None:
    declared = _QUOTED.findall(_declaration(EVENTS_TS.read_text(), "LiveType"))
    assert sorted(declared) == sorted(t.value for t in MessageType if t is not MessageType.RESYNC)


def test_each_live_event_carries_the_payload_of_its_record_kind() -> None:
    members = re.findall(r"\{\s*type:([^;]*);\s*payload: (\w+);", _declaration(EVENTS_TS.read_text(), "LiveEvent"))
    by_payload = {payload: sorted(_QUOTED.findall(types)) for types, payload in members}
    assert by_payload == {
        kind.model_name: sorted(t.value for t in MessageType if t.value.startswith(f"{kind.name}.")) for kind in KINDS}
