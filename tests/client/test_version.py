"""The client library's version has one place, bounty_client/_version.py: its distribution
(bounty_client/pyproject.toml) reads it from there, and the README's title says it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from bounty_client import __version__

PACKAGE = Path(__file__).resolve().parents[2] / "bounty_client"


def test_the_distribution_and_the_readme_take_the_version_from_one_place() -> None:
    pyproject = tomllib.loads((PACKAGE / "pyproject.toml").read_text("utf-8"))
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bounty_client._version.__version__"}
    assert (PACKAGE / "README.md").read_text("utf-8").splitlines()[0] == f"# bounty_client {__version__}"
