"""Moderators told when disputes wait for them (docs/operations.md, Moderators' notifications).

`watch_disputes`, run by `manage.py run_webhooks`, looks every BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS
for disputes that entered `pending_human_review`, disputes pending longer than
BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS, and webhook endpoints disabled meanwhile (webhooks.notices),
and sends each channel of BOUNTY_MODERATOR_NOTIFY_URLS one message listing what it has not been
told yet, each dispute with its review page in the admin. A window with nothing new sends nothing.

- **Channels** are Apprise URLs: one syntax for e-mail, Slack, Matrix, Discord, Telegram and a
  hundred more services. A URL may hold a token, so none is ever logged or shown: a channel is
  named by its number in the setting and its service, and Apprise's own logger, which names
  URLs, is silenced (bountysite/settings.py, LOGGING).
- **What was told** is kept per notice and channel (webhooks.models.ModeratorNotice), a dispute's
  notices keyed by its on-chain identity, so a re-index tells nobody again. A channel that did
  not take a message is sent what it missed in the next window; the channels that took it are
  not sent it twice.
- **Several workers** share the notices: each is claimed by one worker for the time of a send
  (`claim`), and a claim not settled (the worker was killed) lapses, so the notice is sent again:
  at least once.
- **Bounded**: a message lists at most BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS and says how many more
  wait (with the review queue's link); a send takes at most BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from records.models import Dispute, DisputeStatus
from webhooks import notices
from webhooks.database_thread import DatabaseThread
from webhooks.models import ModeratorNotice, NoticeKind
from webhooks.worker import worker_name

if TYPE_CHECKING:
    from apprise import Apprise

logger = logging.getLogger(__name__)

SETTING = "BOUNTY_MODERATOR_NOTIFY_URLS"
CLAIM_MARGIN_SECONDS = 60  # a claim outlives the longest send by this much


# ---------------------------------------------------------------------------- the channels


@dataclass(frozen=True)
class Channel:
    number: int  # its place in BOUNTY_MODERATOR_NOTIFY_URLS, from 1
    service: str  # its URL's scheme
    key: str  # what ModeratorNotice.told calls it
    apprise: Apprise

    def __str__(self) -> str:
        return f"channel {self.number} of {SETTING} ({self.service}://)"


def channel_key(url: str) -> str:
    """A digest of the URL keyed by SECRET_KEY: it tells channels apart in the database without
    telling anything of the token the URL may hold, however short."""
    return hmac.new(settings.SECRET_KEY.encode(), url.encode(), hashlib.sha256).hexdigest()[:16]


def channels(urls: list[str]) -> list[Channel]:
    """Each URL as an Apprise channel; ImproperlyConfigured naming the setting and the URL's number
    and scheme (never the URL) for one Apprise cannot use."""
    if not urls:
        return []
    from apprise import Apprise, AppriseAsset  # a second to load its services: only where they are used

    # Nothing on disk: the units' file system is read-only but for var/.
    asset = AppriseAsset(app_id="Bounty moderation", app_desc="Disputes waiting for review", storage_mode="memory")
    found = []
    for number, url in enumerate(urls, start=1):
        service = url.split("://", 1)[0].lower()
        plugin = Apprise.instantiate(url, asset=asset)
        if plugin is None:
            raise ImproperlyConfigured(
                f"{SETTING}: URL {number} ({service}://…) is not one Apprise can use: check it against the "
                "service's page in Apprise's documentation (https://github.com/caronc/apprise/wiki)")
        apprise = Apprise(asset=asset)
        apprise.add(plugin)
        found.append(Channel(number, service, channel_key(url), apprise))
    return found


@register("webhooks")
def moderator_channels_are_usable(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Run as `run_webhooks` starts (it imports this module): a mistyped URL stops it, naming the setting."""
    try:
        channels(settings.BOUNTY_MODERATOR_NOTIFY_URLS)
    except ImproperlyConfigured as error:
        return [Error(str(error), id="webhooks.E001")]
    return []


