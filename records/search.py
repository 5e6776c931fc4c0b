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

from records.dialect import dialect
from records.kinds import kind_of
from records.models import Bounty, Dispute, Submission

SEPARATOR = "\x1f"


def join_fields(fields: list[str]) -> str:
    """The search text of `search_fields`: each distinct value once, in order."""
    if len(set(fields)) == len(fields):
        return SEPARATOR.join(fields)
    return SEPARATOR.join(dict.fromkeys(fields))


def search_fields(record: Bounty | Submission | Dispute) -> list[str]:
    """The lowercased values `q` matches for this record, in its kind's order (duplicates kept)."""
    return [str(getattr(record, field)).lower() for field in kind_of(record).search_fields]


def search_term(q: str) -> str | None:
    """What to look for in `search_text`, or None when `q` can match nothing (it holds the
    separator, or a NUL, which no stored text holds)."""
    term = q.lower()
    return None if SEPARATOR in term or "\x00" in term else term


def matching(records: QuerySet[Any], term: str) -> QuerySet[Any]:
    """The records whose search text contains `term`: a LIKE where a trigram index serves it,
    instr() elsewhere (records.dialect, `trigram_search`)."""
    if dialect(connections[records.db]).trigram_search:
        return records.filter(search_text__contains=term)
    found: QuerySet[Any] = records.annotate(_found_at=StrIndex("search_text", Value(term)))
    return found.filter(_found_at__gt=0)
