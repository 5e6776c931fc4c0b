"""One error shape everywhere: `{"detail": "<message>"}`, unknown routes and server errors too."""

from __future__ import annotations

import sys
from typing import Any

import orjson
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.response import Response
from rest_framework.views import exception_handler

from bountysite.statement_timeout import timed_out

# The database cannot be reached (restarting, failing over), or a query ran past the statement
# timeout (bountysite/statement_timeout.py): not a bug of the service, and over in seconds, so
# clients are told to come back (503 with Retry-After) instead of a 500.
DATABASE_UNREACHABLE = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5
DATABASE_UNREACHABLE_DETAIL = "the database cannot be reached; try again shortly"


def unavailable_detail(error: BaseException) -> str:
    """Why a database error makes the answer a 503: a query past the statement timeout, or the
    database out of reach."""
    if timed_out(error):
        return (f"the query took longer than the {settings.BOUNTY_STATEMENT_TIMEOUT_MS} ms the service allows; "
                "try again shortly, or narrow it (filters, a shorter q)")
    return DATABASE_UNREACHABLE_DETAIL


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with every detail flattened to one string; the database out of reach, or a
    query past the statement timeout, is a 503."""
    if isinstance(exc, DATABASE_UNREACHABLE):
        return Response({"detail": unavailable_detail(exc)}, status=503,
                        headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    response = exception_handler(exc, context)
    if response is not None and not (isinstance(response.data, dict) and isinstance(response.data.get("detail"), str)):
        response.data = {"detail": _flatten(response.data)}
    return response


def _flatten(data: Any) -> str:
    if isinstance(data, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in data.items())
    if isinstance(data, list):
        return "; ".join(_flatten(item) for item in data)
    return str(data)


def error_response(detail: str, status: int) -> HttpResponse:
    """The error as DRF's views render theirs (compact JSON, `application/json`), for the answers
    Django gives outside them: unknown routes, server errors, the rate limit."""
    return HttpResponse(orjson.dumps({"detail": detail}), status=status, content_type="application/json")


@csrf_exempt  # a POST to an unknown route is a 404, not CSRF's HTML 403: there is nothing to protect
def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(f"no route {request.path}", 404)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's last resort (handler500), called while the exception is being handled: a
    database out of reach, or a query past the statement timeout, outside the API's views
    (middleware, the admin) is a 503 too."""
    error = sys.exc_info()[1]
    if isinstance(error, DATABASE_UNREACHABLE):
        response = error_response(unavailable_detail(error), 503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return error_response("internal server error", 500)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response("bad request", 400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response("permission denied", 403)
