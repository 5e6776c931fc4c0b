"""The files of deploy/ as an operator installs them: the environment of deploy/bounty.env.example
with only its secrets and addresses filled in, and the command lines of the systemd units."""

from __future__ import annotations

import os
import re
import secrets
import shlex

from contracts.devchain import free_port
from tests.deployment.test_deploy_files import DEPLOY, env_example, settings_source
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import DAPHNE, Server, serve_command

PLACEHOLDER = re.compile(r"<([^<>]+)>")
SYSTEMD_DEFAULT_OPEN_FILES = 1_024  # DefaultLimitNOFILE's soft limit (systemd-system.conf)


def production_environment(*, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The example's settings as a unit reads them (its NAME=value lines and nothing else of this
    process's environment but PATH): the secrets and the addresses of the node, the contract, the
    database and Redis are this test's; a placeholder that stands for a public name (the host
    name, the origin) is that name."""
    secret = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "BOUNTY_RPC_URL": "https://node.invalid/api-key",
              "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
              "BOUNTY_START_BLOCK": "0", "DATABASE_URL": database_url, "REDIS_URL": redis_url}
    active, _ = env_example()
    env = {"PATH": os.environ["PATH"]}
    for name, value in active.items():
        if name in secret:
            env[name] = secret[name]
            continue
        words = shlex.split(value)  # sh reads the file too: its quotes are sh's
        named = PLACEHOLDER.sub(r"\1", words[0]) if words else ""
        assert len(words) <= 1 and not re.search(r"\s", named), f"the test cannot fill {name}={value}"
        env[name] = named
    return {**env, **extra}


def exec_start(unit: str) -> list[str]:
    """The unit's ExecStart= command line, as words."""
    found = re.findall(r"^ExecStart=(.+)$", (DEPLOY / unit).read_text(), re.M)
    assert len(found) == 1, found
    return shlex.split(found[0])


def limit_nofile() -> int:
    """The open files deploy/bounty-web@.service lets a web process have: its LimitNOFILE=, or
    systemd's default soft limit for a service that sets none."""
    limits = re.findall(r"^LimitNOFILE=(\d+)$", (DEPLOY / "bounty-web@.service").read_text(), re.M)
    assert len(limits) <= 1, limits
    return int(limits[0]) if limits else SYSTEMD_DEFAULT_OPEN_FILES


def start_web_unit(env: dict[str, str]) -> Server:
    """A web process as deploy/bounty-web@.service starts it, with its limit on open files (as far
    as this machine's hard limit allows), its instance a free port (8000 may be taken here)."""
    port = free_port()
    command = [DAPHNE, *(word.replace("%i", str(port)) for word in exec_start("bounty-web@.service")[1:])]
    return serve_command(command, port, env, open_files=limit_nofile())


def default_websocket_cap() -> int:
    """BOUNTY_WS_MAX_CONNECTIONS's default in the settings, whatever this process's environment says."""
    found = re.search(r'env_int\("BOUNTY_WS_MAX_CONNECTIONS", ([\d_]+)', settings_source())
    assert found is not None
    return int(found.group(1))
