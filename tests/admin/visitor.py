"""A browser at one client address, as the admin's tests through real daphne processes drive it."""

from __future__ import annotations

import http.client
import re
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import urlencode

from tests.servers import Server

INDEX = "/admin/"
LOGIN = "/admin/login/"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: str
    set_cookies: SimpleCookie = field(default_factory=SimpleCookie)  # with their attributes


@dataclass
class Visitor:
    """A browser at one client address (sent as X-Forwarded-For through the trusted proxy that
    127.0.0.1 is to the servers), keeping its cookies."""

    server: Server
    address: str
    cookies: dict[str, str] = field(default_factory=dict)

    def send(self, method: str, path: str, form: dict[str, str] | None = None, accept: str = "text/html") -> Reply:
        headers = {"Accept": accept, "X-Forwarded-For": self.address}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        body = urlencode(form).encode() if form is not None else None
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode()
            set_cookies = SimpleCookie()
            for line in response.headers.get_all("Set-Cookie") or []:
                set_cookies.load(line)
            self.cookies.update((name, morsel.value) for name, morsel in set_cookies.items())
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, text, set_cookies)
        finally:
            connection.close()

    def get(self, path: str) -> Reply:
        return self.send("GET", path)

    def log_in(self, password: str) -> Reply:
        """The login form, filled in and sent, as a person does."""
        return self.form(f"{LOGIN}?next={INDEX}", {"username": "mod", "password": password, "next": INDEX})

    def form(self, path: str, fields: dict[str, str]) -> Reply:
        """The form at `path`, filled in with `fields` and sent with its CSRF token."""
        page = self.get(path)
        assert page.status == 200, page.body[:300]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.body)
        assert token is not None, page.body[:300]
        return self.send("POST", path, {"csrfmiddlewaretoken": token.group(1), **fields})
