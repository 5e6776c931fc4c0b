"""The close codes the websocket's server sends (docs/api.md, Limits and close codes), and the
refusal that ends a client's stream with one."""

from __future__ import annotations

POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011
TRY_AGAIN_LATER = 1013


class Refusal(Exception):
    """The stream ends and the server closes the connection with `code` and `reason` (at most 123
    bytes of UTF-8, what a close frame holds)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
