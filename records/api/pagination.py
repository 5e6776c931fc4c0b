"""The lists' paging as a DRF pagination class (docs/api.md, Lists).

A list answers an unpaged array (streamed) when none of `limit`, `cursor` and `q` is sent, and
`/disputes?bounty_id=` always answers a page. A page object is `{items, total, limit, cursor,
next_cursor}`; the cursor is the offset as a decimal string. Both are lenient: `limit` is
clamped to 1..100 (anything but an integer means 50), and a `cursor` that is not a
non-negative integer reads from offset 0; an offset past every row reads an empty page.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any

import orjson
from django.conf import settings
from django.core.cache import cache
from rest_framework.pagination import BasePagination
from rest_framework.request import Request

from records.api.caching import respond
from records.api.filters import bounded_int, lenient_parameter
from records.history import DataVersion
from records.representation import with_counter
from records.selectors import ListQuery, record_count, record_page

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
PAGING_PARAMS = ("limit", "cursor", "q")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NON_NEGATIVE = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Page:
    offset: int
    limit: int
    cursor: str | None  # as the client sent it (normalized), None when absent or invalid


def parse_limit(raw: str | None) -> int:
    if raw is None or not _INTEGER.fullmatch(raw.strip()):
        return DEFAULT_LIMIT
    return max(1, min(MAX_LIMIT, bounded_int(raw.strip())))


def parse_cursor(raw: str | None) -> tuple[int, str | None]:
    """(offset, the page's `cursor`: the offset as a string, None when absent or invalid).
    An offset past every row (even past what a database integer holds) reads nothing."""
    if raw is None or not _NON_NEGATIVE.fullmatch(raw):
        return 0, None
    return bounded_int(raw), raw.lstrip("0") or "0"


class RecordPagination(BasePagination):
    """Offset cursors over a `ListQuery`; the page's rows are the records' stored bodies.

    `paginate_queryset` decides whether the list is paged and where the page starts, reading
    nothing; `get_paginated_response` answers the page object, read only when the conditional
    cache does not hold it for the data's version (records.api.caching)."""

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        """The page to cut, or None for an unpaged array (when none of limit, cursor and q is sent,
        and none of the view's `always_paged_by` filters)."""
        params = request.query_params
        if not any(name in params for name in (*PAGING_PARAMS, *getattr(view, "always_paged_by", ()))):
            return None
        offset, cursor = parse_cursor(params.get("cursor"))
        self.request, self.view, self.query = request, view, queryset
        return Page(offset=offset, limit=parse_limit(params.get("limit")), cursor=cursor)

    def get_paginated_response(self, data: Page) -> Any:
        """The page object `data` cuts, from the conditional cache (or DRF's browsable API)."""
        answer = ("page", *self.query.identity(), data.offset, data.limit, data.cursor)
        return respond(self.request, answer, self.query.deployments,
                       lambda version: self.page_object(self.query, data, version))

    def page_object(self, query: ListQuery, page: Page, version: DataVersion) -> dict[str, Any]:
        """The page object: the stored bodies (with submission_count / dispute_count where the
        spec has them), the total and the cursors."""
        counter = query.kind.counter
        items = [orjson.Fragment(body if counter is None or count is None else with_counter(body, counter, count))
                 for body, count in record_page(query, page.offset, page.limit)]
        total = self._total(query, version, page, len(items))
        following = page.offset + page.limit
        return {
            "items": items,
            "total": total,
            "limit": page.limit,
            "cursor": page.cursor,
            "next_cursor": str(following) if following < total else None,
        }

    @staticmethod
    def _total(query: ListQuery, version: DataVersion, page: Page, shown: int) -> int:
        """The total, cached per filter and data version: every page and sort of a filter shares
        it. A page that is not full but not past the end tells it without counting."""
        unsorted = replace(query, sort="id", descending=True).identity()  # every order counts the same
        key = "count:" + hashlib.sha256(repr((unsorted, str(version))).encode()).hexdigest()
        total = cache.get(key)
        if total is None:
            total = page.offset + shown if 0 < shown < page.limit or (shown == 0 == page.offset) else \
                record_count(query)
            cache.set(key, total, settings.BOUNTY_API_CACHE_SECONDS)
        return int(total)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            lenient_parameter("limit", f"page size 1 to {MAX_LIMIT} (an integer past either end means that end; "
                              f"not an integer: {DEFAULT_LIMIT}). Asks for a page object.",
                              {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
            {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "offset from a previous page's next_cursor; anything but a non-negative integer "
                            "reads from 0. Asks for a page object."},
        ]
