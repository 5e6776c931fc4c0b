"""The admin's sign-in against password guessing spread over many addresses (django-axes).

The per-address login limit (bountysite.ratelimit, records.limits) stops one address guessing; a guesser with
many addresses spends one attempt from each. So a moderator's account locks, whatever the
addresses, after BOUNTY_ADMIN_LOCKOUT_FAILURES wrong passwords in a row, for
BOUNTY_ADMIN_LOCKOUT_MINUTES: its sign-in then answers 429 even to the right password, until the
cool-off ends or an operator runs `manage.py axes_reset_username <name>`. Attempts are counted by
username only (an unknown name locks the same way, so a lock tells nothing of which accounts
exist), in the database, so every web process shares them.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from records.api.errors import error_response
from records.limits import request_address
from records.metrics import ADMIN_SIGN_IN_LOCKED_OUT

logger = logging.getLogger(__name__)


def locked_out(request: HttpRequest, original_response: HttpResponse | None = None,
               credentials: dict[str, Any] | None = None) -> HttpResponse:
    """The answer to a sign-in of a locked account: 429 in the one error shape, with Retry-After
    (the whole cool-off: the lock may have been renewed by this very attempt)."""
    cool_off = math.ceil(settings.AXES_COOLOFF_TIME.total_seconds())
    username = str((credentials or {}).get("username") or request.POST.get("username", ""))[:150]
    ADMIN_SIGN_IN_LOCKED_OUT.inc()
    logger.warning("admin sign-in refused: the account %r is locked after %s failed attempts (from %s); "
                   "it unlocks within %s s, or run manage.py axes_reset_username %s", username,
                   settings.AXES_FAILURE_LIMIT, request_address(request), cool_off, username)
    response = error_response(f"this account is locked after {settings.AXES_FAILURE_LIMIT} failed sign-ins; "
                              f"try again in {cool_off // 60} minutes", 429)
    response["Retry-After"] = str(cool_off)
    return response
