"""Settings come from the environment only, fail loudly, and are production-safe by default."""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from records.checks import DESCRIPTORS_OF_ITS_OWN, DESCRIPTORS_PER_WEBSOCKET
from tests.deployment.shipped import default_websocket_cap, limit_nofile

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
PRODUCTION = {
    "DJANGO_SECRET_KEY": "prod-secret-9f8e7d6c5b4a39281706f5e4d3c2b1a0-zyxwvutsrqponmlkjihgfedcba",
    "DJANGO_ALLOWED_HOSTS": "bounties.example.org",
    "BOUNTY_CONTRACT_ADDRESS": "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    "BOUNTY_USDC_ADDRESS": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
}
CONFIG_VARIABLES = (
    "DJANGO_DEBUG", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "DJANGO_SECURE_SSL_REDIRECT", "DATABASE_URL",
    "REDIS_URL", "BOUNTY_CHAIN_ID", "BOUNTY_CONTRACT_ADDRESS", "BOUNTY_USDC_ADDRESS", "BOUNTY_RPC_URL",
    "BOUNTY_START_BLOCK", "BOUNTY_CONFIRMATIONS", "LOG_LEVEL", "LOG_FORMAT", "BOUNTY_INDEXER_METRICS_PORT",
)


def manage(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs manage.py in a clean environment holding only `env` (and a throwaway SQLite file)."""
    environ = {k: v for k, v in os.environ.items() if k not in CONFIG_VARIABLES}
    environ["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    environ.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT_DIR, env=environ,
        capture_output=True, text=True, timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    # check --deploy holds the process's limit on open files against the websocket cap: the web
    # unit's LimitNOFILE as far as this machine's hard limit allows (a container's may be lower;
    # tests/deployment/test_units.py holds the unit's), with a cap that fits it. manage.py inherits
    # this process's limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_files = min(limit_nofile(), hard)
    cap = min(default_websocket_cap(), (open_files - DESCRIPTORS_OF_ITS_OWN) // DESCRIPTORS_PER_WEBSOCKET)
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))
    try:
        result = manage("check", "--deploy", "--fail-level", "WARNING", tmp_path=tmp_path,
                        BOUNTY_WS_MAX_CONNECTIONS=str(cap), **PRODUCTION)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result.returncode == 0, result.stderr
    # One silenced on purpose: django-axes' advice to lock by address too (bountysite/settings.py says why).
    assert "System check identified no issues (1 silenced)." in result.stdout


def test_migrations_are_up_to_date(tmp_path: Path) -> None:
    result = manage("makemigrations", "--check", "--dry-run", tmp_path=tmp_path, **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr


def test_debug_is_off_and_a_secret_key_is_required_by_default(tmp_path: Path) -> None:
    result = manage("check", tmp_path=tmp_path)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is required but not set" in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_ALLOWED_HOSTS": ""}, "DJANGO_ALLOWED_HOSTS is required when DJANGO_DEBUG is off"),
        ({"DJANGO_SECRET_KEY": "short"}, "DJANGO_SECRET_KEY must be at least 50 characters"),
        ({"DJANGO_DEBUG": "sometimes"}, "DJANGO_DEBUG must be a boolean"),
        ({"BOUNTY_CHAIN_ID": "mainnet"}, "BOUNTY_CHAIN_ID must be an integer, got 'mainnet'"),
        ({"BOUNTY_CONTRACT_ADDRESS": "0xabc"}, "BOUNTY_CONTRACT_ADDRESS must be an address"),
        ({"BOUNTY_CONFIRMATIONS": "-1"}, "BOUNTY_CONFIRMATIONS must be at least 0, got -1"),
        ({"BOUNTY_CONFIRMATIONS": "latest"},
         "BOUNTY_CONFIRMATIONS must be a number of blocks (0 to 10000) or one of safe, finalized, got 'latest'"),
        ({"DATABASE_URL": "mysql://db/bounty"}, "DATABASE_URL must be a URL starting with sqlite:// or postgres://"),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL must be a URL starting with redis://"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT must be one of plain, json (got 'xml')"),
        ({"BOUNTY_INDEXER_METRICS_PORT": "70000"}, "BOUNTY_INDEXER_METRICS_PORT must be at most 65535"),
        ({"BOUNTY_INDEXER_METRICS_ADDRESS": "localhost"}, "BOUNTY_INDEXER_METRICS_ADDRESS must be an IP address"),
        ({"BOUNTY_METRICS_ALLOWED": "10.0.0.0/8, prometheus"}, "BOUNTY_METRICS_ALLOWED must list IP addresses"),
        ({"BOUNTY_RPC_TIMEOUT_SECONDS": "0"}, "BOUNTY_RPC_TIMEOUT_SECONDS must be at least 1, got 0"),
        ({"BOUNTY_HTTP_STALL_SECONDS": "0"}, "BOUNTY_HTTP_STALL_SECONDS must be at least 1, got 0"),
        ({"BOUNTY_HTTP_MAX_STREAMS": "0"}, "BOUNTY_HTTP_MAX_STREAMS must be at least 1, got 0"),
        ({"BOUNTY_INDEXER_MAX_WAIT_MS": "500"}, "BOUNTY_INDEXER_MAX_WAIT_MS must be at least 1000, got 500"),
        ({"BOUNTY_INDEXER_POLL_MS": "20000", "BOUNTY_INDEXER_MAX_WAIT_MS": "10000"},
         "BOUNTY_INDEXER_MAX_WAIT_MS (10000) must be at least BOUNTY_INDEXER_POLL_MS (20000)"),
        ({"DATABASE_URL": "postgres://bounty@db.invalid/bounty", "DATABASE_POOL_MAX": "8"},
         "DATABASE_POOL_MAX (8) must be at least BOUNTY_WS_SNAPSHOT_READERS (4) + 1 for the websocket feed "
         "+ BOUNTY_HTTP_MAX_STREAMS (4) + 1 for every other request (10)"),
        ({"DATABASE_URL": "postgres://bounty@db.invalid/bounty", "BOUNTY_HTTP_MAX_STREAMS": "6"},
         "+ BOUNTY_HTTP_MAX_STREAMS (6) + 1 for every other request (12)"),
        ({"DATABASE_URL": "postgres://bounty@db.invalid/bounty", "BOUNTY_WS_SNAPSHOT_READERS": "8"},
         "DATABASE_POOL_MAX (10) must be at least BOUNTY_WS_SNAPSHOT_READERS (8)"),
        ({"BOUNTY_RPC_URL": "http://node.example.org/v2/key"},
         "BOUNTY_RPC_URL must be an https:// URL: http://node.example.org/... is plain http"),
        ({"BOUNTY_EXPLORER_RPC_URL": "http://explorer.example.org/api/eth-rpc"},
         "BOUNTY_EXPLORER_RPC_URL must be an https:// URL: http://explorer.example.org/... is plain http"),
        ({"BOUNTY_RPC_MAX_RESPONSE_BYTES": "1000"}, "BOUNTY_RPC_MAX_RESPONSE_BYTES must be at least 65536, got 1000"),
        ({"BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS": "0"}, "BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS must be at least 1, got 0"),
        ({"DATABASE_REPLICA_URLS": "postgres://bounty:secret@replica.invalid/bounty"},
         "DATABASE_REPLICA_URLS names PostgreSQL replicas, but DATABASE_URL is SQLite"),
        ({"DATABASE_URL": "postgres://bounty@db.invalid/bounty",
          "DATABASE_REPLICA_URLS": "postgres://bounty@replica.invalid/bounty, mysql://bounty:secret@r2.invalid/b"},
         "DATABASE_REPLICA_URLS must be a URL starting with postgres:// or postgresql://, got one starting with mysql://"),
        ({"DATABASE_URL": "postgres://bounty@db.invalid/bounty", "BOUNTY_REPLICA_WAIT_MS": "-1"},
         "BOUNTY_REPLICA_WAIT_MS must be at least 0, got -1"),
    ],
)
def test_a_bad_value_stops_the_process_naming_the_variable(tmp_path: Path, env: dict[str, str], message: str) -> None:
    result = manage("check", tmp_path=tmp_path, **{**PRODUCTION, **env})
    assert result.returncode != 0
    assert message in result.stderr


def test_a_node_on_a_private_network_may_be_plain_http_when_the_setting_says_so(tmp_path: Path) -> None:
    result = manage("check", tmp_path=tmp_path, **PRODUCTION, BOUNTY_RPC_URL="http://10.0.0.5:8545/v2/key",
                    BOUNTY_EXPLORER_RPC_URL="http://10.0.0.6/api/eth-rpc", BOUNTY_RPC_ALLOW_PLAIN_HTTP="1")
    assert result.returncode == 0, result.stderr


def test_debug_mode_runs_with_nothing_else_configured(tmp_path: Path) -> None:
    result = manage("check", tmp_path=tmp_path, DJANGO_DEBUG="1")
    assert result.returncode == 0, result.stderr


def test_the_embedded_default_database_is_sqlite_under_var() -> None:
    environ = {k: v for k, v in os.environ.items() if k not in CONFIG_VARIABLES}
    environ["DJANGO_DEBUG"] = "1"
    code = (
        "import django; from django.conf import settings; django.setup(); "
        "db = settings.DATABASES['default']; print(db['ENGINE'], db['NAME'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60,
        env={**environ, "DJANGO_SETTINGS_MODULE": "bountysite.settings"},
    )
    assert result.stdout.split() == ["django.db.backends.sqlite3", str(PROJECT_DIR / "var" / "db.sqlite3")]


def test_a_new_sqlite_database_has_8_kib_pages_and_a_write_ahead_log(tmp_path: Path) -> None:
    result = manage("migrate", "--noinput", tmp_path=tmp_path, DJANGO_DEBUG="1")
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(tmp_path / "db.sqlite3") as database:
        assert database.execute("PRAGMA page_size").fetchone() == (8192,)
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("name", ["DATABASE_URL", "DATABASE_REPLICA_URLS"])
def test_a_database_url_of_the_wrong_kind_is_refused_without_printing_its_password(tmp_path: Path, name: str) -> None:
    env = {"DATABASE_URL": "postgres://bounty@db.invalid/bounty", name: "mysql://bounty:hunter2@db.invalid/bounty"}
    result = manage("check", tmp_path=tmp_path, **{**PRODUCTION, **env})
    assert result.returncode != 0
    assert f"{name} must be a URL starting with" in result.stderr
    assert "hunter2" not in result.stderr
