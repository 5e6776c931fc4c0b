"""Settings of the bounty read service.

Every value comes from an environment variable, read here and nowhere else, through the typed
readers of `bountysite.env` (they fail at start, naming the variable). With nothing set, the
service runs on its embedded default: SQLite under var/, no Redis, DEBUG off. docs/operations.md
lists every variable.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from bountysite.env import (
    env_address,
    env_bool,
    env_choice,
    env_depth,
    env_endpoint,
    env_int,
    env_ip,
    env_list,
    env_networks,
    env_origins,
    env_proxies,
    env_required,
    env_str,
    env_url,
    env_urls,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DJANGO_DEBUG", False)

if DEBUG:
    SECRET_KEY = env_str("DJANGO_SECRET_KEY", "insecure-dev-key-only-for-DJANGO_DEBUG=1") or ""
else:
    SECRET_KEY = env_required("DJANGO_SECRET_KEY")
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be at least 50 characters with at least 5 distinct ones")

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS is required when DJANGO_DEBUG is off (comma-separated host names)")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "corsheaders",
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "records",
    "indexer",
    "contracts",
    "webhooks",
]

MIDDLEWARE = [
    "bountysite.access.AccessMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # CONTENT_SECURITY_POLICY, on every page that sets none of its own
    # Prometheus's scrape by address, before CommonMiddleware checks the Host (records/metrics.py).
    "records.metrics.MetricsMiddleware",
    # Before the rate limit: its 429s carry the CORS headers too (so a page can read Retry-After),
    # and preflights are answered without spending the client's budget.
    "corsheaders.middleware.CorsMiddleware",
    "bountysite.ratelimit.RateLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",  # whether the session was verified by an authenticator
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked account's sign-in into bountysite.sign_in's 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "bountysite.urls"
WSGI_APPLICATION = "bountysite.wsgi.application"
ASGI_APPLICATION = "bountysite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ---------------------------------------------------------------- database

DATABASE_URL = env_url(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
    schemes=("sqlite", "postgres", "postgresql"),
)
assert DATABASE_URL is not None
_database: dict[str, Any] = dict(dj_database_url.parse(DATABASE_URL, conn_health_checks=True))
if _database["ENGINE"] == "django.db.backends.sqlite3":
    if _database["NAME"] != ":memory:":
        Path(_database["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # A file, not memory, for tests too: the tests run the indexer and servers as processes.
        _database["TEST"] = {"NAME": str(Path(_database["NAME"]).with_name("test-" + Path(_database["NAME"]).name))}
    # The indexer and the web server are separate processes writing and reading one file:
    # WAL lets readers run beside the writer, IMMEDIATE takes the write lock up front so a
    # transaction never fails half-way on a lock upgrade, and the timeout waits for the lock.
    # A new database gets 8 KiB pages (set before WAL, which fixes them): a record row with its
    # rendered body is about 2.5 KB, one to a 4 KiB page; a backfill's commits took 30% less.
    _database["OPTIONS"] = {
        "init_command": "PRAGMA page_size=8192; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
else:
    # Under ASGI a request's database work may run on any of many threads: persistent
    # per-thread connections pile up until PostgreSQL refuses more. A pool shares a bounded set.
    _database["CONN_MAX_AGE"] = 0
    _database["OPTIONS"] = {
        **_database.get("OPTIONS", {}),  # the URL's own (?sslmode=require&application_name=web)
        "pool": {
            "min_size": env_int("DATABASE_POOL_MIN", 1, minimum=0),
            "max_size": env_int("DATABASE_POOL_MAX", 10, minimum=1),
            "timeout": env_int("DATABASE_POOL_TIMEOUT", 10, minimum=1),
        }
    }
DATABASES = {"default": _database}
# Streaming replicas of DATABASE_URL's server (docs/operations.md, "Read replicas"): web processes
# read records, pages, overviews, snapshots and the change log from them (records.replicas);
# the admin's writes, its sessions and the indexer stay on the primary (bountysite.databases).
DATABASE_REPLICA_URLS = env_urls("DATABASE_REPLICA_URLS", schemes=("postgres", "postgresql"))
if DATABASE_REPLICA_URLS and _database["ENGINE"] == "django.db.backends.sqlite3":
    raise ImproperlyConfigured("DATABASE_REPLICA_URLS names PostgreSQL replicas, but DATABASE_URL is SQLite: "
                               "unset DATABASE_REPLICA_URLS, or point DATABASE_URL at their primary")
# How far behind the primary's change log a replica may be before reads are moved off it, how
# often each web process checks its replicas, and how long one check (or a connection) may take.
BOUNTY_REPLICA_MAX_LAG_SECONDS = env_int("BOUNTY_REPLICA_MAX_LAG_SECONDS", 30, minimum=1)
BOUNTY_REPLICA_CHECK_SECONDS = env_int("BOUNTY_REPLICA_CHECK_SECONDS", 5, minimum=1, maximum=300)
BOUNTY_REPLICA_TIMEOUT_SECONDS = env_int("BOUNTY_REPLICA_TIMEOUT_MS", 2_000, minimum=100, maximum=60_000) / 1000
# How long a read that needs a change its replica has not replayed yet (the live feed woken for
# it, a client resuming from it, an ETag naming it) waits for the replica before it goes to the primary.
BOUNTY_REPLICA_WAIT_SECONDS = env_int("BOUNTY_REPLICA_WAIT_MS", 1_000, minimum=0, maximum=60_000) / 1000
for _number, _replica_url in enumerate(DATABASE_REPLICA_URLS, start=1):
    _replica: dict[str, Any] = dict(dj_database_url.parse(_replica_url, conn_health_checks=True))
    _replica["CONN_MAX_AGE"] = 0
    _replica["OPTIONS"] = {
        **_replica.get("OPTIONS", {}),
        "connect_timeout": max(1, math.ceil(BOUNTY_REPLICA_TIMEOUT_SECONDS)),
        # A replica whose network goes silent under a query is found out within seconds (TCP
        # keepalives, and data left unacknowledged), not when the kernel gives up after minutes.
        "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
        "tcp_user_timeout": 15_000,
        # A replica that does not give a connection in time is set aside, not waited for.
        "pool": {**_database["OPTIONS"]["pool"], "timeout": BOUNTY_REPLICA_TIMEOUT_SECONDS},
    }
    _replica["TEST"] = {"MIRROR": "default"}  # a test database has no replica of its own
    DATABASES[f"replica{_number}"] = _replica
DATABASE_ROUTERS = ["bountysite.databases.ReadRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---------------------------------------------------------------- redis (optional)

REDIS_URL = env_url("REDIS_URL", None, schemes=("redis", "rediss", "unix"))
# How long a call to Redis may take before the service does without it (bountysite/redis_reach.py).
REDIS_TIMEOUT_SECONDS = env_int("REDIS_TIMEOUT_MS", 250, minimum=10, maximum=10_000) / 1000
# The connections a process's one pool holds at most (bountysite/cache.py), whatever its clients;
# a call waits at most REDIS_TIMEOUT_MS for a free one.
REDIS_MAX_CONNECTIONS = env_int("REDIS_MAX_CONNECTIONS", 20, minimum=1, maximum=1_000)
CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS = 10
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "bountysite.cache.RedisCache", "LOCATION": REDIS_URL,
                          "OPTIONS": {"socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
                                      "socket_timeout": REDIS_TIMEOUT_SECONDS,
                                      "serializer": "bountysite.cache.PlainValues",
                                      "pool_class": "redis.BlockingConnectionPool",
                                      "max_connections": REDIS_MAX_CONNECTIONS,
                                      "timeout": REDIS_TIMEOUT_SECONDS}}}
    # The channel layer's receive blocks in BZPOPMIN for 5 s on purpose (channels_redis's
    # brpop_timeout): its socket timeout must be longer, or an idle feed's wait reads as Redis
    # gone (redis-py 8's default socket timeout is those same 5 s). A Redis that hangs is still
    # noticed, after this long. The indexer's notification has a deadline of its own (records/changes.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
        "hosts": [{"address": REDIS_URL, "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
                   "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS}]}}}
else:
    # Stores values as the Redis cache does (bountysite.cache.PlainValues), so what fails there fails here.
    CACHES = {"default": {"BACKEND": "bountysite.cache.LocalCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# ---------------------------------------------------------------- the bounty deployment

BOUNTY_CHAIN_ID = env_int("BOUNTY_CHAIN_ID", 91342, minimum=1)
BOUNTY_CONTRACT_ADDRESS = env_address("BOUNTY_CONTRACT_ADDRESS")
BOUNTY_USDC_ADDRESS = env_address("BOUNTY_USDC_ADDRESS")
# The node and the explorer over https://, or plain http:// to a loopback host; to another host
# only where this says the network between is private (bountysite.env.env_endpoint).
BOUNTY_RPC_ALLOW_PLAIN_HTTP = env_bool("BOUNTY_RPC_ALLOW_PLAIN_HTTP", False)
BOUNTY_RPC_URL = env_endpoint("BOUNTY_RPC_URL", allow_plain_http=BOUNTY_RPC_ALLOW_PLAIN_HTTP)
# Unset: the indexer finds the block the contract was deployed in (indexer.startup.find_start_block).
BOUNTY_START_BLOCK = env_int("BOUNTY_START_BLOCK", None, minimum=0)
# How deep a block must be to be indexed: a number of blocks (default 0: reorganisations are
# undone), or a block tag the node resolves (OP Stack: `safe`, derived from L1 data; `finalized`).
BOUNTY_CONFIRMATIONS = env_depth("BOUNTY_CONFIRMATIONS", 0, tags=("safe", "finalized"), maximum=10_000)
BOUNTY_HEALTH_HEARTBEAT_SECONDS = env_int("BOUNTY_HEALTH_HEARTBEAT_SECONDS", 60, minimum=1)
BOUNTY_HEALTH_MAX_LAG_BLOCKS = env_int("BOUNTY_HEALTH_MAX_LAG_BLOCKS", 10, minimum=0)
BOUNTY_GETLOGS_MAX_BLOCKS = env_int("BOUNTY_GETLOGS_MAX_BLOCKS", 50_000, minimum=1)
_POLL_MS = env_int("BOUNTY_INDEXER_POLL_MS", 250, minimum=50, maximum=600_000)
BOUNTY_INDEXER_POLL_SECONDS = _POLL_MS / 1000
# The longest the indexer goes between two asks of the node, whatever the chain's timestamps say
# (indexer.clock) and however long the node has not answered; /health and the alerts hold it to that.
_MAX_WAIT_MS = env_int("BOUNTY_INDEXER_MAX_WAIT_MS", max(15_000, _POLL_MS), minimum=1_000, maximum=600_000)
if _MAX_WAIT_MS < _POLL_MS:
    raise ImproperlyConfigured(f"BOUNTY_INDEXER_MAX_WAIT_MS ({_MAX_WAIT_MS}) must be at least BOUNTY_INDEXER_POLL_MS "
                               f"({_POLL_MS}): the ceiling of the waits cannot be below the poll interval")
BOUNTY_INDEXER_MAX_WAIT_SECONDS = _MAX_WAIT_MS / 1000
# Blocks below the head read one by one (and read again by range once deeper): more than any
# backend of the node's load balancer lags behind the others (0: every block by range, for a
# node of one's own).
BOUNTY_LIVE_BLOCKS = env_int("BOUNTY_LIVE_BLOCKS", 32, minimum=0, maximum=1_000)
BOUNTY_RPC_TIMEOUT_SECONDS = env_int("BOUNTY_RPC_TIMEOUT_SECONDS", 20, minimum=1, maximum=600)  # per request
# The bytes of one answer of the node or the explorer at most: a getLogs range is sized to about
# 4,000 logs (a few MB), so 64 MiB is far past any range the indexer plans, and bounds what a node
# can make it hold (a range past it is split). The longest wait a Retry-After may ask: a node asking
# longer is waited that long, the explorer set aside.
BOUNTY_RPC_MAX_RESPONSE_BYTES = env_int("BOUNTY_RPC_MAX_RESPONSE_BYTES", 64 * 1024 * 1024, minimum=65_536,
                                        maximum=1024 * 1024 * 1024)
BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS = env_int("BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS", 60, minimum=1, maximum=3_600)
# Requests to the node in flight at most (the indexer adapts below it), and the plan's budget of
# calls per second, each call of a batch counted (unset: none, the node's 429s are the limit).
BOUNTY_RPC_MAX_CONCURRENCY = env_int("BOUNTY_RPC_MAX_CONCURRENCY", 16, minimum=1, maximum=256)
BOUNTY_RPC_MAX_REQUESTS_PER_SECOND = env_int("BOUNTY_RPC_MAX_REQUESTS_PER_SECOND", None, minimum=1)
# An explorer's JSON-RPC endpoint (Blockscout: https://<explorer>/api/eth-rpc) that guides the
# historical phase to the blocks holding the contract's logs (indexer.explorer), with a budget of
# its own; unset: every block is read by range through the node.
BOUNTY_EXPLORER_RPC_URL = env_endpoint("BOUNTY_EXPLORER_RPC_URL", allow_plain_http=BOUNTY_RPC_ALLOW_PLAIN_HTTP)
# The node and the explorer are reached through the proxy the environment names, as other HTTP
# clients do (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY; NO_PROXY's hosts go direct): indexer.rpc.proxy_for.
OUTBOUND_PROXIES = env_proxies()
BOUNTY_EXPLORER_MAX_REQUESTS_PER_SECOND = env_int("BOUNTY_EXPLORER_MAX_REQUESTS_PER_SECOND", 5, minimum=1)
# A backfill that will add more rows than the record tables hold builds their secondary indexes
# after catching up (indexer.indexes): auto decides so, always / never force it.
BOUNTY_DEFER_INDEXES = env_choice("BOUNTY_DEFER_INDEXES", "auto", choices=("auto", "always", "never"))
BOUNTY_INDEX_BUILD_MEMORY_MB = env_int("BOUNTY_INDEX_BUILD_MEMORY_MB", 512, minimum=1)  # PostgreSQL builds
BOUNTY_CHANGELOG_KEEP_DAYS = env_int("BOUNTY_CHANGELOG_KEEP_DAYS", 30, minimum=1)  # manage.py prune_changelog

# ---------------------------------------------------------------- webhooks (docs/operations.md, Webhooks)

# manage.py run_webhooks. An endpoint's URL must be https:// (http:// too when allowed) and reach a
# public address: loopback, private, link-local, shared (CGNAT), multicast, reserved and unspecified
# addresses are refused, at save and on every connection, unless these networks name them.
BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP = env_bool("BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP", False)
BOUNTY_WEBHOOKS_ALLOWED_NETWORKS = env_networks("BOUNTY_WEBHOOKS_ALLOWED_NETWORKS")
# One delivery's whole time (connecting, sending, the answer), and the most of an answer read.
BOUNTY_WEBHOOKS_TIMEOUT_SECONDS = env_int("BOUNTY_WEBHOOKS_TIMEOUT_SECONDS", 10, minimum=1, maximum=60)
BOUNTY_WEBHOOKS_MAX_RESPONSE_BYTES = env_int("BOUNTY_WEBHOOKS_MAX_RESPONSE_BYTES", 65_536, minimum=256,
                                             maximum=16 * 1024**2)
# Endpoints one worker delivers to at once (each one change at a time, in order).
BOUNTY_WEBHOOKS_CONCURRENCY = env_int("BOUNTY_WEBHOOKS_CONCURRENCY", 1_000, minimum=1, maximum=10_000)
# A receiver's Retry-After is honoured up to this; an endpoint failing this long is disabled.
BOUNTY_WEBHOOKS_MAX_RETRY_AFTER_SECONDS = env_int("BOUNTY_WEBHOOKS_MAX_RETRY_AFTER_SECONDS", 3_600, minimum=1)
BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS = env_int("BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS", 24, minimum=1)
# The worker's look at the change log without the indexer's announcements (through Redis).
BOUNTY_WEBHOOKS_POLL_SECONDS = env_int("BOUNTY_WEBHOOKS_POLL_MS", 1_000, minimum=50, maximum=60_000) / 1000
# A worker holds the endpoints it delivers to for this long, renewing it while it runs; a worker
# killed outright leaves its endpoints to others when it ends. Longer than two deliveries' time.
BOUNTY_WEBHOOKS_LEASE_SECONDS = env_int("BOUNTY_WEBHOOKS_LEASE_SECONDS", 60,
                                        minimum=2 * BOUNTY_WEBHOOKS_TIMEOUT_SECONDS + 1, maximum=3_600)
# After a rotation, the old secret signs beside the new one this long.
BOUNTY_WEBHOOKS_SECRET_OVERLAP_HOURS = env_int("BOUNTY_WEBHOOKS_SECRET_OVERLAP_HOURS", 24, minimum=0)
# run_webhooks serves its metrics on this port (off when unset), bound to this address.
BOUNTY_WEBHOOKS_METRICS_PORT = env_int("BOUNTY_WEBHOOKS_METRICS_PORT", None, minimum=1, maximum=65_535)
BOUNTY_WEBHOOKS_METRICS_ADDRESS = env_ip("BOUNTY_WEBHOOKS_METRICS_ADDRESS", "127.0.0.1")

# Moderators' notifications (docs/operations.md, Moderators' notifications), sent by run_webhooks:
# Apprise URLs (https://github.com/caronc/apprise/wiki), separated as Apprise separates them (spaces,
# commas or semicolons before the next `service://`); each is checked with Apprise when run_webhooks
# starts (webhooks.moderation). A URL may hold a token: messages name one by its number and service.
BOUNTY_MODERATOR_NOTIFY_URLS = [
    url for url in re.split(r"[\s,;]+(?=[a-z0-9]{1,32}://)", env_str("BOUNTY_MODERATOR_NOTIFY_URLS") or "", flags=re.I)
    if url]
for _number, _notify_url in enumerate(BOUNTY_MODERATOR_NOTIFY_URLS, start=1):
    if not re.match(r"[a-z0-9]{1,32}://", _notify_url, re.I):
        raise ImproperlyConfigured(f"BOUNTY_MODERATOR_NOTIFY_URLS must list Apprise URLs (service://…, e.g. "
                                   f"mailtos://, slack://, json://): its item {_number} is not one")
# The address moderators open the service at (scheme://host[:port]): the messages' links to the admin.
BOUNTY_ADMIN_BASE_URL = env_url("BOUNTY_ADMIN_BASE_URL", None, schemes=("https", "http"))
if BOUNTY_ADMIN_BASE_URL is not None:
    _base = urlsplit(BOUNTY_ADMIN_BASE_URL)
    if not _base.hostname or _base.path.strip("/") or _base.query or _base.fragment:
        raise ImproperlyConfigured("BOUNTY_ADMIN_BASE_URL must be the address moderators open the service at, "
                                   "scheme://host[:port] without a path (e.g. https://bounties.example.org)")
    BOUNTY_ADMIN_BASE_URL = BOUNTY_ADMIN_BASE_URL.rstrip("/")
elif BOUNTY_MODERATOR_NOTIFY_URLS:
    raise ImproperlyConfigured("BOUNTY_MODERATOR_NOTIFY_URLS needs BOUNTY_ADMIN_BASE_URL, the address moderators open "
                               "the service at (e.g. https://bounties.example.org), for the messages' links")
# One message per channel per window at most, listing this many disputes and endpoints at most (then
# how many more); a window's send to one channel may take this long.
BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS = env_int("BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS", 60, minimum=1,
                                                 maximum=86_400)
BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS = env_int("BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS", 20, minimum=1, maximum=500)
BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS = env_int("BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS", 30, minimum=1,
                                                  maximum=300)
# A dispute pending review this long is announced again, as overdue.
BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS = env_int("BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS", 24, minimum=1)

# ---------------------------------------------------------------- metrics (docs/operations.md, Metrics)

# run_indexer serves its metrics on this port (off when unset), bound to this address.
BOUNTY_INDEXER_METRICS_PORT = env_int("BOUNTY_INDEXER_METRICS_PORT", None, minimum=1, maximum=65_535)
BOUNTY_INDEXER_METRICS_ADDRESS = env_ip("BOUNTY_INDEXER_METRICS_ADDRESS", "127.0.0.1")
# The web processes serve /metrics only to peers in these networks, never through a proxy.
BOUNTY_METRICS_ALLOWED = env_networks("BOUNTY_METRICS_ALLOWED", ["127.0.0.0/8", "::1"])

# ---------------------------------------------------------------- websocket

# /ws/events (docs/api.md, Limits and close codes). Each limit closes the connection with code 1008.
BOUNTY_WS_MAX_CONNECTIONS = env_int("BOUNTY_WS_MAX_CONNECTIONS", 10_000, minimum=1)  # per server process
BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT = env_int("BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT", 20, minimum=1)
# Connections a client may open per minute (0: no limit), shared by every process with Redis:
# enough for a page that reconnects with backoff.
BOUNTY_WS_CONNECTS_PER_MINUTE = env_int("BOUNTY_WS_CONNECTS_PER_MINUTE", 60, minimum=0)
BOUNTY_WS_MAX_MESSAGES = env_int("BOUNTY_WS_MAX_MESSAGES", 10, minimum=0)  # from a client per window
BOUNTY_WS_MESSAGE_WINDOW_SECONDS = env_int("BOUNTY_WS_MESSAGE_WINDOW_SECONDS", 10, minimum=1)
BOUNTY_WS_MAX_MESSAGE_BYTES = env_int("BOUNTY_WS_MAX_MESSAGE_BYTES", 4_096, minimum=1)
# daphne drops a client sending a larger message as its header arrives, before buffering it: `manage.py
# runserver` (scripts/dev) reads this setting, deploy/bounty-web@.service passes the same variable
# to `daphne --websocket-max-message-size` (where 0 would mean no limit, hence the minimum of 1).
DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE = BOUNTY_WS_MAX_MESSAGE_BYTES
BOUNTY_WS_MAX_BACKLOG = env_int("BOUNTY_WS_MAX_BACKLOG", 10_000, minimum=1)  # live messages queued per client
BOUNTY_WS_POLL_SECONDS = env_int("BOUNTY_WS_POLL_MS", 50, minimum=10, maximum=60_000) / 1000
# The live feed's memory of the changes it sent last (records.ws.recent): a client resuming inside it
# costs the database nothing. 10,000 messages of about 1 KB (text and frame) take about 25 MB.
BOUNTY_WS_RECENT_MESSAGES = env_int("BOUNTY_WS_RECENT_MESSAGES", 10_000, minimum=1)
BOUNTY_WS_RECENT_BYTES = env_int("BOUNTY_WS_RECENT_BYTES", 64 * 1024**2, minimum=1024**2)
# The kernel's send buffer of a websocket (bountysite/daphne_ws.py, Backpressure): what may wait for a slow client.
BOUNTY_WS_SEND_BUFFER_BYTES = env_int("BOUNTY_WS_SEND_BUFFER_BYTES", 131_072, minimum=4_096)
# Snapshots (docs/api.md, Limits and close codes) are read from the database into spools
# (records.spools): at most BOUNTY_WS_SNAPSHOT_READERS at once per process, each holding a
# database connection while it reads. A client address is sent at most
# BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT at once (others wait); a snapshot not begun within the wait
# is closed with 1013; each must be taken by its deadline, the base plus its bytes at the minimum
# rate (1008 past it).
BOUNTY_WS_SNAPSHOT_READERS = env_int("BOUNTY_WS_SNAPSHOT_READERS", 4, minimum=1)
BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT = env_int("BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT", 2, minimum=1)
BOUNTY_WS_SNAPSHOT_WAIT_SECONDS = env_int("BOUNTY_WS_SNAPSHOT_WAIT_SECONDS", 10, minimum=1)
BOUNTY_WS_SNAPSHOT_BASE_SECONDS = env_int("BOUNTY_WS_SNAPSHOT_BASE_SECONDS", 10, minimum=1)
BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND = env_int("BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND", 100_000, minimum=1)
# ---------------------------------------------------------------- read API

BOUNTY_API_CACHE_SECONDS = env_int("BOUNTY_API_CACHE_SECONDS", 300, minimum=0)
BOUNTY_RATE_LIMIT = env_int("BOUNTY_RATE_LIMIT", 600, minimum=0)
BOUNTY_RATE_WINDOW_SECONDS = env_int("BOUNTY_RATE_WINDOW_SECONDS", 60, minimum=1)
# The admin never spends that budget; its login and password-change POSTs have this one, per client.
BOUNTY_ADMIN_LOGIN_RATE_LIMIT = env_int("BOUNTY_ADMIN_LOGIN_RATE_LIMIT", 10, minimum=0)
BOUNTY_ADMIN_LOGIN_RATE_WINDOW_SECONDS = env_int("BOUNTY_ADMIN_LOGIN_RATE_WINDOW_SECONDS", 300, minimum=1)
BOUNTY_TRUSTED_PROXIES = env_networks("BOUNTY_TRUSTED_PROXIES")
# Bounds of one request's work (docs/api.md, Lists; docs/operations.md, The read API). `q` is a
# substring: a transaction hash is 66 characters, an ipfs:// or https:// metadata URI rarely passes
# 200; each character costs the trigram search a look-up. The statement timeout holds only in the
# web processes (bountysite/asgi.py): the indexer's index builds and COPYs run for minutes.
BOUNTY_Q_MAX_LENGTH = env_int("BOUNTY_Q_MAX_LENGTH", 256, minimum=1, maximum=10_000)
BOUNTY_STATEMENT_TIMEOUT_MS = env_int("BOUNTY_STATEMENT_TIMEOUT_MS", 5_000, minimum=0)  # 0: none
# What one client can add to the response cache: bodies up to this size are cached, and at most
# this many new entries per client per BOUNTY_API_CACHE_SECONDS (past it, answers are not stored).
BOUNTY_API_CACHE_MAX_BODY_BYTES = env_int("BOUNTY_API_CACHE_MAX_BODY_BYTES", 262_144, minimum=0)
BOUNTY_API_CACHE_ENTRIES_PER_CLIENT = env_int("BOUNTY_API_CACHE_ENTRIES_PER_CLIENT", 50, minimum=0)

# A response body is written as the client takes it; one that has not taken the 64 KiB the server
# holds for it within this many seconds is cut off (bountysite/daphne_http.py, the stall limit).
BOUNTY_HTTP_STALL_SECONDS = env_int("BOUNTY_HTTP_STALL_SECONDS", 30, minimum=1, maximum=3_600)
# Unpaged lists are read from the database into spools (records.spools): at most
# BOUNTY_HTTP_MAX_STREAMS at once per process, each holding a database connection while it reads;
# a list whose spool is not made within BOUNTY_HTTP_LIST_WAIT_SECONDS is answered 503. A client
# address reads at most BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT unpaged lists at once (429 past it).
BOUNTY_HTTP_MAX_STREAMS = env_int("BOUNTY_HTTP_MAX_STREAMS", 4, minimum=1)
BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT = env_int("BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT", 1, minimum=1)
BOUNTY_HTTP_LIST_WAIT_SECONDS = env_int("BOUNTY_HTTP_LIST_WAIT_SECONDS", 10, minimum=1)
# Spools (records.spools): where they are made (unnamed files: nothing is left there), the disk a
# process's open spools may take, and how long reading one from the database may take.
BOUNTY_SPOOL_DIR = env_str("BOUNTY_SPOOL_DIR", "") or ""
if BOUNTY_SPOOL_DIR and not os.access(BOUNTY_SPOOL_DIR, os.W_OK | os.X_OK):
    raise ImproperlyConfigured(f"BOUNTY_SPOOL_DIR ({BOUNTY_SPOOL_DIR}) must be a directory this process can write")
BOUNTY_SPOOL_MAX_BYTES = env_int("BOUNTY_SPOOL_MAX_BYTES", 2 * 1024**3, minimum=1024**2)
BOUNTY_FULL_READ_SECONDS = env_int("BOUNTY_FULL_READ_SECONDS", 120, minimum=1)
# A web process's pool must hold its snapshot readers, the live feed's reads, its streamed lists
# and at least one more connection for every other request (pages, single records, the admin).
if _database["ENGINE"] != "django.db.backends.sqlite3":
    _pool_max = _database["OPTIONS"]["pool"]["max_size"]
    _pool_needs = BOUNTY_WS_SNAPSHOT_READERS + 1 + BOUNTY_HTTP_MAX_STREAMS + 1
    if _pool_max < _pool_needs:
        raise ImproperlyConfigured(
            f"DATABASE_POOL_MAX ({_pool_max}) must be at least BOUNTY_WS_SNAPSHOT_READERS "
            f"({BOUNTY_WS_SNAPSHOT_READERS}) + 1 for the websocket feed + BOUNTY_HTTP_MAX_STREAMS "
            f"({BOUNTY_HTTP_MAX_STREAMS}) + 1 for every other request ({_pool_needs}): raise it, or lower the others")
# The websocket's other reads (records.lanes: resumes older than the feed's memory, a snapshot's
# data version, a replica's questions) run on as many threads as the pool has connections beyond
# those held back above, plus the one every other request shares; SQLite has no pool: 2.
BOUNTY_WS_READ_THREADS = 2 if _database["ENGINE"] == "django.db.backends.sqlite3" else _pool_max - _pool_needs + 1

# CORS (django-cors-headers; docs/api.md, Cross-origin requests): pages on the allowed origins may
# read the public routes, the front page and the schema. Never the admin, /metrics or the docs
# pages. Nothing is read from credentials, so none are allowed and `*` is a safe default.
_cors_origins = env_origins("BOUNTY_CORS_ALLOWED_ORIGINS", ["*"])
CORS_ALLOW_ALL_ORIGINS = _cors_origins == ["*"]
CORS_ALLOWED_ORIGINS = [] if CORS_ALLOW_ALL_ORIGINS else _cors_origins
CORS_ALLOW_CREDENTIALS = False
# The record kinds' resources (records.kinds), written out: settings import no application code.
# tests/api/test_record_kinds.py holds them to the kinds.
CORS_URLS_REGEX = r"^/(?:health|(?:bounties|submissions|disputes)(?:/.*)?|api/schema/)?$"
CORS_ALLOW_METHODS = ("GET", "HEAD", "OPTIONS")
CORS_ALLOW_HEADERS = ("accept", "if-none-match")
CORS_EXPOSE_HEADERS = ("ETag", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
CORS_PREFLIGHT_MAX_AGE = 7_200  # Chromium keeps a preflight's answer 2 h at most, whatever it is told

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": [
        "records.api.renderers.OrjsonRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "records.api.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
# The service's version has one place, pyproject.toml's [project] version: /health, GET / and the
# OpenAPI schema read it from here.
SERVICE_VERSION: str = tomllib.loads((BASE_DIR / "pyproject.toml").read_text("utf-8"))["project"]["version"]
SPECTACULAR_SETTINGS = {
    "TITLE": "Bounty read service",
    "DESCRIPTION": "Read-only mirror of the bounty contract: bounties, submissions and disputes.",
    "VERSION": SERVICE_VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # 3.1 for its `webhooks`: the deliveries to webhook endpoints (records.api.schema.add_webhooks).
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": ["records.api.schema.add_common_responses", "records.api.schema.add_webhooks"],
}

# ---------------------------------------------------------------- i18n, static

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = env_str("DJANGO_STATIC_ROOT", str(VAR_DIR / "static"))

# ---------------------------------------------------------------- security (production defaults)

SECURE_CONTENT_TYPE_NOSNIFF = True
# Every answer's Content-Security-Policy (django-csp), the admin's and the browsable API's pages
# included; the API docs pages set their own (records/api/docs.py). Scripts only from this
# service, or inline with the request's nonce (the review page's); inline styles are allowed, as
# the admin and the browsable API use style attributes.
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": [SELF],
    "script-src": [SELF, NONCE],
    "style-src": [SELF, "'unsafe-inline'"],
    "img-src": [SELF, "data:"],
    "font-src": [SELF, "data:"],
    "connect-src": [SELF],
    "object-src": [NONE],
    "base-uri": [SELF],
    "form-action": [SELF],
    "frame-ancestors": [NONE],
}}
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Sessions are the admin's only: a moderator's lasts a working day from sign-in, not Django's two weeks.
SESSION_COOKIE_AGE = env_int("BOUNTY_ADMIN_SESSION_HOURS", 8, minimum=1, maximum=24) * 3600
# A moderator's account locks after this many wrong passwords in a row from any addresses, for
# this long (django-axes; bountysite/sign_in.py).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("BOUNTY_ADMIN_LOCKOUT_FAILURES", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("BOUNTY_ADMIN_LOCKOUT_MINUTES", 30, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "records.limits.request_address"  # the service's one rule
AXES_LOCKOUT_CALLABLE = "bountysite.sign_in.locked_out"
AXES_DISABLE_ACCESS_LOG = True  # the access lines are the service's own (bountysite/access.py)
# axes would also lock by address; bountysite.ratelimit's login limit already counts per address,
# and a lock by username alone is what stops a guesser spread over many addresses.
SILENCED_SYSTEM_CHECKS = ["axes.W006"]
# The admin's sign-in asks staff for their authenticator's code too (django-otp, TOTP); off by
# default, so that the dev chain's demo moderator signs in with a password alone.
BOUNTY_ADMIN_TOTP = env_bool("BOUNTY_ADMIN_TOTP", False)
OTP_TOTP_ISSUER = "Bounty moderation"
# Django checks none by default: a moderator could set the password "1".
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if not DEBUG:
    # TLS terminates at the reverse proxy (deploy/), which sets X-Forwarded-Proto.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    # Prometheus scrapes each web process over plain HTTP on its own port (deploy/prometheus.yml).
    SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
    SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

# ---------------------------------------------------------------- logging

LOG_LEVEL = (env_str("LOG_LEVEL", "INFO") or "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}")
# Every line goes through the root's one handler. Django's own defaults give `django` a console
# handler of its own under DEBUG and `django.server` one that does not propagate, which printed
# the dev server's lines twice (plain, then timestamped): they get no handlers here.
# LOG_FORMAT=json: one JSON object per line (bountysite/logs.py), for a log shipper.
LOG_FORMAT = env_choice("LOG_FORMAT", "plain", choices=("plain", "json"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "bountysite.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT},
                 "discard": {"class": "logging.NullHandler"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": [], "propagate": True},
        "django.server": {"handlers": [], "propagate": True},
        # The access lines are the service's own (bountysite/access.py); runserver's would repeat them.
        "django.channels.server": {"level": "WARNING"},
        "django.db.backends": {"level": "INFO"},
        "axes": {"level": "WARNING"},  # its lockouts are warnings; at INFO it says its version at every start
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # Apprise names the URLs of the moderators' channels, which hold their tokens, in its lines, and
        # urllib3 (under Apprise and web3) each request's path at DEBUG: webhooks.moderation logs what
        # happens to each channel without them.
        "apprise": {"handlers": ["discard"], "propagate": False},
        "urllib3": {"level": "WARNING"},
    },
}
