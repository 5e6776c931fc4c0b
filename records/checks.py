"""`manage.py check --deploy`: the process's own limit on open files against the websocket cap.

daphne holds one descriptor per open websocket (measured: 1,000 websockets, 1,000 more descriptors).
A web process needs twice the cap, so that as many HTTP connections and websockets refused over
the cap (each holds its socket until it is closed) fit beside a full house, plus 1,024 of its own:
the database pool, Redis, the listening socket, the files Python opens. Short of that, the process
fails with EMFILE before its cap, and `/health`, the API and the admin fail with it.
deploy/bounty-web@.service's LimitNOFILE gives the default cap that and more.
"""

from __future__ import annotations

import resource
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, register
from django.core.checks import Warning as CheckWarning

DESCRIPTORS_PER_WEBSOCKET = 2
DESCRIPTORS_OF_ITS_OWN = 1_024


def descriptors_needed(max_connections: int) -> int:
    """The open files a web process needs for a websocket cap of `max_connections`."""
    return DESCRIPTORS_PER_WEBSOCKET * max_connections + DESCRIPTORS_OF_ITS_OWN


@register("limits", deploy=True)
def open_files_fit_the_websocket_cap(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = settings.BOUNTY_WS_MAX_CONNECTIONS
    needed = descriptors_needed(cap)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return []
    return [CheckWarning(
        f"this process may open {soft} files, and BOUNTY_WS_MAX_CONNECTIONS={cap} needs {needed} "
        f"({DESCRIPTORS_PER_WEBSOCKET} a websocket + {DESCRIPTORS_OF_ITS_OWN}): the web process would fail "
        "with 'Too many open files' before its websocket cap",
        hint=f"raise the limit to {needed} or more (LimitNOFILE= in the unit, `ulimit -n` in a shell), "
             "or lower BOUNTY_WS_MAX_CONNECTIONS",
        id="bounty.W001")]
