"""The files of deploy/ as an operator installs them: the environment of deploy/bounty.env.example
with only its secrets and addresses filled in, and the command lines of the systemd units."""

from __future__ import annotations

import ctypes
import os
import re
import resource
import secrets
import shlex

from contracts.devchain import free_port
from tests.deployment.test_deploy_files import DEPLOY, env_example, settings_source, unit_command
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import Server, serve_command

PLACEHOLDER = re.compile(r"<([^<>]+)>")
SYSTEMD_DEFAULT_OPEN_FILES = 1_024  # DefaultLimitNOFILE's soft limit (systemd-system.conf)
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1  # linux/prctl.h


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
    limit = unit_directive("bounty-web@.service", "LimitNOFILE")
    return int(limit) if limit is not None else SYSTEMD_DEFAULT_OPEN_FILES


def unit_directive(unit: str, name: str) -> str | None:
    found = re.findall(rf"^{name}=(.*)$", (DEPLOY / unit).read_text(), re.M)
    assert len(found) <= 1, found
    return found[0] if found else None


def start_web_unit(env: dict[str, str]) -> Server:
    """A web process as deploy/bounty-web@.service starts it, its instance a free port (8000 may be
    taken here): with the unit's limit on open files (its soft limit, as far as this machine's
    hard limit allows) and, under MemoryDenyWriteExecute=, with the kernel's own refusal of
    writable and executable memory (PR_SET_MDWE, Linux 6.3), which systemd's filter enforces."""
    port = free_port()
    command = unit_command("bounty-web@.service", str(port), env)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft = limit_nofile() if hard == resource.RLIM_INFINITY else min(limit_nofile(), hard)
    deny_write_execute = unit_directive("bounty-web@.service", "MemoryDenyWriteExecute") == "true"
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def as_the_unit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if deny_write_execute and prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_MDWE needs Linux 6.3 or later")

    return serve_command(command, port, env, as_the_unit)


def default_websocket_cap() -> int:
    """BOUNTY_WS_MAX_CONNECTIONS's default in the settings, whatever this process's environment says."""
    found = re.search(r'env_int\("BOUNTY_WS_MAX_CONNECTIONS", ([\d_]+)', settings_source())
    assert found is not None
    return int(found.group(1))
