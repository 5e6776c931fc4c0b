"""`manage.py prune_changelog` (indexer.changelog): change-log entries older than the retention
go, oldest first and only as a run from the oldest, so what is left stays gap-free; a reader
that needed what went is told so (records.ws.feed.ChangesGone) instead of skipping it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.utils import timezone

from indexer.changelog import Pruned, prune_change_log
from indexer.models import ChangeLogEntry
from records.changes import MessageType
from records.history import Position
from records.models import Deployment
from records.selectors import changes_between, genesis_position
from records.ws import feed
from tests.factories import make_deployment
from tests.history import append_changes

pytestmark = pytest.mark.django_db(transaction=True)  # the feed reads on its own thread


def resume_point(since: str) -> int | None:
    """records.ws.feed.resume_point, from a test's thread (as a websocket consumer awaits it)."""
    return async_to_sync(feed.resume_point)(since)

NOW = timezone.now()


def _log(deployment: Deployment, ages_in_days: Sequence[float]) -> dict[int, Position]:
    """Entries of seqs 1, 2, ... as the indexer writes them, dated that many days ago; the
    position after each, by seq."""
    last = len(ages_in_days)
    append_changes(deployment, [(MessageType.BOUNTY_CREATED, {"id": seq}, seq) for seq in range(1, last + 1)])
    for seq, age in enumerate(ages_in_days, start=1):
        ChangeLogEntry.objects.filter(deployment=deployment, seq=seq).update(created_at=NOW - timedelta(days=age))
    return {change.seq: change.position for change in changes_between(deployment.pk, 1, last, last)}


def _seqs(deployment: Deployment) -> list[int]:
    return list(ChangeLogEntry.objects.filter(deployment=deployment).order_by("seq").values_list("seq", flat=True))


def test_entries_older_than_the_cutoff_go_in_every_deployment_and_newer_stay() -> None:
    one, other = make_deployment(chain_id=1), make_deployment(chain_id=2)
    _log(one, [40, 35, 31, 29, 1])
    _log(other, [2, 1])
    result = prune_change_log(NOW - timedelta(days=30))
    assert result == [Pruned(one.pk, 3, 4), Pruned(other.pk, 0, 1)]
    assert _seqs(one) == [4, 5] and _seqs(other) == [1, 2]


def test_only_the_oldest_run_goes_so_that_no_gap_opens() -> None:
    deployment = make_deployment()
    _log(deployment, [40, 10, 40, 40])  # a clock set back: seq 3 looks older than seq 2
    assert prune_change_log(NOW - timedelta(days=30)) == [Pruned(deployment.pk, 1, 2)]
    assert _seqs(deployment) == [2, 3, 4]


def test_it_deletes_in_batches_until_the_old_run_ends() -> None:
    deployment = make_deployment()
    _log(deployment, [50] * 10 + [1])
    assert prune_change_log(NOW - timedelta(days=30), batch=3) == [Pruned(deployment.pk, 10, 11)]
    assert _seqs(deployment) == [11]


def test_the_newest_entry_stays_however_old_so_that_an_up_to_date_client_resumes(settings: object) -> None:
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = (  # type: ignore[attr-defined]
        deployment.chain_id, deployment.contract_address)
    newest = _log(deployment, [50, 50])[2]
    assert prune_change_log(NOW - timedelta(days=30)) == [Pruned(deployment.pk, 1, 2)]
    assert _seqs(deployment) == [2]
    append_changes(deployment, [(MessageType.BOUNTY_UPDATED, {"id": 1}, 3)])  # the first change in a month
    assert resume_point(str(newest)) == 3


def test_the_command_keeps_the_configured_days_and_a_dry_run_deletes_nothing(settings: object) -> None:
    deployment = make_deployment()
    _log(deployment, [9, 8, 2])
    out = StringIO()
    call_command("prune_changelog", "--keep-days", "5", "--dry-run", stdout=out)
    assert f"deployment {deployment.pk}: would delete 2 entries" in out.getvalue()
    assert _seqs(deployment) == [1, 2, 3]
    call_command("prune_changelog", "--keep-days", "5", stdout=StringIO())
    assert _seqs(deployment) == [3]
    settings.BOUNTY_CHANGELOG_KEEP_DAYS = 1  # type: ignore[attr-defined]
    out = StringIO()
    call_command("prune_changelog", stdout=out)
    assert "deleted 0 entries" in out.getvalue() and "(oldest kept seq 3)" in out.getvalue()  # the newest stays


def test_the_command_refuses_less_than_a_day() -> None:
    with pytest.raises(CommandError, match="at least 1"):
        call_command("prune_changelog", "--keep-days", "0")


def test_a_reader_of_pruned_seqs_is_told_they_are_gone_and_a_resume_from_there_gets_a_snapshot(
        settings: object) -> None:
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = (  # type: ignore[attr-defined]
        deployment.chain_id, deployment.contract_address)
    positions = _log(deployment, [40, 40, 1, 1])
    genesis = str(genesis_position(deployment.pk))
    assert resume_point(genesis) == 1
    prune_change_log(NOW - timedelta(days=30))
    with pytest.raises(feed.ChangesGone):
        feed.read_changes(deployment.pk, 1, 4)
    assert [seq for seq, _, _ in feed.read_changes(deployment.pk, 3, 4)] == [3, 4]
    assert resume_point(genesis) is None  # a snapshot instead
    assert resume_point(str(positions[2])) is None  # its own entry pruned: none vouches for it
    assert resume_point(str(positions[3])) == 4
    assert resume_point("3") is None  # a bare seq names no history: a snapshot
