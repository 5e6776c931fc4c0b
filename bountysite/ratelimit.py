"""HTTP rate limits, the middleware that applies them (the limits themselves, and how a client is
counted, are records.limits'): fixed windows per client, counted in the shared cache.

**The public budget** (BOUNTY_RATE_LIMIT requests per BOUNTY_RATE_WINDOW_SECONDS) counts every
route but `/health`, `/metrics` and the admin, unknown routes included. Each counted response
carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix time when the window
ends); over the limit the answer is 429 with Retry-After.

**The admin** (`/admin/`) is the moderators', not the public's: it never spends the public budget,
so busy API clients behind the moderators' proxy or NAT cannot lock them out of the review queue.
Its two forms that check a password, the login and the password change, have a budget of their
own against password guessing (and the CPU each attempt's password hash costs):
BOUNTY_ADMIN_LOGIN_RATE_LIMIT POSTs per BOUNTY_ADMIN_LOGIN_RATE_WINDOW_SECONDS; over it the
answer is 429 with Retry-After (no X-RateLimit-* headers: those describe the public budget). The
rest of the admin is counted nowhere, on purpose: to anyone but a logged-in staff session every
admin page answers a redirect to the login form (or the form itself), without reading a record,
so an anonymous flood of admin URLs costs no more than one of `/health`; and a logged-in
moderator is never refused. All this is decided by the path, before the session is read, so that
the check costs no query.

The client is the peer address; the X-Forwarded-For chain is believed only as far as it runs
through configured trusted proxies, and an IPv6 client is its /64 (records.limits.request_client).
With Redis configured, every worker process counts against the same budgets; while Redis cannot
be reached, each process counts its own (said once in the log, bountysite/redis_reach.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from records.api.errors import error_response
from records.limits import Spent, admin_login_rate, api_rate, request_client, spend

EXEMPT_PATHS = frozenset({"/health", "/metrics"})
ADMIN = "/admin"  # where bountysite/urls.py mounts the admin
PASSWORD_FORMS = frozenset({"/admin/login/", "/admin/password_change/"})  # the admin's, as its URLs name them


def _too_many(detail: str, spent: Spent) -> HttpResponse:
    """The 429, in the one error shape, with Retry-After."""
    response = error_response(detail, 429)
    response["Retry-After"] = str(spent.retry_after)
    return response


class RateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        path = request.path
        if path == ADMIN or path.startswith(ADMIN + "/"):
            if request.method == "POST" and path in PASSWORD_FORMS and admin_login_rate().limit:
                return self._password_attempt(request)
            return self.get_response(request)
        limit, window = astuple(api_rate())
        if path in EXEMPT_PATHS or not limit:
            return self.get_response(request)
        spent = spend("api", request_client(request), window)
        if spent.count > limit:
            response: HttpResponseBase = _too_many(f"rate limit of {limit} requests per {window} s exceeded", spent)
        else:
            response = self.get_response(request)
        response["X-RateLimit-Limit"] = str(limit)
        response["X-RateLimit-Remaining"] = str(max(0, limit - spent.count))
        response["X-RateLimit-Reset"] = str(spent.reset)
        return response

    def _password_attempt(self, request: HttpRequest) -> HttpResponseBase:
        limit, window = astuple(admin_login_rate())
        spent = spend("admin-login", request_client(request), window)
        if spent.count > limit:
            return _too_many(f"login rate limit of {limit} attempts per {window} s exceeded", spent)
        return self.get_response(request)
