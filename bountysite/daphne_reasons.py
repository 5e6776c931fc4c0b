"""Gives every status the service sends its reason phrase on the status line.

Why this exists: daphne 4.2 sets a response's status with Twisted's `Request.setResponseCode(status)`,
which looks the phrase up in `twisted.web.http.RESPONSES`. That table stops at the statuses of
RFC 2616 and a few more: the rate limit's 429 (docs/api.md, Rate limits) goes out as
`HTTP/1.1 429 Unknown Status`, and so would 422, 428 or 451. An ASGI application cannot pass a
phrase (the `http.response.start` message has none), so the table is completed from Python's
`http.HTTPStatus`, adding only the statuses it lacks. tests/api/test_reason_phrases.py checks
the status line of a real daphne, and fails once Twisted knows 429 itself (then delete this).
"""

from __future__ import annotations

from http import HTTPStatus

from twisted.web import http


def install() -> None:
    """Completes Twisted's table of reason phrases (idempotent)."""
    for status in HTTPStatus:
        http.RESPONSES.setdefault(status.value, status.phrase.encode("ascii"))
