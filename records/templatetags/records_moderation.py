"""Template tags for the moderators' admin pages."""

from __future__ import annotations

from django import template

from records.selectors import review_queue_count

register = template.Library()


@register.simple_tag
def disputes_waiting_for_review() -> int:
    """How many disputes the review queue holds (every deployment's)."""
    return review_queue_count()
