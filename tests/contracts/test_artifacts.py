"""The committed ABI and bytecode are exactly what the pinned solcjs makes of the sources."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from contracts.artifacts import ARTIFACTS_DIR

PROJECT_DIR = ARTIFACTS_DIR.parent.parent


def test_committed_artifacts_equal_a_fresh_compile(tmp_path: Path) -> None:
    subprocess.run(
        ["node", "contracts/compile.mjs", "--out", str(tmp_path)],
        cwd=PROJECT_DIR, check=True, capture_output=True, timeout=120,
    )
    fresh = sorted(p.name for p in tmp_path.glob("*.json"))
    committed = sorted(p.name for p in ARTIFACTS_DIR.glob("*.json"))
    assert fresh == committed == ["BountyBoard.json", "TestUSDC.json"]
    for name in fresh:
        assert (tmp_path / name).read_text() == (ARTIFACTS_DIR / name).read_text(), (
            f"{name} differs from a fresh compile: run `node contracts/compile.mjs` and commit the result"
        )


def test_artifacts_name_the_pinned_compiler() -> None:
    lock = json.loads((PROJECT_DIR / "package-lock.json").read_text())
    solc_version = lock["packages"]["node_modules/solc"]["version"]
    for path in ARTIFACTS_DIR.glob("*.json"):
        assert json.loads(path.read_text())["compiler"].startswith(f"solc {solc_version}+commit.")
