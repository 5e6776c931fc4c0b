"""Template filters for showing chain values to moderators."""

from __future__ import annotations

from django import template

from records.representation import checksum_address

register = template.Library()


@register.filter
def checksum(address: str) -> str:
    """An address in EIP-55 form."""
    return checksum_address(address)


@register.filter
def usdc(amount: int) -> str:
    """USDC base units as `1,234.500000 USDC (1234500000)`."""
    whole, fraction = divmod(int(amount), 10**6)
    return f"{whole:,}.{fraction:06d} USDC ({amount})"
