"""The service's ASGI application with its entries in the shared connection count renewed every
0.25 s and expiring after 2 s (records.limits: 20 s and 60 s), so that test_connection_caps.py
sees a killed process's entries expire, and renewals add back what a flush lost, in seconds."""

from __future__ import annotations

from bountysite.asgi import application
from records import limits as ws_limits

ws_limits.RENEW_SECONDS = 0.25
ws_limits.ENTRY_SECONDS = 2.0

__all__ = ["application"]
