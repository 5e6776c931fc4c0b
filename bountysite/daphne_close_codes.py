"""Lets daphne close a websocket with 1008 (policy violation) and the other codes RFC 6455 allows.

Why this exists: the websocket's limits (docs/api.md, Limits and close codes) close with 1008.
daphne 4.2's `WebSocketProtocol.serverClose` passes the application's code to autobahn's `sendClose`, which
accepts only 1000 and 3000-4999: the IANA rules for *registering* new codes, not RFC 6455's
rules for *sending* them (section 7.4.1 defines 1001-1003 and 1007-1011 for endpoints to send;
IANA added 1012-1014). Any other code raises inside daphne's reply handler, the application
instance dies with the exception, and the client sees 1011 (internal error) instead of 1008.

The fix is the smallest one: for a code `sendClose` refuses but an endpoint may send, call
autobahn's `sendCloseFrame` -- the method `sendClose` itself ends in, minus the check -- and keep
`sendClose` for everything else. `install()` runs from `bountysite.asgi`, so `daphne` and
`manage.py runserver` (daphne's) both get it. tests/websocket/test_close_codes.py checks it with a
real client against a real daphne process; delete this module once daphne passes such codes
through (the test then still passes without it).
"""

from __future__ import annotations

from typing import Any

from daphne.ws_protocol import WebSocketProtocol

# RFC 6455 7.4.1 codes an endpoint may send, plus IANA's 1012-1014; 1004-1006 and 1015 never go
# on the wire, and 1010 is for clients only.
SENDABLE_CODES = frozenset({1001, 1002, 1003, 1007, 1008, 1009, 1011, 1012, 1013, 1014})

_original_server_close = WebSocketProtocol.serverClose


def _server_close(self: Any, code: int | None = None) -> None:
    if code in SENDABLE_CODES:
        self.sendCloseFrame(code=code, isReply=False)
    else:
        _original_server_close(self, code=code)


def install() -> None:
    """Patches daphne's WebSocketProtocol (idempotent)."""
    WebSocketProtocol.serverClose = _server_close
