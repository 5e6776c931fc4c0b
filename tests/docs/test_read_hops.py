"""docs/development.md, "A read, hop by hop", kept true: both reads run through the service's ASGI
application in a process of their own (tests/docs/read_hops_trace.py); every hop the section
names is a module the read calls, each read has at most 8, and every module the section names is
one of the project's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.factories import make_bounty, make_deployment
from tests.servers import PROJECT_DIR, database_url

pytestmark = pytest.mark.django_db(transaction=True)

MAX_HOPS = 8
SECTION = re.compile(r"^## A read, hop by hop\n(.*?)^## ", re.S | re.M)


def documented() -> dict[str, tuple[list[str], list[str]]]:
    """Each read of the section: its hops' modules, and every module it names."""
    text = SECTION.search((PROJECT_DIR / "docs" / "development.md").read_text())
    assert text is not None, "docs/development.md has no section 'A read, hop by hop'"
    reads: dict[str, tuple[list[str], list[str]]] = {}
    for name, block in (("get", r"\*\*`GET /bounties/7`\*\*"), ("snapshot", r"\*\*A websocket snapshot\*\*")):
        found = re.search(block + r"[^\n]*\n\n(.*?)(?:\n\n|\Z)", text.group(1), re.S)
        assert found is not None, name
        hops = re.findall(r"^\d+\. `([\w/]+\.py)`", found.group(1), re.M)
        named = re.findall(r"`((?:bountysite|records)/[\w/]+\.py)`", found.group(1))
        reads[name] = (hops, named)
    return reads


def test_each_read_passes_every_module_the_guide_names_in_at_most_8_hops() -> None:
    deployment = make_deployment()
    bounty = make_bounty(deployment)
    env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_CHAIN_ID": str(deployment.chain_id),
           "BOUNTY_CONTRACT_ADDRESS": deployment.contract_address}
    env.pop("REDIS_URL", None)  # the in-memory channel layer: one process
    run = subprocess.run([sys.executable, "-m", "tests.docs.read_hops_trace", str(bounty.bounty_id)], cwd=PROJECT_DIR,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    traced = json.loads(run.stdout.strip().splitlines()[-1])
    for name, (hops, named) in documented().items():
        assert 3 <= len(hops) <= MAX_HOPS, (name, hops)
        assert [module for module in named if not (PROJECT_DIR / module).is_file()] == [], name
        assert [hop for hop in hops if hop not in traced[name]] == [], (name, traced[name])
