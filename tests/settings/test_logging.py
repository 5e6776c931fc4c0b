"""Logging: every line is written once, by the root's handler, with a timestamp; LOG_FORMAT=json
makes each line one JSON object."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.settings.test_settings import PRODUCTION, manage

# The loggers the dev console hears from: the service's access log, Django's request log,
# Django's own, the indexer's and the websocket's.
LOGGERS = ("records.access", "django.request", "django.server", "django", "indexer.sync", "records.ws.feed")
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


def test_the_dev_servers_access_lines_give_way_to_the_services_own(tmp_path: Path) -> None:
    emit = "log = logging.getLogger('django.channels.server'); log.info('GET /x 200'); log.warning('a warning')"
    result = manage("shell", "-c", f"import logging; {emit}", tmp_path=tmp_path, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "GET /x 200" not in result.stderr
    assert "a warning" in result.stderr


def test_log_format_json_writes_one_object_per_line_with_the_fields_of_the_call(tmp_path: Path) -> None:
    emit = ("import logging; log = logging.getLogger('records.access'); "
            "log.info('GET /bounties 200', extra={'route': '/bounties', 'status': 200, 'duration_ms': 1.5}); "
            "logging.getLogger('indexer.sync').warning('caf\\u00e9 %s', 'x'); "
            "exec('try:\\n 1/0\\nexcept ZeroDivisionError:\\n logging.getLogger(\\'x\\').exception(\\'failed\\')')")
    result = manage("shell", "-c", emit, tmp_path=tmp_path, **PRODUCTION, LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in result.stderr.splitlines()]  # every line is JSON
    access, warning, failure = entries
    assert access["message"] == "GET /bounties 200" and access["logger"] == "records.access"
    assert (access["level"], access["route"], access["status"], access["duration_ms"]) == ("INFO", "/bounties",
                                                                                           200, 1.5)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", access["time"])
    assert (warning["level"], warning["message"]) == ("WARNING", "caf\u00e9 x")
    assert failure["message"] == "failed" and "ZeroDivisionError" in failure["exception"]
