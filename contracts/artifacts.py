"""The committed compiler output of the reference contracts (see contracts/compile.mjs)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, TypedDict

ARTIFACTS_DIR = Path(__file__).resolve().parent / "artifacts"


class Artifact(TypedDict):
    contractName: str
    sourceName: str
    compiler: str
    abi: list[dict[str, Any]]
    bytecode: str
    deployedBytecode: str


@cache
def load_artifact(name: str) -> Artifact:
    """The artifact of contract `name` ("BountyBoard" or "TestUSDC")."""
    with (ARTIFACTS_DIR / f"{name}.json").open(encoding="utf-8") as handle:
        artifact: Artifact = json.load(handle)
    return artifact


def bounty_abi() -> list[dict[str, Any]]:
    return load_artifact("BountyBoard")["abi"]


def usdc_abi() -> list[dict[str, Any]]:
    return load_artifact("TestUSDC")["abi"]
