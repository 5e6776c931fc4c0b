"""The typed environment readers accept good values and name the variable on bad ones."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from bountysite.env import (
    env_address,
    env_bool,
    env_depth,
    env_int,
    env_list,
    env_origins,
    env_required,
    env_str,
    env_url,
)


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("TRUE", True), ("yes", True), ("On", True),
                                               ("0", False), ("false", False), ("NO", False), ("off", False)])
def test_env_bool_reads_the_usual_spellings(raw: str, expected: bool) -> None:
    assert env_bool("FLAG", not expected, environ={"FLAG": raw}) is expected


def test_env_bool_rejects_anything_else_naming_the_variable() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"FLAG must be a boolean .* got 'maybe'"):
        env_bool("FLAG", False, environ={"FLAG": "maybe"})


@pytest.mark.parametrize("environ", [{}, {"FLAG": ""}, {"FLAG": "   "}])
def test_unset_or_blank_means_the_default(environ: dict[str, str]) -> None:
    assert env_bool("FLAG", True, environ=environ) is True
    assert env_int("FLAG", 7, environ=environ) == 7
    assert env_str("FLAG", "d", environ=environ) == "d"
    assert env_list("FLAG", ["a"], environ=environ) == ["a"]
    assert env_address("FLAG", environ=environ) is None


def test_env_int_checks_type_and_bounds() -> None:
    assert env_int("N", None, minimum=0, maximum=10, environ={"N": " 10 "}) == 10
    with pytest.raises(ImproperlyConfigured, match=r"N must be an integer, got '1\.5'"):
        env_int("N", None, environ={"N": "1.5"})
    with pytest.raises(ImproperlyConfigured, match="N must be at least 1, got 0"):
        env_int("N", None, minimum=1, environ={"N": "0"})
    with pytest.raises(ImproperlyConfigured, match="N must be at most 10, got 11"):
        env_int("N", None, maximum=10, environ={"N": "11"})


def test_env_required_names_the_missing_variable() -> None:
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY is required but not set"):
        env_required("DJANGO_SECRET_KEY", environ={})


def test_env_address_lowercases_and_validates() -> None:
    mixed = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
    assert env_address("A", environ={"A": mixed}) == mixed.lower()
    with pytest.raises(ImproperlyConfigured, match="A must be an address"):
        env_address("A", environ={"A": "0x1234"})


def test_env_list_splits_on_commas_and_drops_blanks() -> None:
    assert env_list("H", [], environ={"H": "a.example, b.example,,"}) == ["a.example", "b.example"]


def test_env_url_checks_the_scheme() -> None:
    assert env_url("U", None, schemes=("redis",), environ={"U": "redis://127.0.0.1:6379/0"})
    with pytest.raises(ImproperlyConfigured, match="U must be a URL starting with redis://"):
        env_url("U", None, schemes=("redis",), environ={"U": "127.0.0.1:6379"})


def test_env_origins_reads_star_alone_or_origins_as_browsers_send_them() -> None:
    assert env_origins("O", ["*"], environ={}) == ["*"]
    assert env_origins("O", ["*"], environ={"O": " * "}) == ["*"]
    raw = "HTTPS://Front.Example.org, http://127.0.0.1:8080,http://[::1]:3000"
    assert env_origins("O", ["*"], environ={"O": raw}) == [
        "https://front.example.org", "http://127.0.0.1:8080", "http://[::1]:3000"]


@pytest.mark.parametrize("raw", ["https://front.example.org/", "front.example.org", "https://front.example.org/app",
                                 "https://front.example.org?x=1", "https://user@front.example.org",
                                 "http://127.0.0.1:70000", "http://127.0.0.1:", "null"])
def test_env_origins_rejects_what_is_not_an_origin_naming_the_variable(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"O must list origins \(scheme://host\[:port\], no path\), got"):
        env_origins("O", ["*"], environ={"O": f"https://ok.example.org,{raw}"})


def test_env_origins_refuses_star_among_origins() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"O must be \* alone or a list of origins"):
        env_origins("O", ["*"], environ={"O": "https://front.example.org, *"})


@pytest.mark.parametrize(("raw", "expected"), [(None, 0), ("12", 12), ("safe", "safe"), (" Finalized ", "finalized")])
def test_env_depth_reads_a_number_of_blocks_or_a_block_tag(raw: str | None, expected: int | str) -> None:
    environ = {} if raw is None else {"DEPTH": raw}
    assert env_depth("DEPTH", 0, tags=("safe", "finalized"), maximum=100, environ=environ) == expected


@pytest.mark.parametrize(("raw", "message"), [
    ("101", "DEPTH must be at most 100, got 101"),
    ("pending", "DEPTH must be a number of blocks (0 to 100) or one of safe, finalized, got 'pending'"),
])
def test_env_depth_names_the_variable_and_what_it_takes(raw: str, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        env_depth("DEPTH", 0, tags=("safe", "finalized"), maximum=100, environ={"DEPTH": raw})
