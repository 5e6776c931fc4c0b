"""The systemd units of deploy/ as they ship: `systemd-analyze verify` finds nothing in any of them,
`systemd-analyze security` rates every service OK (2.5 or lower), the web unit's LimitNOFILE fits
the default websocket cap, and `manage.py check --deploy` warns when a process's own limit does not.

systemd-analyze runs on a root of the test's own (--root): the machine's systemd units, deploy/'s
units in etc/systemd/system, and an executable at each path an ExecStart= names, standing for the
project installed in /srv/bounty as docs/operations.md says (verify checks that they exist)."""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from records.checks import descriptors_needed
from tests.deployment.shipped import default_websocket_cap, exec_start, limit_nofile, production_environment
from tests.deployment.test_deploy_files import DEPLOY
from tests.servers import PROJECT_DIR

SERVICES = {"bounty-web@.service": "bounty-web@8000.service", "bounty-indexer@.service": "bounty-indexer@9810.service",
            "bounty-webhooks@.service": "bounty-webhooks@9820.service", "bounty-prune.service": "bounty-prune.service"}
UNITS = {**SERVICES, "bounty-prune.timer": "bounty-prune.timer"}
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def test_deploy_holds_exactly_these_units() -> None:
    shipped = {path.name for path in DEPLOY.iterdir() if path.suffix in (".service", ".timer")}
    assert shipped == set(UNITS)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("systemd-analyze") is None:
        raise RuntimeError("systemd-analyze is not on PATH (apt-get install systemd)")
    root = tmp_path_factory.mktemp("root")
    shutil.copytree(SYSTEM_UNITS, root / SYSTEM_UNITS.relative_to("/"), symlinks=True)
    installed = root / "etc" / "systemd" / "system"
    installed.mkdir(parents=True)
    for unit in UNITS:
        shutil.copy2(DEPLOY / unit, installed / unit)
    for unit in SERVICES:
        binary = root / exec_start(unit)[0].lstrip("/")
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    return root


def analyze(root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemd-analyze", f"--root={root}", *arguments], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("unit", UNITS.values())
def test_systemd_analyze_verify_finds_nothing_in_the_unit(root: Path, unit: str) -> None:
    verified = analyze(root, "verify", unit)
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, "")


@pytest.mark.parametrize("unit", SERVICES.values())
def test_systemd_analyze_security_rates_the_service_ok(root: Path, unit: str) -> None:
    rated = analyze(root, "security", "--offline=true", "--threshold=25", "--no-pager", unit)
    exposure = re.search(rf"Overall exposure level for {re.escape(unit)}: (\d+\.\d)", rated.stdout)
    assert exposure is not None, rated.stdout + rated.stderr
    assert float(exposure.group(1)) <= 2.5, rated.stdout
    assert rated.returncode == 0, rated.stderr  # --threshold=25: above 2.5, systemd-analyze fails too


def test_the_web_units_open_files_fit_the_default_websocket_cap() -> None:
    assert limit_nofile() >= descriptors_needed(default_websocket_cap()) == 21_024


def check_deploy(tmp_path: Path, open_files: int, **extra: str) -> str:
    """`manage.py check --deploy` with the example's settings in a process that may open
    `open_files` files (its soft limit), as a unit's LimitNOFILE sets it."""
    env = production_environment(database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                                 redis_url="redis://127.0.0.1:6379/0", **extra)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    checked = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=PROJECT_DIR, env=env,
                             capture_output=True, text=True, timeout=120,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard)))
    return checked.stdout + checked.stderr


def test_check_deploy_warns_when_the_process_may_open_fewer_files_than_the_websocket_cap_needs(
        tmp_path: Path) -> None:
    output = check_deploy(tmp_path, 1_024)  # systemd's default soft limit
    assert "(bounty.W001) this process may open 1024 files, and BOUNTY_WS_MAX_CONNECTIONS=10000 needs 21024" in output
    assert "LimitNOFILE=" in output
    assert "(bounty.W001)" in check_deploy(tmp_path, 1_223, BOUNTY_WS_MAX_CONNECTIONS="100")
    assert "bounty.W001" not in check_deploy(tmp_path, 1_224, BOUNTY_WS_MAX_CONNECTIONS="100")
