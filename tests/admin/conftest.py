"""Fixtures for the moderators' admin: users in each role and a dispute with inline metadata."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from bounty_client.metadata import metadata_hash, metadata_to_data_uri
from records.models import Dispute
from records.moderation import ensure_moderators_group
from tests.factories import make_bounty, make_dispute, make_submission, set_status

PASSWORD = "correct horse battery staple"


def inline(value: dict[str, Any]) -> dict[str, str]:
    return {"metadata_uri": metadata_to_data_uri(value), "metadata_hash": metadata_hash(value)}


@pytest.fixture
def moderator(db: None) -> User:
    user = User.objects.create_user("mod", password=PASSWORD, is_staff=True)
    user.groups.add(ensure_moderators_group())
    return user


@pytest.fixture
def moderator_client(moderator: User) -> Client:
    client = Client()
    client.force_login(moderator)
    return client


@pytest.fixture
def dispute(db: None) -> Dispute:
    bounty = make_bounty(None, **inline({"title": "Port the parser"}))
    submission = make_submission(bounty, **inline({"summary": "Done in Rust"}))
    set_status(submission, "disputed")
    return make_dispute(submission, **inline({"reason": "Copied from elsewhere"}))
