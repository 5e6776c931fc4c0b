"""The web process's Prometheus metrics and `GET /metrics` (docs/operations.md, Metrics).

Each daphne process counts its own requests and websockets and serves them on its own
`/metrics`; Prometheus scrapes every process (deploy/prometheus.yml) and the queries sum over
them. Why not the client library's multi-process mode: daphne forks no workers, so every
process is started on its own port by its own unit and can be scraped directly; the
multi-process mode would need a directory shared by the processes and wiped at each restart,
a file write per sample, and has no per-process gauges such as the open websockets.

`/metrics` answers only peers in BOUNTY_METRICS_ALLOWED (loopback by default), and never a
request that came through a proxy (it carries X-Forwarded-For or Forwarded): the service's
figures are for its operators, not for the public (deploy/nginx.conf does not route it either).

Prometheus names a web process by its address (deploy/prometheus.yml: `127.0.0.1:8000`) and sends
that as the Host, which DJANGO_ALLOWED_HOSTS (the public name) refuses with a 400. MetricsMiddleware
answers such a scrape before Django reads the Host, and only that: the route `/metrics`, from an
allowed peer, not through a proxy, with a Host that is an IP address. That is safe because the Host
check guards the answers that write the Host into URLs or caches (redirects, absolute links, reset
mails), which this one does not, and against DNS rebinding, where a browser sends the attacker's
name as the Host, never an address. Any other request to `/metrics` goes through the Host check.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.request import split_domain_port
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from bountysite.cache import redis_answers
from bountysite.redis_reach import REDIS
from records.api.errors import error_response
from records.selectors import active_deployment, indexer_heartbeat

# Seconds: a cached answer takes about a millisecond, a deep page of a search a good deal more.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_REQUESTS = Counter("bounty_http_requests", "HTTP requests answered, by route, method and status.",
                        ("route", "method", "status"))
HTTP_LATENCY = Histogram("bounty_http_request_duration_seconds",
                         "Seconds from a request's arrival to its answer, by route.", ("route",),
                         buckets=_LATENCY_BUCKETS)
ADMIN_SIGN_IN_LOCKED_OUT = Counter("bounty_admin_sign_in_locked_out",
                                   "Admin sign-ins refused because the account is locked (bountysite.sign_in).")
WS_OPEN = Gauge("bounty_ws_connections_open", "Websocket connections open on this process.")
WS_MESSAGES = Counter("bounty_ws_messages_sent", "Websocket messages sent to clients (snapshot and live).")
WS_RESUMES = Counter("bounty_ws_resumes", "Websocket clients resuming from a position, by what vouched for it: the "
                     "live feed's memory, the database, or neither (a snapshot instead).", ("source",))
WS_CLOSES = Counter("bounty_ws_closes", "Websocket connections closed, by close code.", ("code",))
WS_SLOWEST_QUEUE = Gauge("bounty_ws_slowest_send_queue",
                         "Live messages waiting to be sent to the most backed-up websocket client.")
WS_SNAPSHOTS_SENDING = Gauge("bounty_ws_snapshots_sending",
                             "Websocket snapshots being sent from their spools (records.spools).")
WS_SNAPSHOTS_WAITING = Gauge("bounty_ws_snapshots_waiting",
                             "Websocket snapshots waiting for their client's slot or for their spool.")
SPOOLS_OPEN = Gauge("bounty_spools_open", "Spools of full reads this process holds open, current or still read.")
SPOOL_BYTES = Gauge("bounty_spool_bytes", "Bytes of this process's open spools (bounded by BOUNTY_SPOOL_MAX_BYTES).")
SPOOLS_PRODUCED = Counter("bounty_spools_produced", "Spools of full reads read from the database, by kind.", ("kind",))
REDIS_UNREACHABLE = Gauge("bounty_redis_unreachable_seconds",
                          "Seconds this process has not reached Redis (it does without it meanwhile); 0 while it "
                          "answers, and without Redis configured.")
REDIS_UNREACHABLE.set_function(REDIS.unreachable_seconds)
HEARTBEAT_AGE = Gauge("bounty_indexer_heartbeat_age_seconds",
                      "Seconds since the writing indexer's last heartbeat, as this web process reads it.",
                      ("chain_id", "contract"))
REPLICA_LAG = Gauge("bounty_replica_lag_seconds",
                    "How far a read replica was behind the primary at its last check (records.replicas).",
                    ("replica",))
REPLICA_IN_USE = Gauge("bounty_replica_in_use", "1 while reads go to the replica, 0 while it is set aside.",
                       ("replica",))
REPLICA_FALLBACKS = Counter("bounty_replica_fallbacks",
                            "Reads sent to the primary instead of a replica: the replicas had not replayed what "
                            "the read needed in time (behind), its replica failed under it (failed), or none "
                            "was in use (none_in_use).", ("reason",))


def _allowed(request: HttpRequest) -> bool:
    if "HTTP_X_FORWARDED_FOR" in request.META or "HTTP_FORWARDED" in request.META:
        return False
    try:
        peer = ipaddress.ip_address(str(request.META.get("REMOTE_ADDR", "")))
    except ValueError:
        return False
    return any(peer in network for network in settings.BOUNTY_METRICS_ALLOWED)


def _heartbeat_age() -> None:
    """Reads the writer's heartbeat; with the database unreachable the gauge goes, and the
    process's other metrics are still served."""
    try:
        deployment = active_deployment()
        heartbeat = indexer_heartbeat(deployment) if deployment is not None else None
    except DatabaseError:
        HEARTBEAT_AGE.clear()
        return
    if deployment is None:
        return
    if heartbeat is not None:
        age = (timezone.now() - heartbeat).total_seconds()
        HEARTBEAT_AGE.labels(str(deployment.chain_id), deployment.contract_address).set(max(0.0, age))


@csrf_exempt  # answered 405 below, like the read API's routes, rather than with CSRF's HTML 403
def metrics(request: HttpRequest) -> HttpResponseBase:
    """The process's metrics in Prometheus's text format, for allowed peers only."""
    if not _allowed(request):
        return error_response("metrics are served only to the addresses in BOUNTY_METRICS_ALLOWED, "
                              "and not through a proxy", 403)
    if request.method not in ("GET", "HEAD"):
        response = error_response(f'method "{request.method}" not allowed', 405)
        response["Allow"] = "GET, HEAD"
        return response
    _heartbeat_age()
    redis_answers()  # the outage gauge is fresh even in a process no request reached Redis from
    # The text format Prometheus asks for in Accept (OpenMetrics, or the classic 0.0.4 by default).
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    response = HttpResponse(encode(REGISTRY), content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response


def _host_is_an_address(request: HttpRequest) -> bool:
    domain, _ = split_domain_port(str(request.META.get("HTTP_HOST", "")))
    try:
        ipaddress.ip_address(domain.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


class MetricsMiddleware:
    """Serves an allowed peer's scrape by address, whatever DJANGO_ALLOWED_HOSTS says (see above).
    After SecurityMiddleware, whose https redirect exempts `/metrics` (SECURE_REDIRECT_EXEMPT), and
    before CommonMiddleware, which validates the Host."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info == "/metrics" and _allowed(request) and _host_is_an_address(request):
            return metrics(request)
        return self.get_response(request)
