"""Every HTTP answer counted for the metrics and logged as one access line.

The first middleware, so that it sees every answer: the rate limit's 429s, redirects, errors.
The route is the URL pattern the path matched (`/bounties/<int:record_id>`), so that the metrics
have one series per route, not per path: the admin's pages count as `/admin/`, and paths that
match no route as `unmatched`. The access line goes to the `records.access` logger with the
request's `method`, `path`, `route`, `status`, `duration_ms` and `client` as fields of its own
(LOG_FORMAT=json gives them as members). daphne's own access log is then not needed: the
deploy unit starts it with `-v 0`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, ResolverMatch, resolve

from records.api.errors import not_found
from records.api.ratelimit import client_address
from records.metrics import HTTP_LATENCY, HTTP_REQUESTS

access_log = logging.getLogger("records.access")


def route_of(request: HttpRequest) -> str:
    """The route label of a request: its URL pattern, `/admin/`, or `unmatched`."""
    match: ResolverMatch | None = getattr(request, "resolver_match", None)
    if match is None:  # answered before the view was resolved (a 429, a redirect)
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return "unmatched"
    if match.func is not_found:
        return "unmatched"
    if match.app_name == "admin" or match.route.startswith("admin/"):
        return "/admin/"
    return "/" + match.route


class AccessMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        seconds = time.perf_counter() - started
        route = route_of(request)
        method = request.method or ""
        HTTP_REQUESTS.labels(route, method, str(response.status_code)).inc()
        HTTP_LATENCY.labels(route).observe(seconds)
        duration_ms = round(seconds * 1000, 2)
        access_log.info('%s %s %d %.2f ms', method, request.get_full_path(), response.status_code, duration_ms,
                        extra={"method": method, "path": request.get_full_path(), "route": route,
                               "status": response.status_code, "duration_ms": duration_ms,
                               "client": client_address(request)})
        return response
