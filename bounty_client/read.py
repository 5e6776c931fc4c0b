"""The read client: the service's HTTP routes, qualified with the deployment by default."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, Literal, Self, cast

import httpx

from bounty_client._version import __version__
from bounty_client.deployment import Deployment, deployment_from_health
from bounty_client.errors import RequestFailedError, ResponseError, ValidationError
from bounty_client.schema import (
    BountyOverview,
    BountyRecord,
    DisputeOverview,
    DisputeRecord,
    Health,
    Page,
    SubmissionOverview,
    SubmissionRecord,
)
from bounty_client.validation import Uint, validate_address, validate_uint

Direction = Literal["asc", "desc"]

DEFAULT_TIMEOUT = 10.0
MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 50


class ReadClient:
    """A client of the read service at `base_url` (for example `"https://bounties.example"`).

    Every request except `/health` is qualified with `chain_id` and `contract_address`: the
    values given here, or else those of the active deployment, read once from `/health` on
    first use. With `qualify=False` no deployment is sent, so lists span every indexed
    deployment and single-record routes use the service's active deployment.

    `timeout` (seconds, or an `httpx.Timeout`) applies to each request. A non-OK response
    raises `RequestFailedError` (`request failed: <status>`, with the `status`, the service's
    `detail` and the `url` as attributes), a body of the wrong shape `ResponseError`, a `/health`
    that names no usable deployment `ConfigurationError`; a network failure or timeout raises the
    underlying `httpx.HTTPError`. The TypeScript client follows the same rules (both are held to
    the `read` vectors of clients/test-vectors.json). Use the client as a context manager, or
    call `close()`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        chain_id: Uint | None = None,
        contract_address: str | None = None,
        qualify: bool = True,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        """A client of `base_url`; see the class documentation for the options."""
        if (chain_id is None) != (contract_address is None):
            raise ValidationError("give both chain_id and contract_address, or neither")
        self.base_url = base_url.rstrip("/")
        self._qualifier: dict[str, str] | None = None
        if chain_id is not None and contract_address is not None:
            self._qualifier = {
                "chain_id": str(validate_uint(chain_id, 64)),
                "contract_address": validate_address(contract_address),
            }
        self._qualify = qualify
        self._timeout = timeout
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(
            follow_redirects=True,
            headers={"Accept": "application/json", "User-Agent": f"bounty-client/{__version__}"},
        )
        self._deployment: Deployment | None = None

    def close(self) -> None:
        """Closes the HTTP connections (not those of an `http_client` passed in)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def _get(self, path: str, params: dict[str, str]) -> Any:
        response = self._http.get(self.base_url + path, params=params, timeout=self._timeout)
        if not response.is_success:
            raise RequestFailedError(response.status_code, _error_detail(response), str(response.url))
        try:
            return response.json()
        except ValueError:
            raise ResponseError(f"GET {path}: the body is not JSON") from None

    def _object(self, path: str) -> Any:
        body = self._get(path, self._deployment_params())
        if not isinstance(body, dict):
            raise ResponseError(f"GET {path}: expected a JSON object")
        return body

    def _deployment_params(self) -> dict[str, str]:
        if not self._qualify:
            return {}
        if self._qualifier is None:
            deployment = self.deployment()
            self._qualifier = {
                "chain_id": str(deployment.chain_id),
                "contract_address": deployment.contract_address,
            }
        return dict(self._qualifier)

    def _list_params(
        self,
        *,
        parents: dict[str, Uint | None] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
    ) -> dict[str, str]:
        filters: dict[str, str] = {}
        for name, value in (parents or {}).items():
            if value is not None:
                filters[name] = str(validate_uint(value, 256))
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
                raise ValidationError(f"limit must be an int from 1 to {MAX_PAGE_SIZE}")
            filters["limit"] = str(limit)
        optional = {"cursor": cursor, "q": q, "sort": sort, "dir": direction}
        filters.update({name: value for name, value in optional.items() if value is not None})
        # Validated before the deployment is looked up, so bad input costs no request.
        return {**self._deployment_params(), **filters}

    def _walk(self, path: str, params: dict[str, str]) -> Iterator[Any]:
        """Every record of a list: an unpaged array as is, a page object page by page."""
        body = self._get(path, params)
        while isinstance(body, dict):
            page = _checked_page(path, body, expected="an array or a page object")
            yield from page["items"]
            if page["next_cursor"] is None:
                return
            if page["next_cursor"] == params.get("cursor"):  # would read the same page forever
                raise ResponseError(f"GET {path}: a page's next_cursor repeats the cursor it was read from")
            params = {**params, "cursor": page["next_cursor"]}
            body = self._get(path, params)
        if not isinstance(body, list):
            raise ResponseError(f"GET {path}: expected an array or a page object")
        yield from body

    def _page(self, path: str, params: dict[str, str]) -> Any:
        return _checked_page(path, self._get(path, params))

    # ------------------------------------------------------------------ health and deployment

    def health(self) -> Health:
        """`GET /health`: service status, version, deployment and indexer state, as the service
        sends it (a body that is not a JSON object raises `ResponseError`)."""
        body = self._get("/health", {})
        if not isinstance(body, dict):
            raise ResponseError("GET /health: expected a JSON object")
        return cast(Health, body)

    def deployment(self) -> Deployment:
        """The service's active deployment, read from `/health` once and then remembered.

        Raises `ConfigurationError` when `/health` names none, or a chain ID outside 1 to
        2^53-1 (see `deployment_from_health`)."""
        if self._deployment is None:
            self._deployment = deployment_from_health(self.health())
        return self._deployment

    # ------------------------------------------------------------------ bounties

    def list_bounties(
        self, *, q: str | None = None, sort: str | None = None, direction: Direction | None = None
    ) -> list[BountyRecord]:
        """`GET /bounties`: every bounty (of the deployment, unless `qualify=False`).

        Without `q` this is one unpaged request; with `q` the pages are walked.
        """
        return list(self._walk("/bounties", self._list_params(q=q, sort=sort, direction=direction)))

    def iter_bounties(
        self,
        *,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[BountyRecord]:
        """Every bounty, fetched lazily `page_size` at a time by following `next_cursor`."""
        params = self._list_params(limit=page_size, q=q, sort=sort, direction=direction)
        return self._walk("/bounties", params)

    def bounty_page(
        self,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
    ) -> Page[BountyRecord]:
        """One page of `GET /bounties` (`limit` 1 to 100; `cursor` from a previous page)."""
        params = self._list_params(limit=limit, cursor=cursor, q=q, sort=sort, direction=direction)
        return cast(Page[BountyRecord], self._page("/bounties", params))

    def get_bounty(self, bounty_id: Uint) -> BountyRecord:
        """`GET /bounties/{bounty_id}`."""
        return cast(BountyRecord, self._object(f"/bounties/{validate_uint(bounty_id, 256)}"))

    def bounty_overview(self, bounty_id: Uint) -> BountyOverview:
        """`GET /bounties/{bounty_id}/overview`: the bounty, its submissions, their disputes."""
        return cast(BountyOverview, self._object(f"/bounties/{validate_uint(bounty_id, 256)}/overview"))

    # ------------------------------------------------------------------ submissions

    def list_submissions(
        self,
        bounty_id: Uint | None = None,
        *,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
    ) -> list[SubmissionRecord]:
        """`GET /submissions`, or `GET /submissions?bounty_id=...` for one bounty's submissions."""
        params = self._list_params(parents={"bounty_id": bounty_id}, q=q, sort=sort, direction=direction)
        return list(self._walk("/submissions", params))

    def iter_submissions(
        self,
        bounty_id: Uint | None = None,
        *,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[SubmissionRecord]:
        """Every submission (of one bounty, if given), fetched lazily page by page."""
        params = self._list_params(
            parents={"bounty_id": bounty_id}, limit=page_size, q=q, sort=sort, direction=direction
        )
        return self._walk("/submissions", params)

    def submission_page(
        self,
        bounty_id: Uint | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
    ) -> Page[SubmissionRecord]:
        """One page of `GET /submissions` (of one bounty, if given)."""
        params = self._list_params(
            parents={"bounty_id": bounty_id}, limit=limit, cursor=cursor, q=q, sort=sort, direction=direction
        )
        return cast(Page[SubmissionRecord], self._page("/submissions", params))

    def get_submission(self, submission_id: Uint) -> SubmissionRecord:
        """`GET /submissions/{submission_id}`."""
        return cast(SubmissionRecord, self._object(f"/submissions/{validate_uint(submission_id, 256)}"))

    def submission_overview(self, submission_id: Uint) -> SubmissionOverview:
        """`GET /submissions/{submission_id}/overview`: the submission, its bounty, its disputes."""
        path = f"/submissions/{validate_uint(submission_id, 256)}/overview"
        return cast(SubmissionOverview, self._object(path))

    # ------------------------------------------------------------------ disputes

    def list_disputes(
        self,
        submission_id: Uint | None = None,
        *,
        bounty_id: Uint | None = None,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
    ) -> list[DisputeRecord]:
        """`GET /disputes`, `GET /disputes?submission_id=...` for one submission's disputes, or
        `GET /disputes?bounty_id=...` (always paged by the service; every page is read)."""
        params = self._list_params(
            parents={"submission_id": submission_id, "bounty_id": bounty_id},
            q=q,
            sort=sort,
            direction=direction,
        )
        return list(self._walk("/disputes", params))

    def iter_disputes(
        self,
        submission_id: Uint | None = None,
        *,
        bounty_id: Uint | None = None,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[DisputeRecord]:
        """Every dispute (of one submission or bounty, if given), fetched lazily page by page."""
        params = self._list_params(
            parents={"submission_id": submission_id, "bounty_id": bounty_id},
            limit=page_size,
            q=q,
            sort=sort,
            direction=direction,
        )
        return self._walk("/disputes", params)

    def dispute_page(
        self,
        submission_id: Uint | None = None,
        *,
        bounty_id: Uint | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
        q: str | None = None,
        sort: str | None = None,
        direction: Direction | None = None,
    ) -> Page[DisputeRecord]:
        """One page of `GET /disputes` (of one submission or bounty, if given)."""
        params = self._list_params(
            parents={"submission_id": submission_id, "bounty_id": bounty_id},
            limit=limit,
            cursor=cursor,
            q=q,
            sort=sort,
            direction=direction,
        )
        return cast(Page[DisputeRecord], self._page("/disputes", params))

    def get_dispute(self, dispute_id: Uint) -> DisputeRecord:
        """`GET /disputes/{dispute_id}`."""
        return cast(DisputeRecord, self._object(f"/disputes/{validate_uint(dispute_id, 256)}"))

    def dispute_overview(self, dispute_id: Uint) -> DisputeOverview:
        """`GET /disputes/{dispute_id}/overview`: the dispute, its submission and bounty, and
        the other disputes of the same submission."""
        return cast(DisputeOverview, self._object(f"/disputes/{validate_uint(dispute_id, 256)}/overview"))


def _error_detail(response: httpx.Response) -> str | None:
    """The `detail` of the service's one error shape, `{"detail": "<message>"}`, if the body has it."""
    try:
        body = response.json()
    except ValueError:  # also UnicodeDecodeError
        return None
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else None


def _checked_page(path: str, body: Any, expected: str = "a page object") -> Any:
    """`body` if it is a page object: `items` an array, `next_cursor` a string or null."""
    page = isinstance(body, dict) and isinstance(body.get("items"), list)
    if not (page and (body.get("next_cursor") is None or isinstance(body["next_cursor"], str))):
        raise ResponseError(f"GET {path}: expected {expected}")
    return body
