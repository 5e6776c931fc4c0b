"""scripts/setup and Chromium: installed from Debian when missing and possible, else a clear stop.

Each test runs the real script in a copy of the project whose Python and npm packages are
already in place (their stamps match), on a PATH holding only the tools it needs and stand-ins
for `id`, `apt-get` and `chromium`, so nothing is installed on the machine running the tests.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
TOOLS = ("bash", "env", "dirname", "cat", "cut", "sha256sum", "mktemp", "rm")
PACKAGES = "install -y chromium fonts-dejavu-core"
INSTALL = f"apt-get {PACKAGES}"


def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project copy holding scripts/setup, with .venv and both node_modules up to date."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(PROJECT_DIR / "scripts" / "setup", root / "scripts" / "setup")
    (root / "requirements-dev.lock").write_text("locked\n")
    (root / "package-lock.json").write_text("{}\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (root / "node_modules" / ".bin").mkdir(parents=True)
    _stub(root / "node_modules" / ".bin" / "anvil", "exit 0")
    (root / "clients" / "typescript" / "node_modules").mkdir(parents=True)
    (root / "clients" / "typescript" / "package-lock.json").write_text("{}\n")
    for lock, stamp in (("requirements-dev.lock", ".venv/.lock-stamp"),
                        ("package-lock.json", "node_modules/.lock-stamp"),
                        ("clients/typescript/package-lock.json", "clients/typescript/node_modules/.lock-stamp")):
        subprocess.run(["bash", "-c", f"sha256sum {lock} | sha256sum | cut -c1-16 > {stamp}"], cwd=root, check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    _stub(bin_dir / "npm", "exit 0")
    return root


def _setup(project: Path, *, uid: int, apt_get: str | None = None,
           chromium: bool = False) -> subprocess.CompletedProcess[str]:
    bin_dir = project.parent / "bin"
    _stub(bin_dir / "id", f'[ "$1" = -u ] && echo {uid}')
    if apt_get is not None:
        _stub(bin_dir / "apt-get", apt_get)
    if chromium:
        _stub(bin_dir / "chromium", "exit 0")
    env = {"PATH": str(bin_dir), "PYTHON": sys.executable, "APT_LOG": str(project.parent / "apt.log"),
           "CHROMIUM_STUB": str(bin_dir / "chromium")}
    return subprocess.run([str(bin_dir / "bash"), "scripts/setup"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)


# Records its arguments and, on install, puts a `chromium` on PATH as Debian's package does.
APT_GET = """echo "$DEBIAN_FRONTEND $*" >> "$APT_LOG"
if [ "$1" = install ]; then printf '#!/bin/bash\\n' > "$CHROMIUM_STUB"; /bin/chmod +x "$CHROMIUM_STUB"; fi"""


def test_it_is_silent_when_chromium_is_present(project: Path) -> None:
    result = _setup(project, uid=0, apt_get="exit 99", chromium=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_it_installs_debians_chromium_as_root(project: Path) -> None:
    result = _setup(project, uid=0, apt_get=APT_GET)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "setup: installing Chromium from Debian (for the browser tests)\n"
    calls = (project.parent / "apt.log").read_text().splitlines()
    assert [call.strip() for call in calls] == ["update -qq", f"noninteractive {PACKAGES} -qq"]
    assert _setup(project, uid=0, apt_get="exit 99").stdout == ""


def test_it_stops_with_the_command_to_run_when_not_root(project: Path) -> None:
    result = _setup(project, uid=1000, apt_get=APT_GET)
    assert result.returncode == 1
    assert f"sudo apt-get update && sudo {INSTALL}" in result.stderr
    assert not (project.parent / "apt.log").exists()


def test_it_stops_with_the_command_to_run_without_apt_get(project: Path) -> None:
    result = _setup(project, uid=0)
    assert result.returncode == 1
    assert f"sudo apt-get update && sudo {INSTALL}" in result.stderr


def test_a_failed_install_shows_apts_output_and_the_command(project: Path) -> None:
    result = _setup(project, uid=0, apt_get='echo "E: Unable to locate package chromium" >&2; exit 100')
    assert result.returncode == 1
    assert "E: Unable to locate package chromium" in result.stderr
    assert f"run: apt-get update && {INSTALL}" in result.stderr

