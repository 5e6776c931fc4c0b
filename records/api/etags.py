"""Weak ETags and If-None-Match: what a body's tag is, what a request's tags ask for, and the 304.

ETags are weak and derived from the body's bytes (`W/"<sha256 prefix>@<floor>"`), so equal bodies
have equal tags in every worker process and after restarts; the floor after `@` names the
change-log seq of each deployment the body was read at (`1:57`, several joined by `+`). A request
whose If-None-Match names a floor is read where the data is at least that new (records.reads), so
a client that moves to a process whose replica lags is never answered an older body; tags match
on their body part alone. Unpaged arrays (records.api.unpaged) are tagged by their answer and the
data version they were read at instead (equal for equal data).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags

from records.history import MAX_SEQ, DataVersion

CACHE_CONTROL = "public, no-cache"
# A tag's floor: `<deployment>:<seq>` items joined by `+`. What a request's tags may name is bounded.
_FLOOR_ITEM = re.compile(r"([0-9]{1,18}):([0-9]{1,19})")
MAX_FLOOR_ITEMS = 16


def answer_digest(answer: Hashable, version: DataVersion) -> str:
    """The digest of an answer, as the parsed request that asks for it (the same for equivalent
    requests: parameters in any order, `limit=050` or `50`, a sort alias or its key, a default
    sent or left out), at a data version."""
    return hashlib.sha256(repr((answer, str(version))).encode()).hexdigest()


def etag_of(content: bytes, version: DataVersion) -> str:
    """The tag of a body read at `version`: its bytes' digest and the version's floor."""
    return f'W/"{hashlib.sha256(content).hexdigest()[:32]}{_floor_part(version)}"'


def _floor_part(version: DataVersion) -> str:
    floor = version.floor()
    return "@" + "+".join(f"{deployment}:{seq}" for deployment, seq in sorted(floor.items())) if floor else ""


def _body_part(tag: str) -> str | None:
    """The tag's body digest; None when its floor is not one the service writes."""
    body, at, floor = tag.removeprefix("W/").strip('"').partition("@")
    if at and not all(_FLOOR_ITEM.fullmatch(item) for item in floor.split("+")):
        return None
    return body


def etag_floor(request: HttpRequest) -> dict[int, int]:
    """The newest seq of each deployment that the request's If-None-Match tags name: what the
    answer must be at least as new as (records.replicas). Tags of any other shape name none."""
    header = request.headers.get("If-None-Match")
    floor: dict[int, int] = {}
    if not header:
        return floor
    for tag in parse_etags(header[:4096]):
        for item in tag.removeprefix("W/").strip('"').partition("@")[2].split("+")[:MAX_FLOOR_ITEMS]:
            if (match := _FLOOR_ITEM.fullmatch(item)) and int(match[2]) <= MAX_SEQ:
                deployment, seq = int(match[1]), int(match[2])
                floor[deployment] = max(seq, floor.get(deployment, 0))
        if len(floor) >= MAX_FLOOR_ITEMS:
            break
    return floor


def if_none_match(request: HttpRequest, etag: str) -> bool:
    """Weak comparison of the body parts against If-None-Match, which may list several tags or be `*`."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    body = _body_part(etag)
    return any(tag == "*" or (body is not None and _body_part(tag) == body) for tag in parse_etags(header))


def not_modified(etag: str) -> HttpResponse:
    """A 304: the 200's ETag and caching headers, no Content-Type (Django's class drops it), no body."""
    response = HttpResponseNotModified()
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Accept"  # the same URL serves the browsable API to browsers
    return response


def list_etag(answer: Hashable, version: DataVersion) -> str:
    """An unpaged list's tag: its answer and the data version it was read at (equal for equal
    data), and that version's floor."""
    return f'W/"{answer_digest(answer, version)[:32]}{_floor_part(version)}"'
