"""The typed environment readers accept good values and name the variable on bad ones. Each test
sets the variables it reads in the process's environment (monkeypatch restores it)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.core.exceptions import ImproperlyConfigured

from bountysite.env import (
    env_address,
    env_bool,
    env_depth,
    env_endpoint,
    env_int,
    env_list,
    env_origins,
    env_required,
    env_str,
    env_url,
)

Setenv = Callable[..., None]


@pytest.fixture
def setenv(monkeypatch: pytest.MonkeyPatch) -> Setenv:
    """Sets each variable given to its value, or unsets it for None."""
    def set_variables(**values: str | None) -> None:
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
    return set_variables



@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("TRUE", True), ("yes", True), ("On", True),
                                               ("0", False), ("false", False), ("NO", False), ("off", False)])
def test_env_bool_reads_the_usual_spellings(setenv: Setenv, raw: str, expected: bool) -> None:
    setenv(FLAG=raw)
    assert env_bool("FLAG", not expected) is expected


def test_env_bool_rejects_anything_else_naming_the_variable(setenv: Setenv) -> None:
    setenv(FLAG="maybe")
    with pytest.raises(ImproperlyConfigured, match=r"FLAG must be a boolean .* got 'maybe'"):
        env_bool("FLAG", False)


@pytest.mark.parametrize("raw", [None, "", "   "], ids=["unset", "empty", "blank"])
def test_unset_or_blank_means_the_default(setenv: Setenv, raw: str | None) -> None:
    setenv(FLAG=raw)
    assert env_bool("FLAG", True) is True
    assert env_int("FLAG", 7) == 7
    assert env_str("FLAG", "d") == "d"
    assert env_list("FLAG", ["a"]) == ["a"]
    assert env_address("FLAG") is None


@pytest.mark.parametrize(("raw", "kwargs", "expected"), [
    (" 10 ", {"minimum": 0, "maximum": 10}, None),
    ("1.5", {}, r"N must be an integer, got '1\.5'"),
    ("0", {"minimum": 1}, "N must be at least 1, got 0"),
    ("11", {"maximum": 10}, "N must be at most 10, got 11"),
])
def test_env_int_checks_type_and_bounds(setenv: Setenv, raw: str, kwargs: dict[str, int], expected: str | None) -> None:
    setenv(N=raw)
    if expected is None:
        assert env_int("N", None, **kwargs) == 10
        return
    with pytest.raises(ImproperlyConfigured, match=expected):
        env_int("N", None, **kwargs)


def test_env_required_names_the_missing_variable(setenv: Setenv) -> None:
    setenv(DJANGO_SECRET_KEY=None)
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY is required but not set"):
        env_required("DJANGO_SECRET_KEY")


def test_env_address_lowercases_and_validates(setenv: Setenv) -> None:
    mixed = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
    setenv(A=mixed)
    assert env_address("A") == mixed.lower()
    setenv(A="0x1234")
    with pytest.raises(ImproperlyConfigured, match="A must be an address"):
        env_address("A")


def test_env_list_splits_on_commas_and_drops_blanks(setenv: Setenv) -> None:
    setenv(H="a.example, b.example,,")
    assert env_list("H", []) == ["a.example", "b.example"]


def test_env_url_checks_the_scheme(setenv: Setenv) -> None:
    setenv(U="redis://127.0.0.1:6379/0")
    assert env_url("U", None, schemes=("redis",))
    setenv(U="127.0.0.1:6379")
    with pytest.raises(ImproperlyConfigured, match="U must be a URL starting with redis://"):
        env_url("U", None, schemes=("redis",))


@pytest.mark.parametrize("url", ["https://node.example.org/v2/KEY", "http://127.0.0.1:8545", "http://127.8.9.10/rpc",
                                 "http://localhost:8545/KEY", "http://LOCALHOST.", "http://[::1]:8545/v2/KEY"])
def test_env_endpoint_takes_https_and_plain_http_to_this_machine(setenv: Setenv, url: str) -> None:
    setenv(BOUNTY_RPC_URL=url)
    assert env_endpoint("BOUNTY_RPC_URL", allow_plain_http=False) == url


@pytest.mark.parametrize("url", ["http://node.example.org/v2/KEY", "http://user:KEY@10.0.0.5:8545",
                                 "http://[2001:db8::1]/rpc?apikey=KEY", "http://127.0.0.1.nip.io/KEY"])
def test_env_endpoint_refuses_plain_http_to_another_host_without_showing_the_key(setenv: Setenv, url: str) -> None:
    setenv(BOUNTY_RPC_URL=url)
    with pytest.raises(ImproperlyConfigured, match=r"^BOUNTY_RPC_URL must be an https:// URL: http://[^ ]+/\.\.\. is "
                                                   r"plain http .* set BOUNTY_RPC_ALLOW_PLAIN_HTTP=1") as refused:
        env_endpoint("BOUNTY_RPC_URL", allow_plain_http=False)
    assert "KEY" not in str(refused.value)
    assert env_endpoint("BOUNTY_RPC_URL", allow_plain_http=True) == url  # the network between is private


@pytest.mark.parametrize("url", ["node.example.org/v2/KEY", "ws://node.example.org/v2/KEY", "https:///v2/KEY",
                                 "https://node.example.org:port/v2/KEY"])
def test_env_endpoint_refuses_what_is_not_a_node_url_without_showing_the_key(setenv: Setenv, url: str) -> None:
    setenv(BOUNTY_EXPLORER_RPC_URL=url)
    with pytest.raises(ImproperlyConfigured, match=r"^BOUNTY_EXPLORER_RPC_URL must be a URL starting with http:// or "
                                                   r"https:// and naming a host") as refused:
        env_endpoint("BOUNTY_EXPLORER_RPC_URL", allow_plain_http=True)
    assert "KEY" not in str(refused.value)


@pytest.mark.parametrize(("raw", "expected"), [
    (None, ["*"]),
    (" * ", ["*"]),
    ("HTTPS://Front.Example.org, http://127.0.0.1:8080,http://[::1]:3000",
     ["https://front.example.org", "http://127.0.0.1:8080", "http://[::1]:3000"]),
])
def test_env_origins_reads_star_alone_or_origins_as_browsers_send_them(setenv: Setenv, raw: str | None,
                                                                       expected: list[str]) -> None:
    setenv(O=raw)
    assert env_origins("O", ["*"]) == expected


@pytest.mark.parametrize("raw", ["https://front.example.org/", "front.example.org", "https://front.example.org/app",
                                 "https://front.example.org?x=1", "https://user@front.example.org",
                                 "http://127.0.0.1:70000", "http://127.0.0.1:", "null"])
def test_env_origins_rejects_what_is_not_an_origin_naming_the_variable(setenv: Setenv, raw: str) -> None:
    setenv(O=f"https://ok.example.org,{raw}")
    with pytest.raises(ImproperlyConfigured, match=r"O must list origins \(scheme://host\[:port\], no path\), got"):
        env_origins("O", ["*"])


def test_env_origins_refuses_star_among_origins(setenv: Setenv) -> None:
    setenv(O="https://front.example.org, *")
    with pytest.raises(ImproperlyConfigured, match=r"O must be \* alone or a list of origins"):
        env_origins("O", ["*"])


@pytest.mark.parametrize(("raw", "expected"), [(None, 0), ("12", 12), ("safe", "safe"), (" Finalized ", "finalized")])
def test_env_depth_reads_a_number_of_blocks_or_a_block_tag(setenv: Setenv, raw: str | None,
                                                           expected: int | str) -> None:
    setenv(DEPTH=raw)
    assert env_depth("DEPTH", 0, tags=("safe", "finalized"), maximum=100) == expected


@pytest.mark.parametrize(("raw", "message"), [
    ("101", "DEPTH must be at most 100, got 101"),
    ("pending", "DEPTH must be a number of blocks (0 to 100) or one of safe, finalized, got 'pending'"),
])
def test_env_depth_names_the_variable_and_what_it_takes(setenv: Setenv, raw: str, message: str) -> None:
    setenv(DEPTH=raw)
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        env_depth("DEPTH", 0, tags=("safe", "finalized"), maximum=100)
