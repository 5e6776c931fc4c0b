"""Webhooks reach only public addresses (webhooks.addresses): every kind of address inside a
network is refused when an endpoint is saved and again on every connection, by the address the
worker is about to connect to, and no redirect is followed."""

from __future__ import annotations

import asyncio
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from standardwebhooks.webhooks import Webhook

from records.models import Deployment
from tests.history import append_changes, updates
from tests.webhooks.conftest import ReceiverProcess, register, wait_until
from webhooks.addresses import Refused, check_url
from webhooks.delivery import Outcome, Request, Sender
from webhooks.models import DeliveryAttempt, Endpoint

INSIDE = {
    "127.0.0.1": "a loopback address",
    "127.8.9.10": "a loopback address",
    "10.1.2.3": "a private address",
    "172.16.5.4": "a private address",
    "192.168.1.1": "a private address",
    "169.254.169.254": "a link-local address (the cloud metadata service is one)",
    "100.64.0.1": "a carrier-grade NAT address",
    "224.0.0.251": "a multicast address",
    "240.0.0.1": "a reserved address",
    "0.0.0.0": "the unspecified address",
    "[::1]": "a loopback address",
    "[fe80::1]": "a link-local address (the cloud metadata service is one)",
    "[fc00::1]": "a private address",
    "[ff02::1]": "a multicast address",
    "[::]": "the unspecified address",
    "[::ffff:127.0.0.1]": "an IPv4-mapped IPv6 address",
    "[::ffff:8.8.8.8]": "an IPv4-mapped IPv6 address",
}


@pytest.fixture
def no_allowlist(settings: Any) -> None:
    settings.BOUNTY_WEBHOOKS_ALLOWED_NETWORKS = []
    settings.BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP = False


def send(url: str) -> Outcome:
    async def once() -> Outcome:
        sender = Sender()
        try:
            return await sender.send(Request(url, "msg_test", b"{}", ["whsec_" + "A" * 44]))
        finally:
            await sender.close()
    return asyncio.run(once())


@pytest.mark.parametrize(("host", "kind"), INSIDE.items(), ids=INSIDE)
def test_an_address_inside_a_network_is_refused_when_saved_and_when_connected_to(
        host: str, kind: str, no_allowlist: None) -> None:
    with pytest.raises(Refused, match="is " + kind.replace("(", r"\(").replace(")", r"\)")):
        check_url(f"https://{host}/hook")
    outcome = send(f"https://{host}:9/hook")
    assert outcome.status is None
    assert outcome.outcome.startswith("refused: ") and f" is {kind}; " in outcome.outcome, outcome.outcome


def test_an_allowlisted_network_may_be_reached(settings: Any) -> None:
    settings.BOUNTY_WEBHOOKS_ALLOWED_NETWORKS = [__import__("ipaddress").ip_network("10.0.0.0/8")]
    check_url("https://10.1.2.3/hook")
    with pytest.raises(Refused):
        check_url("https://192.168.1.1/hook")


def test_plain_http_is_refused_unless_allowed(settings: Any) -> None:
    settings.BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP = False
    with pytest.raises(Refused, match=r"must be https:// \(BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP=1 allows http://\)"):
        check_url("http://8.8.8.8/hook")
    check_url("https://8.8.8.8/hook")


@pytest.mark.django_db
def test_the_admin_refuses_to_save_an_endpoint_inside_the_network(no_allowlist: None) -> None:
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)
    answer = client.post("/admin/webhooks/endpoint/add/", {"url": "https://169.254.169.254/latest/meta-data",
                                                           "enabled": "on"})
    assert answer.status_code == 200
    assert "169.254.169.254 is a link-local address" in answer.content.decode()
    assert not Endpoint.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_name_public_when_saved_and_loopback_when_delivered_is_refused_at_the_connection(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any, monkeypatch: pytest.MonkeyPatch,
        no_allowlist: None, settings: Any) -> None:
    settings.BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP = True
    url = receiver.url("rebound").replace("127.0.0.1", "localhost")
    real = socket.getaddrinfo
    with monkeypatch.context() as patched:  # the name's answer when staff saved it: a public address
        patched.setattr(socket, "getaddrinfo", lambda host, *a, **k: real("93.184.215.14", *a, **k)
                        if host == "localhost" else real(host, *a, **k))
        check_url(url)
    endpoint = register(url)
    workers(BOUNTY_WEBHOOKS_ALLOWED_NETWORKS="")  # and now it answers 127.0.0.1 (and ::1)
    append_changes(deployment, updates(1))
    attempt = wait_until(lambda: DeliveryAttempt.objects.filter(endpoint=endpoint).first(), what="an attempt")
    assert attempt.status is None
    assert "is a loopback address; webhooks reach public addresses only" in attempt.outcome
    assert receiver.deliveries("rebound") == []


@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed(deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("moved"))
    receiver.behave("moved", status=307, location=receiver.url("elsewhere"))
    workers()
    append_changes(deployment, updates(1))
    attempt = wait_until(lambda: DeliveryAttempt.objects.filter(endpoint=endpoint).first(), what="an attempt")
    assert attempt.status == 307
    assert attempt.outcome == "redirect to 127.0.0.1 not followed: change the endpoint's URL"
    assert receiver.deliveries("elsewhere") == []


@contextmanager
def egress_proxy(receiver: ReceiverProcess) -> Iterator[list[str]]:
    """An HTTP forward proxy on loopback that passes POSTs in absolute form on to the receiver,
    headers and all, whatever host they name (the operator's fence). Yields a list: its URL, then
    each URL it forwarded."""
    forwarded: list[str] = []

    class Forward(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            forwarded.append(self.path)
            target = f"http://127.0.0.1:{receiver.port}{urllib.parse.urlsplit(self.path).path}"
            headers = {name: value for name, value in self.headers.items() if name.lower() != "host"}
            request = urllib.request.Request(target, data=body, headers=headers)
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as answer:
                content, status = answer.read(), answer.status
            self.send_response(status)
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


@pytest.mark.django_db(transaction=True)
def test_through_the_environments_proxy_the_worker_connects_only_to_the_proxy(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    with egress_proxy(receiver) as proxy:
        endpoint = register("http://hooks.example.org/hook/proxied")  # a name only the proxy reaches
        workers(HTTP_PROXY=proxy[0], NO_PROXY="", BOUNTY_WEBHOOKS_ALLOWED_NETWORKS="")  # loopback refused direct
        append_changes(deployment, updates(1))
        [delivery] = wait_until(lambda: receiver.deliveries("proxied"), what="a delivery through the proxy")
        assert proxy[1:] == ["http://hooks.example.org/hook/proxied"]
        assert Webhook(endpoint.secret).verify(delivery["body"], delivery["headers"])["payload"] == {"id": 1}
