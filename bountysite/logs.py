"""LOG_FORMAT=json: every log line one JSON object, for log shippers (docs/operations.md, Logs).

Members: `time` (RFC 3339, UTC), `level`, `logger`, `message`, then whatever the call passed in
`extra` (an access line's `method`, `path`, `route`, `status`, `duration_ms`, `client`), and
`exception` with the traceback when there is one.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

# What every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()
