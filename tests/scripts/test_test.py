"""scripts/test: the suite on a pytest-xdist worker per core, unless the caller chooses (`-n`,
`--numprocesses` or `-p no:xdist`, on the command line or in PYTEST_ADDOPTS). Each test runs the
script on one quick test of this suite, with a database of its own and no Redis, so that the inner
run's workers share nothing with this run's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
QUICK_TEST = "tests/scripts/test_dev.py::test_help_lists_every_option_and_starts_nothing"


def _test(tmp_path: Path, *args: str, addopts: str | None = None) -> str:
    """What `scripts/test <args>` prints; it must pass."""
    env = {name: value for name, value in os.environ.items()
           if name not in {"PYTEST_ADDOPTS", "REDIS_URL"} and not name.startswith("PYTEST_XDIST_")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    if addopts is not None:
        env["PYTEST_ADDOPTS"] = addopts
    result = subprocess.run(["scripts/test", "-p", "no:cacheprovider", *args], cwd=PROJECT_DIR, env=env, text=True,
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_it_runs_a_worker_per_core(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    assert f"created: {cores}/{cores} worker" in _test(tmp_path, QUICK_TEST)


def test_a_worker_count_in_pytest_addopts_is_kept(tmp_path: Path) -> None:
    """PYTEST_ADDOPTS comes before the command line, where a default `-n` would override it."""
    assert "created: 1/1 worker\n" in _test(tmp_path, QUICK_TEST, addopts="-n 1")


def test_without_xdist_it_passes_no_worker_count(tmp_path: Path) -> None:
    """pytest refuses `-n` once xdist is not loaded; the suite itself needs xdist's `worker_id`
    fixture, so the run only collects."""
    assert QUICK_TEST in _test(tmp_path, "-p", "no:xdist", "--collect-only", "-q", QUICK_TEST)
