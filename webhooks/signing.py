"""Standard Webhooks signatures (standardwebhooks.com): what lets a receiver trust a delivery.

A secret is `whsec_` and the base64 of 32 random bytes. A delivery's `webhook-signature` is
`v1,` and the base64 HMAC-SHA256, keyed with the secret's bytes, of `<webhook-id>.<webhook-timestamp>.<body>`;
during a rotation's overlap it carries one signature per secret, separated by a space, and a
receiver accepts the delivery when any of them verifies. Receivers verify with the Standard
Webhooks libraries (the Python and TypeScript clients use them: docs/api.md, Webhooks).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,` signature of the delivery with `secret`."""
    key = base64.b64decode(secret.removeprefix(PREFIX))
    mac = hmac.new(key, b"%s.%d.%s" % (webhook_id.encode(), timestamp, body), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def signature_header(secrets_: list[str], webhook_id: str, timestamp: int, body: bytes) -> str:
    """`webhook-signature`: a signature with each secret in use, space-separated."""
    return " ".join(signature(secret, webhook_id, timestamp, body) for secret in secrets_)
