"""The review page and the queue: the three records, metadata checks, the prepared transaction,
and the queue's columns."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from bounty_client import TransactionBuilder
from bounty_client.deployment import Deployment as ClientDeployment
from records.models import Dispute, ModeratorNote, Submission
from records.representation import checksum_address
from tests.factories import make_deployment, make_dispute, set_status


def _builder(dispute: Dispute) -> TransactionBuilder:
    d = dispute.deployment
    return TransactionBuilder(ClientDeployment(d.chain_id, d.contract_address, d.usdc_address))


def test_the_queue_lists_pending_disputes_oldest_first(moderator_client: Client, dispute: Dispute) -> None:
    submission = Submission.objects.get()
    older = make_dispute(submission, created_at=timezone.now() - timedelta(days=3))
    newer = make_dispute(submission, created_at=timezone.now() - timedelta(hours=1))
    set_status(make_dispute(submission), "upheld")
    response = moderator_client.get(reverse("admin:records_disputereviewqueue_changelist"))
    shown = [row.dispute_id for row in response.context["cl"].result_list]
    assert shown == [d.dispute_id for d in sorted([older, newer, dispute], key=lambda d: d.created_at)]


def test_the_queue_starts_each_row_with_its_review_link(moderator_client: Client, dispute: Dispute) -> None:
    page = moderator_client.get(reverse("admin:records_disputereviewqueue_changelist")).content.decode()
    review = reverse("admin:records_dispute_review", args=[dispute.pk])
    first_cell = re.search(r'<tr>\s*<td class="field-(\w+)">(.*?)</td>', page.split('<tbody>')[1], re.S)
    assert first_cell is not None
    assert first_cell.groups() == ("review_link", f'<a href="{review}">review</a>')


@pytest.mark.parametrize("url_name", ["admin:records_disputereviewqueue_changelist",
                                      "admin:records_dispute_changelist"])
def test_lists_shorten_addresses_and_show_the_whole_on_hover(moderator_client: Client, dispute: Dispute,
                                                           url_name: str) -> None:
    page = moderator_client.get(reverse(url_name)).content.decode()
    full = checksum_address(dispute.challenger_id)
    assert f'<span class="address" title="{full}">{full[:6]}…{full[-4:]}</span>' in page
    assert f">{full}<" not in page


def test_the_queue_counts_each_disputes_notes_on_that_dispute_only(moderator_client: Client, moderator: User,
                                                                  dispute: Dispute) -> None:
    other = make_dispute(Submission.objects.get())
    elsewhere = make_deployment(contract_address="0x" + "11" * 20)
    for deployment, dispute_id in [(dispute.deployment, dispute.dispute_id)] * 2 + [(elsewhere, other.dispute_id)]:
        ModeratorNote.objects.create(deployment=deployment, dispute_id=dispute_id, author=moderator,
                                     recommendation="uphold", text="Seen elsewhere.")
    response = moderator_client.get(reverse("admin:records_disputereviewqueue_changelist"))
    assert {row.dispute_id: row.note_count for row in response.context["cl"].result_list} == {
        dispute.dispute_id: 2, other.dispute_id: 0}
    assert '<td class="field-notes">2</td>' in response.content.decode()


def test_the_queue_is_one_click_from_the_admin_index(moderator_client: Client, db: None) -> None:
    index = moderator_client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:records_disputereviewqueue_changelist") in index


def test_the_review_page_shows_the_three_records_with_checked_metadata(moderator_client: Client,
                                                                       dispute: Dispute) -> None:
    page = moderator_client.get(reverse("admin:records_dispute_review", args=[dispute.pk])).content.decode()
    for panel in ("dispute-panel", "submission-panel", "bounty-panel"):
        assert f'id="{panel}"' in page
    assert page.count("hashes to metadata_hash") == 3
    assert "Copied from elsewhere" in page and "Port the parser" in page and "Done in Rust" in page
    assert 'id="pending-for"' in page


def test_metadata_that_does_not_hash_to_the_recorded_hash_is_flagged(moderator_client: Client,
                                                                     dispute: Dispute) -> None:
    Dispute.objects.filter(pk=dispute.pk).update(metadata_hash="0x" + "ab" * 32)
    page = moderator_client.get(reverse("admin:records_dispute_review", args=[dispute.pk])).content.decode()
    assert "does NOT hash to metadata_hash" in page


def test_the_resolution_is_prepared_for_the_arbiters_wallet(moderator_client: Client, dispute: Dispute) -> None:
    response = moderator_client.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    prepared = {name: json.loads(text) for name, text in response.context["transactions_json"].items()}
    builder = _builder(dispute)
    assert prepared == {"uphold": dict(builder.resolve_dispute(dispute.dispute_id, True)),
                        "reject": dict(builder.resolve_dispute(dispute.dispute_id, False))}
    assert "Nothing changes here until the chain does" in response.content.decode()


def test_a_dispute_whose_submission_was_rejected_gets_a_cancel_transaction(moderator_client: Client,
                                                                           dispute: Dispute) -> None:
    set_status(Submission.objects.get(), "rejected")
    response = moderator_client.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    assert set(response.context["transactions_json"]) == {"cancel"}
    assert json.loads(response.context["transactions_json"]["cancel"]) == dict(
        _builder(dispute).cancel_resolved_dispute(dispute.dispute_id))
    assert "already rejected through another dispute" in response.content.decode()


def test_a_resolved_dispute_offers_no_transaction(moderator_client: Client, dispute: Dispute) -> None:
    set_status(dispute, "rejected")
    response = moderator_client.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    assert response.context["transactions_json"] == {}
    assert "already Rejected" in response.content.decode()


def test_a_review_page_of_a_removed_dispute_returns_to_the_queue(moderator_client: Client, db: None) -> None:
    response = moderator_client.get(reverse("admin:records_dispute_review", args=[999_999]))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:records_disputereviewqueue_changelist")


def test_admin_search_finds_records_by_address_in_any_case(moderator_client: Client, dispute: Dispute) -> None:
    response = moderator_client.get(reverse("admin:records_dispute_changelist"),
                                    {"q": dispute.challenger_id.upper().replace("0X", "0x")})
    assert [d.pk for d in response.context["cl"].result_list] == [dispute.pk]


def test_a_dispute_removed_while_its_review_page_is_read_returns_to_the_queue(
        moderator_client: Client, dispute: Dispute, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("records.moderation.dispute_overview", lambda deployment, dispute_id: None)  # a reorg
    response = moderator_client.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:records_disputereviewqueue_changelist")
