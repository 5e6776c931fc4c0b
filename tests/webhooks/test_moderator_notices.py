"""Moderators told when disputes wait for them (webhooks.moderation): `watch_disputes`, as
run_webhooks runs it, sends a real receiver process (tests.webhooks.receiver) Apprise's `json://`
messages, one a window, each listing what the channel was not told yet with the admin links."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from contracts.devchain import free_port
from records.models import Deployment, Dispute, DisputeStatus
from tests.factories import make_bounty, make_deployment, make_dispute, make_submission, set_status
from tests.servers import PROJECT_DIR, Log, database_url, stop
from tests.settings.test_settings import PRODUCTION, manage
from tests.webhooks.conftest import ReceiverProcess, wait_until
from webhooks import notices
from webhooks.models import ModeratorNotice, NoticeKind
from webhooks.moderation import Notice, Waiting, message, watch_disputes

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "https://bounties.example.org"
TOKEN = "s3cr3t-t0ken"  # in the channel's URL, as a Slack or Telegram URL holds one
WINDOW = 0.2  # seconds


def channel_url(receiver: ReceiverProcess, name: str) -> str:
    return f"json://127.0.0.1:{receiver.port}/hook/{name}-{TOKEN}"


@pytest.fixture
def moderators(settings: Any, receiver: ReceiverProcess) -> ReceiverProcess:
    """The receiver as the moderators' one channel, `mods`, with a short window."""
    settings.BOUNTY_MODERATOR_NOTIFY_URLS = [channel_url(receiver, "mods")]
    settings.BOUNTY_ADMIN_BASE_URL = BASE
    settings.BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS = WINDOW
    settings.BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS = 2
    settings.BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS = 24
    settings.BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS = 20
    notices.take()  # none left by another test
    return receiver


@contextmanager
def watching() -> Iterator[None]:
    """`watch_disputes` on an event loop of its own, as run_webhooks runs it, until the block ends."""
    started = threading.Event()
    running: dict[str, Any] = {}

    async def main() -> None:
        running["loop"], running["stop"] = asyncio.get_running_loop(), asyncio.Event()
        started.set()
        await watch_disputes(running["stop"])

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield
    finally:
        running["loop"].call_soon_threadsafe(running["stop"].set)
        thread.join(10)
        assert not thread.is_alive()


def messages(receiver: ReceiverProcess, name: str = "mods") -> list[dict[str, Any]]:
    """What the channel received: Apprise's JSON (`title`, `message`, `type`)."""
    return [json.loads(delivery["body"]) for delivery in receiver.deliveries(f"{name}-{TOKEN}")]


def wait_for_messages(receiver: ReceiverProcess, count: int, name: str = "mods") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wait_until(lambda: len(m := messages(receiver, name)) >= count and m,
                                             what=f"{count} messages to {name}")
    time.sleep(5 * WINDOW)  # windows that must send nothing more
    assert len(messages(receiver, name)) == count, messages(receiver, name)
    return found


def entering_review(count: int, deployment: Deployment | None = None, **fields: Any) -> list[Dispute]:
    """`count` disputes that entered review in one indexer commit (now, unless `created_at` says)."""
    fields.setdefault("created_at", timezone.now())
    with transaction.atomic():
        submission = make_submission(make_bounty(deployment or make_deployment()))
        return [make_dispute(submission, **fields) for _ in range(count)]


def review_link(dispute: Dispute) -> str:
    return BASE + reverse("admin:records_dispute_review", args=[dispute.pk])


def test_three_disputes_that_entered_review_together_make_one_message_with_their_links(
        moderators: ReceiverProcess) -> None:
    disputes = entering_review(3)
    with watching():
        [told] = wait_for_messages(moderators, 1)
        assert told["title"] == "Bounty moderation: 3 disputes entered review"
        for dispute in disputes:
            assert (f"dispute {dispute.dispute_id} (bounty {dispute.bounty_id}), waiting since "
                    f"{dispute.created_at:%Y-%m-%d %H:%M} UTC: {review_link(dispute)}") in told["message"]
        assert not ModeratorNotice.objects.filter(done=False).exists()

        [later] = entering_review(1)
        second = wait_for_messages(moderators, 2)[1]
        assert second["title"] == "Bounty moderation: 1 dispute entered review"
        assert review_link(later) in second["message"]
        assert not any(review_link(dispute) in second["message"] for dispute in disputes)


def test_a_dispute_waiting_past_the_threshold_is_told_once_more_as_overdue(moderators: ReceiverProcess) -> None:
    [dispute] = entering_review(1)
    with watching():
        wait_for_messages(moderators, 1)
        Dispute.objects.filter(pk=dispute.pk).update(created_at=timezone.now() - timedelta(hours=25))
        overdue = wait_for_messages(moderators, 2)[1]
    assert overdue["title"] == "Bounty moderation: 1 dispute waiting over 24 h"
    assert f"(25 h): {review_link(dispute)}" in overdue["message"]


