"""scripts/lint-migrations, run as scripts/lint runs it: the migrations added since the last
release pass; against the release before indexer 0011 (which dropped a column that release's
indexer still wrote, and crashed it during an upgrade), it fails and names the drop."""

from __future__ import annotations

import subprocess
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
ADDED_0011 = "1533ecfef7718a3c207290151d0375eb3ed83ff1"  # the commit that added indexer 0011


def _lint(*base: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}  # no DATABASE_URL: SQLite's SQL, as on a machine without PostgreSQL
    return subprocess.run(["scripts/lint-migrations", *base], cwd=PROJECT_DIR, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_migrations_since_the_last_release_keep_the_last_release_running() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "not linted" not in result.stdout + result.stderr


def test_a_column_dropped_while_the_previous_release_writes_it_fails_the_lint() -> None:
    result = _lint(f"{ADDED_0011}~1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(indexer, 0011_indexed_block_without_parent)... ERR" in result.stdout
    assert "DROPPING columns (table: indexer_indexedblock, column: parent_hash)" in result.stdout
