"""scripts/audit: a known vulnerability in either lock fails it, naming the package and the
advisory; an advisory source that knows none of the packages (a machine that reaches only a
package mirror, as this one) is said, and does not fail it.

pip-audit's answers are stood in for (a vulnerable package cannot be installed and looked up for
real here); the script runs as it is, in a copy of the project."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent


def _audit(tmp_path: Path, reports: Mapping[str, object]) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(PROJECT_DIR / "scripts" / "audit", root / "scripts" / "audit")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    for lock, report in reports.items():
        (root / lock).write_text("locked\n")
        (root / f"{lock}.report").write_text(json.dumps(report))
    stand_in = root / ".venv" / "bin" / "pip-audit"
    # The lock is the argument after -r; the report stands beside it. Exits 1 on a finding, as pip-audit does.
    stand_in.write_text('#!/bin/bash\nwhile [ "$1" != -r ]; do shift; done\ncat "$2.report"\n'
                        'grep -q \'"vulns": \\[{\' "$2.report" && exit 1\nexit 0\n')
    stand_in.chmod(0o755)
    return subprocess.run(["bash", "scripts/audit"], cwd=root, capture_output=True, text=True, timeout=60)


CLEAN = {"dependencies": [{"name": "django", "version": "5.2.9", "vulns": []}], "fixes": []}
UNKNOWN = {"dependencies": [{"name": "django", "skip_reason": "Dependency not found on PyPI and could not be audited"}]}
VULNERABLE = {"dependencies": [{"name": "django", "version": "5.2.0", "vulns": [
    {"id": "PYSEC-2025-1", "fix_versions": ["5.2.1"], "description": "..."}]}]}


def test_clean_locks_pass_with_their_counts(tmp_path: Path) -> None:
    result = _audit(tmp_path, {"requirements.lock": CLEAN, "requirements-dev.lock": CLEAN})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "audit: requirements.lock: 1 packages audited, 0 vulnerable" in result.stdout


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-dev.lock"])
def test_a_vulnerability_in_either_lock_fails_naming_it(tmp_path: Path, lock: str) -> None:
    result = _audit(tmp_path, {"requirements.lock": CLEAN, "requirements-dev.lock": CLEAN, lock: VULNERABLE})
    assert result.returncode == 1
    assert f"audit: {lock}: django 5.2.0: PYSEC-2025-1 (fixed in 5.2.1)" in result.stdout


def test_an_advisory_source_that_knows_no_package_is_said_and_does_not_fail(tmp_path: Path) -> None:
    result = _audit(tmp_path, {"requirements.lock": UNKNOWN, "requirements-dev.lock": UNKNOWN})
    assert result.returncode == 0
    assert result.stdout.count("not audited") == 2


def test_the_production_lock_holds_no_test_tool_and_the_dev_lock_pins_it_alike() -> None:
    def pins(lock: str) -> dict[str, str]:
        lines = (PROJECT_DIR / lock).read_text().splitlines()
        return dict(line.split(" ")[0].split("==") for line in lines if "==" in line and not line.startswith(" "))

    production, development = pins("requirements.lock"), pins("requirements-dev.lock")
    assert not {"pytest", "playwright", "schemathesis", "mypy", "ruff", "hypothesis", "pip-audit"} & set(production)
    assert {name: development[name] for name in production} == production
    assert {"django", "daphne", "django-axes", "django-otp", "django-csp"} <= set(production)