def test_a_dispute_already_overdue_when_first_seen_is_listed_once_as_overdue(moderators: ReceiverProcess) -> None:
    [old] = entering_review(1, created_at=timezone.now() - timedelta(hours=30))
    [new] = entering_review(1)
    with watching():
        [told] = wait_for_messages(moderators, 1)
    assert told["title"] == "Bounty moderation: 1 dispute waiting over 24 h, 1 dispute entered review"
    assert told["message"].count(review_link(old)) == 1
    assert told["message"].index(review_link(old)) < told["message"].index(review_link(new))


def test_a_dispute_resolved_before_its_window_is_not_told(moderators: ReceiverProcess) -> None:
    [resolved, waiting] = entering_review(2)
    set_status(resolved, DisputeStatus.UPHELD)
    with watching():
        [told] = wait_for_messages(moderators, 1)
    assert review_link(waiting) in told["message"]
    assert review_link(resolved) not in told["message"]


def test_a_re_index_tells_nobody_again(moderators: ReceiverProcess) -> None:
    disputes = entering_review(2)
    with watching():
        wait_for_messages(moderators, 1)
        # The indexer rewrites the rows from the chain: new rows, the same on-chain identities.
        with transaction.atomic():
            submission = disputes[0].submission
            Dispute.objects.filter(pk__in=[d.pk for d in disputes]).delete()
            for dispute in disputes:
                make_dispute(submission, dispute_id=dispute.dispute_id, created_at=dispute.created_at)
        time.sleep(5 * WINDOW)
    assert len(messages(moderators)) == 1


def test_a_channel_down_is_sent_what_it_missed_in_the_next_window(
        moderators: ReceiverProcess, caplog: pytest.LogCaptureFixture) -> None:
    moderators.kill()
    disputes = entering_review(3)
    with watching():
        wait_until(lambda: sum("did not take" in r.getMessage() for r in caplog.records) >= 2,
                   what="two windows that failed")
        assert ModeratorNotice.objects.filter(done=False).count() == 3
        back = ReceiverProcess(moderators.port)
        back.start()
        try:
            [told] = wait_for_messages(back, 1)
        finally:
            back.kill()
    assert all(review_link(dispute) in told["message"] for dispute in disputes)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("webhooks"))
    assert ("channel 1 of BOUNTY_MODERATOR_NOTIFY_URLS (json://) did not take the moderators' message (failure); "
            "it is sent again in the next window") in ours
    assert "channel 1 of BOUNTY_MODERATOR_NOTIFY_URLS (json://) was told: 3 disputes entered review" in ours
    assert TOKEN not in ours