# ---------------------------------------------------------------------------- the notices


@dataclass(frozen=True)
class Waiting:
    """A dispute pending review, as a message names it."""

    pk: int  # its row's, for the link to its review page
    dispute_id: int
    bounty_id: int
    since: datetime


@dataclass(frozen=True)
class Notice:
    pk: int
    kind: str
    told: frozenset[str]
    dispute: Waiting | None = None
    endpoint_id: int | None = None
    text: str = ""


def _note_disputes(kind: NoticeKind, disputes: QuerySet[Dispute]) -> None:
    """A notice of `kind` for each of `disputes` that has none (whichever worker writes it first)."""
    noted = ModeratorNotice.objects.filter(kind=kind, deployment=OuterRef("deployment"),
                                           dispute_id=OuterRef("dispute_id"))
    # In one order in every worker: two inserting the same rows wait for each other, never deadlock.
    new = disputes.filter(~Exists(noted)).order_by("deployment_id", "dispute_id").values_list("deployment_id",
                                                                                            "dispute_id")
    ModeratorNotice.objects.bulk_create([ModeratorNotice(kind=kind, deployment_id=deployment, dispute_id=dispute)
                                         for deployment, dispute in new], ignore_conflicts=True, batch_size=500)


@dataclass(frozen=True)
class Claim:
    owner: str
    until: datetime
    notices: list[Notice]


def claim(owner: str, disabled: list[notices.EndpointDisabled]) -> Claim:
    """Notes what is new (in the database thread) and claims every notice not done that no other
    worker holds (rows another worker is claiming are skipped, not waited for). Notices of
    disputes that left review meanwhile are done without being sent."""
    now = timezone.now()
    until = now + timedelta(seconds=settings.BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS + CLAIM_MARGIN_SECONDS)
    pending = Dispute.objects.filter(status=DisputeStatus.PENDING_HUMAN_REVIEW)
    overdue = now - timedelta(hours=settings.BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS)
    with transaction.atomic():
        _note_disputes(NoticeKind.REVIEW, pending)
        _note_disputes(NoticeKind.OVERDUE, pending.filter(created_at__lte=overdue))
        ModeratorNotice.objects.bulk_create([
            ModeratorNotice(kind=NoticeKind.ENDPOINT_DISABLED, endpoint_id=notice.endpoint_id,
                            text=notice.text[:400], created_at=notice.at)
            for notice in disabled])
        free = list(ModeratorNotice.objects.select_for_update(skip_locked=True).filter(done=False)
                    .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)).order_by("pk"))
        ModeratorNotice.objects.filter(pk__in=[row.pk for row in free]).update(claimed_by=owner, claimed_until=until)
        waiting = _waiting(free)
        claimed, moot = [], []
        for row in free:
            if row.dispute_id is None:
                claimed.append(Notice(row.pk, row.kind, frozenset(row.told), endpoint_id=row.endpoint_id,
                                      text=row.text))
            elif (dispute := waiting.get((row.deployment_id, row.dispute_id))) is not None:
                claimed.append(Notice(row.pk, row.kind, frozenset(row.told), dispute=dispute))
            else:
                moot.append(row.pk)
        ModeratorNotice.objects.filter(pk__in=moot).update(done=True, claimed_by="", claimed_until=None)
    return Claim(owner, until, claimed)


def _waiting(rows: list[ModeratorNotice]) -> dict[tuple[int | None, int], Waiting]:
    """The disputes of these notices still pending review, by their on-chain identity."""
    wanted = {(row.deployment_id, row.dispute_id) for row in rows if row.dispute_id is not None}
    if not wanted:
        return {}
    found = (Dispute.objects.filter(status=DisputeStatus.PENDING_HUMAN_REVIEW,
                                    deployment_id__in={deployment for deployment, _ in wanted},
                                    dispute_id__in={dispute for _, dispute in wanted})
             .values_list("pk", "deployment_id", "dispute_id", "bounty_id", "created_at"))
    return {(deployment, dispute): Waiting(pk, dispute, bounty, since)
            for pk, deployment, dispute, bounty, since in found if (deployment, dispute) in wanted}


