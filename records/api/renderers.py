"""orjson for DRF's JSON responses (errors, and the browsable API's JSON alternative)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework.renderers import BaseRenderer


class OrjsonRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        """Compact JSON; indented when the browsable API asks for it (for people to read)."""
        if data is None:
            return b""
        indented = bool((renderer_context or {}).get("indent"))
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 if indented else None)