def test_run_webhooks_tells_the_channel_and_logs_no_url_even_at_debug(receiver: ReceiverProcess) -> None:
    """As shipped: the process's log (Apprise's and urllib3's lines included, at LOG_LEVEL=DEBUG) never
    holds the channel's URL, through a failed window and the one that sends."""
    disputes = entering_review(2)
    later = ReceiverProcess(free_port())  # not listening yet
    env = {**os.environ, "DATABASE_URL": database_url(), "LOG_LEVEL": "DEBUG",
           "BOUNTY_MODERATOR_NOTIFY_URLS": f"{channel_url(later, 'mods')} {channel_url(receiver, 'also')}",
           "BOUNTY_ADMIN_BASE_URL": BASE, "BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS": "1",
           "BOUNTY_MODERATOR_NOTIFY_TIMEOUT_SECONDS": "2"}
    process = subprocess.Popen([sys.executable, "manage.py", "run_webhooks"], cwd=PROJECT_DIR, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    log = Log(process.stderr)
    try:
        wait_until(lambda: "channel 1 of BOUNTY_MODERATOR_NOTIFY_URLS (json://) did not take" in log.text(ended=False),
                   timeout=60, what="a failed window")
        later.start()
        [told] = wait_for_messages(later, 1)
    finally:
        stop(process)
        if later.process is not None:
            later.kill()
    assert process.returncode == 0
    assert len(messages(receiver, "also")) == 1
    assert all(review_link(dispute) in told["message"] for dispute in disputes)
    text = log.text(ended=True)
    assert " DEBUG " in text  # the level applied: everything was written
    assert "channel 1 of BOUNTY_MODERATOR_NOTIFY_URLS (json://) was told: 2 disputes entered review" in text
    assert TOKEN not in text
    assert "/hook/" not in text


def test_each_channel_is_sent_what_it_missed_and_the_others_nothing_twice(
        moderators: ReceiverProcess, settings: Any) -> None:
    settings.BOUNTY_MODERATOR_NOTIFY_URLS = [channel_url(moderators, "slack"), channel_url(moderators, "mail")]
    moderators.behave(f"mail-{TOKEN}", status=503)
    disputes = entering_review(2)
    with watching():
        wait_for_messages(moderators, 1, "slack")
        wait_until(lambda: len(moderators.deliveries(f"mail-{TOKEN}")) >= 2, what="two refused sends to mail")
        moderators.behave(f"mail-{TOKEN}", status=200)
        wait_until(lambda: any(d["status"] == 200 for d in moderators.deliveries(f"mail-{TOKEN}")),
                   what="mail's send taken")
        time.sleep(5 * WINDOW)
    assert len(messages(moderators, "slack")) == 1
    taken = [json.loads(d["body"]) for d in moderators.deliveries(f"mail-{TOKEN}") if d["status"] == 200]
    assert len(taken) == 1
    assert all(review_link(dispute) in taken[0]["message"] for dispute in disputes)
    assert not ModeratorNotice.objects.filter(done=False).exists()


def test_two_workers_send_one_message(moderators: ReceiverProcess) -> None:
    entering_review(3)
    with watching(), watching():
        [told] = wait_for_messages(moderators, 1)
    assert told["title"] == "Bounty moderation: 3 disputes entered review"


def test_an_endpoint_disabled_is_told_in_the_same_window_by_its_host_only(moderators: ReceiverProcess) -> None:
    [dispute] = entering_review(1)
    notices.endpoint_disabled(7, "https://hooks.example.org/in/abcdef?token=zzz", "the endpoint answered 410 Gone")
    with watching():
        [told] = wait_for_messages(moderators, 1)
    assert told["title"] == "Bounty moderation: 1 dispute entered review, 1 webhook endpoint disabled"
    assert review_link(dispute) in told["message"]
    assert ("webhook endpoint 7 (hooks.example.org) was disabled: the endpoint answered 410 Gone. Re-enable it "
            f"once it answers: {BASE}{reverse('admin:webhooks_endpoint_change', args=[7])}") in told["message"]
    assert "abcdef" not in told["message"] and "zzz" not in told["message"]


def test_without_channels_nothing_is_noted_or_queued(settings: Any) -> None:
    settings.BOUNTY_MODERATOR_NOTIFY_URLS = []
    notices.take()
    entering_review(1)
    notices.endpoint_disabled(7, "https://hooks.example.org/in", "the endpoint answered 410 Gone")
    with watching():
        time.sleep(3 * WINDOW)
    assert notices.take() == []
    assert not ModeratorNotice.objects.exists()


def test_a_message_lists_at_most_max_items_then_how_many_more(settings: Any) -> None:
    settings.BOUNTY_ADMIN_BASE_URL = BASE
    settings.BOUNTY_MODERATOR_NOTIFY_MAX_ITEMS = 2
    now = timezone.now()
    waiting = [Notice(pk, NoticeKind.REVIEW, frozenset(), dispute=Waiting(100 + pk, pk, 1, now)) for pk in range(3)]
    told = message([*waiting, Notice(9, NoticeKind.ENDPOINT_DISABLED, frozenset(), endpoint_id=4, text="endpoint 4")],
                   now)
    assert told.title == "Bounty moderation: 3 disputes entered review, 1 webhook endpoint disabled"
    assert told.body.count("- dispute") == 2
    assert "endpoint 4" not in told.body
    queue = BASE + reverse("admin:records_disputereviewqueue_changelist")
    assert told.body.endswith(f"… and 2 more. The review queue: {queue}")


@pytest.mark.parametrize(("command", "env", "said"), [
    ("run_webhooks", {"BOUNTY_MODERATOR_NOTIFY_URLS": f"json://127.0.0.1/x slack://{TOKEN}"},
     "BOUNTY_MODERATOR_NOTIFY_URLS: URL 2 (slack://…) is not one Apprise can use"),
    ("check", {"BOUNTY_MODERATOR_NOTIFY_URLS": f"{TOKEN}, json://127.0.0.1/x"},
     "BOUNTY_MODERATOR_NOTIFY_URLS must list Apprise URLs (service://…, e.g. mailtos://, slack://, json://): "
     "its item 1 is not one"),
])
def test_a_url_apprise_cannot_use_stops_the_process_naming_the_variable_not_the_url(
        tmp_path: Path, command: str, env: dict[str, str], said: str) -> None:
    result = manage(command, tmp_path=tmp_path, **PRODUCTION, BOUNTY_ADMIN_BASE_URL=BASE, **env)
    assert result.returncode != 0
    assert said in result.stderr
    assert TOKEN not in result.stderr + result.stdout


def test_channels_need_the_admins_address(tmp_path: Path) -> None:
    result = manage("check", tmp_path=tmp_path, **PRODUCTION, BOUNTY_MODERATOR_NOTIFY_URLS="json://127.0.0.1/x")
    assert result.returncode != 0
    assert "BOUNTY_MODERATOR_NOTIFY_URLS needs BOUNTY_ADMIN_BASE_URL" in result.stderr
