"""Logging: every line is written once, by the root's handler, with a timestamp."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.settings.test_settings import PRODUCTION, manage

# The loggers the dev console hears from: the dev server's access log, Django's request log,
# Django's own, the indexer's and the websocket's.
LOGGERS = ("django.channels.server", "django.request", "django.server", "django", "indexer.sync", "records.live")
TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) ")


@pytest.mark.parametrize("debug", ["1", "0"])
def test_each_line_is_written_once_with_a_timestamp(tmp_path: Path, debug: str) -> None:
    emit = "; ".join(f"log = logging.getLogger({name!r}); log.info('line from {name}'); "
                     f"log.warning('warning from {name}')" for name in LOGGERS)
    result = manage("shell", "-c", f"import logging; {emit}", tmp_path=tmp_path, **PRODUCTION, DJANGO_DEBUG=debug)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    for name in LOGGERS:
        for text in (f"line from {name}", f"warning from {name}"):
            written = [line for line in lines if line.endswith(text)]
            assert len(written) == 1, f"{text!r} written {len(written)} times:\n{result.stderr}"
            assert TIMESTAMPED.match(written[0]) and written[0].endswith(f" {name}: {text}"), written[0]
