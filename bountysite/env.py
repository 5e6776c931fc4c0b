"""Typed readers for environment variables, used only by settings.

Each reader names the variable and what is wrong with it when a value cannot be used, so a
misconfigured process stops at start instead of misbehaving later.
"""

from __future__ import annotations

import os
import re
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from typing import overload
from urllib.parse import urlsplit
from urllib.request import getproxies_environment

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
# An origin as browsers send it in `Origin`: scheme, host name or [IPv6 address], optional port.
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?",
                     re.IGNORECASE)


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str | None = None) -> str | None:
    """The variable's value, stripped; `default` when unset or blank."""
    value = _raw(name)
    return default if value is None else value


def env_choice(name: str, default: str, *, choices: tuple[str, ...]) -> str:
    """One of `choices` (case-insensitive); `default` when unset or blank."""
    value = _raw(name)
    if value is None:
        return default
    if value.lower() not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)} (got {value!r})")
    return value.lower()


def env_required(name: str) -> str:
    """The variable's value; ImproperlyConfigured naming it when unset or blank."""
    value = _raw(name)
    if value is None:
        raise ImproperlyConfigured(f"{name} is required but not set")
    return value


def env_bool(name: str, default: bool) -> bool:
    """1/true/yes/on or 0/false/no/off, any case."""
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {value!r}")


@overload
def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int: ...


@overload
def env_int(name: str, default: None, *, minimum: int | None = None, maximum: int | None = None) -> int | None: ...


def env_int(name: str, default: int | None, *, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
    """A decimal integer within [minimum, maximum]; `default` when unset."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value, 10)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {number}")
    return number


def env_depth(name: str, default: int, *, tags: tuple[str, ...], maximum: int) -> int | str:
    """A number of blocks within [0, maximum], or one of the block `tags` the node understands."""
    value = _raw(name)
    if value is not None and value.strip().lower() in tags:
        return value.strip().lower()
    try:
        return env_int(name, default, minimum=0, maximum=maximum)
    except ImproperlyConfigured as exc:
        if value is not None and not value.strip().lstrip("-").isdigit():
            raise ImproperlyConfigured(
                f"{name} must be a number of blocks (0 to {maximum}) or one of {', '.join(tags)}, got {value!r}"
            ) from None
        raise exc from None


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_origins(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of web origins (`scheme://host[:port]`, no path), lowercased as
    browsers send them; or `*` alone, for any origin, returned as `["*"]`. `default` when unset."""
    origins = env_list(name, default)
    if "*" in origins:
        if origins != ["*"]:
            raise ImproperlyConfigured(f"{name} must be * alone or a list of origins, got {','.join(origins)!r}")
        return origins
    for origin in origins:
        match = _ORIGIN.fullmatch(origin)
        if match is None or int(match.group(1) or 0) > 65_535:
            raise ImproperlyConfigured(f"{name} must list origins (scheme://host[:port], no path), got {origin!r}")
    return [origin.lower() for origin in origins]


def env_networks(name: str, default: list[str] | None = None) -> list[IPv4Network | IPv6Network]:
    """A comma-separated list of IP addresses or CIDR networks; `default` (or none) when unset."""
    networks: list[IPv4Network | IPv6Network] = []
    for item in env_list(name, default or []):
        try:
            networks.append(ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name} must list IP addresses or networks, got {item!r}") from None
    return networks


def env_ip(name: str, default: str) -> str:
    """An IPv4 or IPv6 address (to bind to); `default` when unset."""
    value = _raw(name)
    if value is None:
        return default
    try:
        return str(ip_address(value))
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an IP address, got {value!r}") from None


def env_address(name: str) -> str | None:
    """An EVM address (0x + 40 hex digits, any case), returned lowercase; None when unset."""
    value = _raw(name)
    if value is None:
        return None
    if not _ADDRESS.fullmatch(value):
        raise ImproperlyConfigured(f"{name} must be an address (0x followed by 40 hex digits), got {value!r}")
    return value.lower()


def env_url(name: str, default: str | None = None, *, schemes: tuple[str, ...]) -> str | None:
    """A URL whose scheme is one of `schemes`; `default` when unset."""
    value = _raw(name)
    if value is None:
        return default
    _check_scheme(name, value, schemes)
    return value


def env_urls(name: str, *, schemes: tuple[str, ...]) -> list[str]:
    """A comma-separated list of URLs whose schemes are each one of `schemes`; none when unset."""
    urls = env_list(name, [])
    for url in urls:
        _check_scheme(name, url, schemes)
    return urls


def _check_scheme(name: str, value: str, schemes: tuple[str, ...]) -> None:
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme not in schemes:
        expected = " or ".join(f"{s}://" for s in schemes)
        # Only what comes before `://`: the rest may hold a password.
        got = f"one starting with {scheme}://" if scheme else "no URL"
        raise ImproperlyConfigured(f"{name} must be a URL starting with {expected}, got {got}")


def env_endpoint(name: str, *, allow_plain_http: bool) -> str | None:
    """A JSON-RPC endpoint's URL: https://, or http:// to this machine (a loopback host:
    127.0.0.0/8, ::1, localhost) or wherever `allow_plain_http` (the network between is private);
    None when unset. Over plain http to another host anyone on the path reads the API key and can
    forge the chain's logs. Messages show the scheme and host only: the user part, the path and
    the query may hold the key."""
    value = _raw(name)
    if value is None:
        return None
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    try:
        parts = urlsplit(value)
        host, _ = parts.hostname, parts.port  # a port that is not a number raises
    except ValueError:
        host = None
    shown = f"{scheme}://{host}/..." if host else "a URL"
    if scheme not in ("http", "https") or not host:
        raise ImproperlyConfigured(f"{name} must be a URL starting with http:// or https:// and naming a host "
                                   f"(got {shown if scheme else 'no scheme'})")
    if scheme == "http" and not allow_plain_http and not _is_loopback(host):
        raise ImproperlyConfigured(
            f"{name} must be an https:// URL: {shown} is plain http to a host that is not this machine, where "
            "anyone on the path reads the API key and can forge the chain's logs. Use https, or set "
            "BOUNTY_RPC_ALLOW_PLAIN_HTTP=1 if the network between is private")
    return value


def _is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def env_proxies() -> dict[str, str]:
    """The outbound proxies the environment names, as urllib.request.getproxies_environment()
    reads them (`https_proxy`, `http_proxy`, `all_proxy` and `no_proxy`, either case): only HTTP(S)
    proxies, since the HTTP client here speaks no SOCKS. A message names the variable and the
    scheme, never the URL, which may hold credentials."""
    proxies = getproxies_environment()
    for scheme, url in proxies.items():
        if scheme != "no" and urlsplit(url).scheme not in ("http", "https"):
            raise ImproperlyConfigured(f"{scheme.upper()}_PROXY must be an http:// or https:// proxy (got a "
                                       f"{urlsplit(url).scheme or 'schemeless'} URL)")
    return proxies