def settle(claimed: Claim, took: dict[str, set[int]], keys: frozenset[str]) -> None:
    """Writes down which channels took which notices and hands the claims back (in the database
    thread); a notice every configured channel took is done. A claim that lapsed meanwhile is
    another worker's now, and left to it."""
    outcomes: dict[tuple[frozenset[str], bool], list[int]] = defaultdict(list)
    for notice in claimed.notices:
        told = notice.told | {key for key, taken in took.items() if notice.pk in taken}
        outcomes[(told, keys <= told)].append(notice.pk)
    with transaction.atomic():
        for (told, done), pks in outcomes.items():
            ModeratorNotice.objects.filter(pk__in=pks, claimed_by=claimed.owner, claimed_until=claimed.until).update(
                told=sorted(told), done=done, claimed_by="", claimed_until=None)


# ---------------------------------------------------------------------------- the message


@dataclass(frozen=True)
class Message:
    title: str
    body: str


def _link(url_name: str, *args: int) -> str:
    return f"{settings.BOUNTY_ADMIN_BASE_URL}{reverse(url_name, args=args)}"


def _when(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def _dispute_line(waiting: Waiting, now: datetime | None = None) -> str:
    line = f"- dispute {waiting.dispute_id} (bounty {waiting.bounty_id}), waiting since {_when(waiting.since)}"
    if now is not None:
        line += f" ({(now - waiting.since).total_seconds() / 3600:.0f} h)"
    return f"{line}: {_link('admin:records_dispute_review', waiting.pk)}"


def message(notices_: Iterable[Notice], now: datetime) -> Message:
    """One message for the notices (a channel's in one window): the disputes waiting past the
    threshold, those that entered review (a dispute in both is listed once, as overdue), the
    endpoints disabled; at most BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS lines, then how many more."""
    overdue: dict[int, Waiting] = {}
    entered: dict[int, Waiting] = {}
    endpoints: list[Notice] = []
    for notice in notices_:
        if notice.dispute is None:
            endpoints.append(notice)
        elif notice.kind == NoticeKind.OVERDUE:
            overdue[notice.dispute.pk] = notice.dispute
        else:
            entered[notice.dispute.pk] = notice.dispute
    for pk in overdue:
        entered.pop(pk, None)
    hours = settings.BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS
    sections = [
        (f"Waiting for review over {hours} h:",
         [_dispute_line(w, now) for w in sorted(overdue.values(), key=lambda w: (w.since, w.pk))]),
        ("Entered review:", [_dispute_line(w) for w in sorted(entered.values(), key=lambda w: (w.since, w.pk))]),
        ("Webhook endpoints disabled:",
         [f"- {n.text}. Re-enable it once it answers: {_link('admin:webhooks_endpoint_change', n.endpoint_id)}"
          for n in endpoints if n.endpoint_id is not None]),
    ]
    room = settings.BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS
    paragraphs = []
    for heading, lines in sections:
        if lines and room > 0:
            paragraphs.append("\n".join([heading, *lines[:room]]))
        room -= len(lines)
    if room < 0:
        paragraphs.append(f"… and {-room} more. The review queue: "
                          f"{_link('admin:records_disputereviewqueue_changelist')}")
    counts = [(len(overdue), f"dispute waiting over {hours} h", f"disputes waiting over {hours} h"),
              (len(entered), "dispute entered review", "disputes entered review"),
              (len(endpoints), "webhook endpoint disabled", "webhook endpoints disabled")]
    title = ", ".join(f"{count} {one if count == 1 else many}" for count, one, many in counts if count)
    return Message(f"Bounty moderation: {title}", "\n\n".join(paragraphs))


# ---------------------------------------------------------------------------- sending


def _send(channel: Channel, message: Message, timeout: float) -> str | None:
    """Sends the message to the channel (in a thread: Apprise blocks); None when the channel took
    it, else why not, in words that hold no URL."""
    from apprise import NotifyFormat

    try:
        result = channel.apprise.notify(message.body, title=message.title, body_format=NotifyFormat.TEXT,
                                        timeout=timeout)
    except Exception as error:  # its message may name the URL
        return type(error).__name__
    return None if result else result.status.name.lower()


async def deliver(channel: Channel, message: Message) -> bool:
    """Whether the channel took the message, within BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS."""
    timeout = settings.BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS
    try:
        async with asyncio.timeout(timeout + 1):  # Apprise keeps to its own; this in case it does not
            failure = await asyncio.to_thread(_send, channel, message, timeout)
    except TimeoutError:
        failure = "timeout"
    if failure is not None:
        logger.warning("%s did not take the moderators' message (%s); it is sent again in the next window",
                       channel, failure)
        return False
    logger.info("%s was told: %s", channel, message.title.removeprefix("Bounty moderation: "))
    return True


# ---------------------------------------------------------------------------- the watcher


class Watcher:
    """One worker's rounds, one a window; its reads and writes in a database thread of its own."""

    def __init__(self, found: list[Channel]) -> None:
        self.channels = found
        self.keys = frozenset(channel.key for channel in found)
        self.owner = worker_name()
        self._db = DatabaseThread("moderation-db", "moderators are told once it is back")

    async def round(self) -> None:
        """Claims what is new or was not taken, sends each channel what it has not taken, writes down
        which channel took what. A database that fails costs a window: nothing is lost."""
        disabled = notices.take()
        try:
            claimed = await self._db.run(claim, self.owner, disabled)
        except DatabaseError as error:
            notices.give_back(disabled)
            self._db.down(error)
            return
        self._db.back()
        if not claimed.notices:
            return
        now = timezone.now()
        owed = {channel.key: [n for n in claimed.notices if channel.key not in n.told] for channel in self.channels}
        due = [channel for channel in self.channels if owed[channel.key]]
        outcomes = await asyncio.gather(*(deliver(channel, message(owed[channel.key], now)) for channel in due))
        took = {channel.key: {n.pk for n in owed[channel.key]} for channel, ok in zip(due, outcomes, strict=True) if ok}
        try:
            await self._db.run(settle, claimed, took, self.keys)
        except DatabaseError as error:  # the claims lapse: sent again, at least once
            self._db.down(error)

    async def close(self) -> None:
        try:
            await self._db.run(_close_connection)
        finally:
            self._db.shutdown()


def _close_connection() -> None:
    connection.close()  # the database thread's (`connection` is per thread)


async def watch_disputes(stop: asyncio.Event) -> None:
    """Tells the moderators' channels, once a window, until `stop`; waits for `stop` when there
    are none (BOUNTY_MODERATOR_NOTIFY_URLS unset)."""
    try:  # in a thread: Apprise takes a second to load its services where the system check did not
        found = await asyncio.to_thread(channels, settings.BOUNTY_MODERATOR_NOTIFY_URLS)
    except ImproperlyConfigured as error:  # the system check stops run_webhooks first, unless skipped
        logger.error("%s; moderators are not told of disputes until it is fixed", error)
        found = []
    if not found:
        await stop.wait()
        return
    watcher = Watcher(found)
    try:
        while not stop.is_set():
            try:
                await watcher.round()
            except Exception:
                logger.exception("a round of the moderators' notifications failed; trying again next window")
            try:
                async with asyncio.timeout(settings.BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS):
                    await stop.wait()
            except TimeoutError:
                pass
    finally:
        await watcher.close()
