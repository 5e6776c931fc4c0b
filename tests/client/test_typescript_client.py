"""The TypeScript client's own suite (clients/typescript, Node's test runner), run as part of this
one: its build (`tsc --strict`, browser and Node types apart), the shared vectors, and the read
client and websocket helper against a real service and dev chain that its tests start."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.client.typescript_build import exclusive_build

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def test_the_typescript_client_builds_and_passes_its_tests() -> None:
    # Its service is the embedded default (scripts/dev), whatever database this run uses.
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    with exclusive_build():
        result = subprocess.run(["npm", "test", "--silent"], cwd=CLIENT, env=env, capture_output=True, text=True,
                                timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, _failures(output) or output[-20_000:]
    assert "# fail 0" in output and "# pass " in output, output[-5_000:]
    assert (CLIENT / "dist" / "index.js").is_file() and (CLIENT / "dist" / "index.d.ts").is_file()


def _failures(tap: str) -> str:
    """The failing subtests of Node's TAP output, each with the lines that follow it (its error)."""
    lines = tap.splitlines()
    return "\n\n".join("\n".join(lines[number:number + 40]) for number, line in enumerate(lines)
                       if line.lstrip().startswith("not ok"))
