"""The node and the explorer through the proxy the environment names (HTTPS_PROXY, HTTP_PROXY,
ALL_PROXY, and NO_PROXY's hosts direct), as an operator whose hosts reach the internet only
through an egress proxy sets it: a real forward proxy on loopback in front of anvil."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured

from bountysite.env import env_proxies
from indexer.rpc import RpcClient, proxy_for
from records.models import Bounty
from tests.chain import Chain
from tests.indexer.conftest import post_bounty, process_env
from tests.indexer.test_run_indexer_command import PROJECT_DIR, wait_until

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the proxy itself goes direct


@contextmanager
def forward_proxy() -> Iterator[list[str]]:
    """An HTTP forward proxy on a free loopback port: POSTs in absolute form passed on to their
    target. Yields a list: the proxy's URL, then each URL it forwarded."""
    forwarded: list[str] = []

    class Forward(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            forwarded.append(self.path)
            request = urllib.request.Request(self.path, data=body, headers={"Content-Type": "application/json"})
            with DIRECT.open(request, timeout=10) as answer:
                content = answer.read()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        forwarded.insert(0, f"http://127.0.0.1:{server.server_address[1]}")
        yield forwarded
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("url", "proxies", "expected"), [
    ("https://node.example.org/v2/KEY", {"https": "http://egress:3128"}, "http://egress:3128"),
    ("http://10.0.0.5:8545", {"https": "http://egress:3128"}, None),  # no proxy for plain http
    ("http://10.0.0.5:8545", {"all": "http://egress:3128"}, "http://egress:3128"),
    ("https://node.example.org/", {"https": "http://egress:3128", "no": "example.org"}, None),
    ("https://node.example.org/", {"https": "http://egress:3128", "no": ".example.org"}, None),
    ("https://node.example.org/", {"https": "http://egress:3128", "no": "other.org, *.example.org"}, None),
    ("https://notexample.org/", {"https": "http://egress:3128", "no": "example.org"}, "http://egress:3128"),
    ("http://127.0.0.1:8545", {"http": "http://egress:3128", "no": "127.0.0.0/8"}, None),
    ("http://127.0.0.1:8545", {"http": "http://egress:3128", "no": "127.0.0.1:8545"}, None),
    ("http://[::1]:8545", {"http": "http://egress:3128", "no": "[::1]:8545"}, None),
    ("http://[::1]:8545", {"http": "http://egress:3128", "no": "::1"}, None),
    ("https://node.example.org/", {"https": "http://egress:3128", "no": "*"}, None),
])
def test_it_picks_the_proxy_as_the_environment_says(url: str, proxies: dict[str, str], expected: str | None) -> None:
    assert proxy_for(url, proxies) == expected


def test_a_socks_proxy_is_refused_naming_the_variable_and_not_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://user:secret@egress:1080")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_proxies()
    assert "HTTPS_PROXY must be an http:// or https:// proxy" in str(refused.value)
    assert "secret" not in str(refused.value)


def test_calls_go_through_the_proxy(chain: Chain) -> None:
    with forward_proxy() as forwarded:
        client = RpcClient(chain.deployment.rpc_url, proxy=forwarded[0])
        try:
            assert int(client.call("eth_chainId", []), 16) == chain.deployment.chain_id
        finally:
            client.close()
    assert forwarded[1:] == [chain.deployment.rpc_url.rstrip("/") + "/"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bypassed", [False, True], ids=["through HTTP_PROXY", "NO_PROXY"])
def test_the_indexer_reaches_the_node_through_the_environments_proxy(chain: Chain, bypassed: bool) -> None:
    post_bounty(chain, "ipfs://through-the-proxy")
    with forward_proxy() as forwarded:
        env = process_env(chain, HTTP_PROXY=forwarded[0], NO_PROXY="127.0.0.1" if bypassed else "")
        env.pop("REDIS_URL", None)
        process = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(Bounty.objects.exists)
        finally:
            process.send_signal(signal.SIGTERM)
            _, log = process.communicate(timeout=10)
    assert process.returncode == 0, log
    assert (len(forwarded) > 1) is not bypassed, forwarded[:3]
