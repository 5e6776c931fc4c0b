"""The text `q` searches (docs/api.md, Lists), kept in one column per record.

`q` is a case-insensitive substring match against the record's decimal ID and its parents',
its status, actor addresses, metadata URI and hash, transaction hash, and the route's text
field. Those values are stored lowercased in `search_text`, joined by a separator that cannot
occur in a search term, so one LIKE over one column answers `q`; on PostgreSQL a trigram GIN
index serves it without scanning the table.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import QuerySet, Value
from django.db.models.functions import StrIndex

from records.models import Bounty, Dispute, Submission

SEPARATOR = "\x1f"


def _join(*values: object) -> str:
    seen: list[str] = []
    for value in values:
        text = str(value).lower()
        if text not in seen:
            seen.append(text)
    return SEPARATOR.join(seen)


def search_document(record: Bounty | Submission | Dispute) -> str:
    """The lowercased, separator-joined fields `q` matches for this record."""
    if isinstance(record, Bounty):
        return _join(record.bounty_id, record.status, record.poster, record.metadata_uri, record.metadata_hash,
                     record.tx_hash, record.prompt)
    if isinstance(record, Submission):
        return _join(record.submission_id, record.bounty_id, record.status, record.tile_id, record.claimant,
                     record.metadata_uri, record.metadata_hash, record.tx_hash, record.content)
    return _join(record.dispute_id, record.bounty_id, record.submission_id, record.status, record.challenger_id,
                 record.metadata_uri, record.metadata_hash, record.tx_hash, record.reason)


def search_term(q: str) -> str | None:
    """What to look for in `search_text`, or None when `q` can match nothing (it holds the
    separator, or a NUL, which no stored text holds)."""
    term = q.lower()
    return None if SEPARATOR in term or "\x00" in term else term


def matching(records: QuerySet[Any], term: str) -> QuerySet[Any]:
    """The records whose search text contains `term`.

    PostgreSQL: LIKE, which the trigram GIN index serves. SQLite: instr(), because its LIKE
    refuses patterns over 50,000 bytes and inline metadata makes long search terms legitimate."""
    if connections[records.db].vendor == "sqlite":
        found: QuerySet[Any] = records.annotate(_found_at=StrIndex("search_text", Value(term)))
        return found.filter(_found_at__gt=0)
    return records.filter(search_text__contains=term)
