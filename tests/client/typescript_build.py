"""One build of clients/typescript at a time: `npm test` (tests/client/test_typescript_client.py)
and `npm run bundle` (tests/client/test_typescript_in_a_browser.py) both compile into its dist/,
and pytest-xdist may run them at once; a file half-written by one would break the other."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "bounty-client-typescript-build.lock"


@contextmanager
def exclusive_build() -> Iterator[None]:
    """Holds the build lock (across processes) while inside."""
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
