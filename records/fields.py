"""Model fields for chain values that must behave the same on SQLite and PostgreSQL.

- `UInt256Field`: an exact unsigned 256-bit integer. SQLite's NUMERIC affinity turns integers
  above 2^63 into lossy floats, so the value is stored as a zero-padded 78-digit decimal string
  on every backend: exact, and ordered as a number by a plain text comparison.
- `AddressField` / `Bytes32Field`: `0x`-prefixed hex stored lowercase, so equality, filters and
  ordering ignore letter case. Output formatting (EIP-55) is the serializer's job.

Text of these fields is compared byte-wise on PostgreSQL too (collation "C"), which is what
SQLite's default BINARY collation does; the same holds for `OrderedTextField`, for free text
that is sorted on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.core import checks, exceptions
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from records.dialect import dialect

UINT256_MAX = 2**256 - 1
UINT256_DIGITS = len(str(UINT256_MAX))  # 78

if TYPE_CHECKING:
    _TextBase = models.TextField[str, str]
    _UIntBase = models.CharField[int | str, int]
    _HexBase = models.CharField[str, str]
else:
    _TextBase, _UIntBase, _HexBase = models.TextField, models.CharField, models.CharField

_HEX_ADDRESS = re.compile(r"0x[0-9a-f]{40}")
_HEX_BYTES32 = re.compile(r"0x[0-9a-f]{64}")


class _BytewiseCollationMixin:
    """Compare and sort byte-wise on PostgreSQL, as SQLite's BINARY collation does."""

    def db_parameters(self, connection: BaseDatabaseWrapper) -> dict[str, Any]:
        params: dict[str, Any] = super().db_parameters(connection)  # type: ignore[misc]
        if (collation := dialect(connection).bytewise_collation) is not None:
            params["collation"] = collation
        return params


class OrderedTextField(_BytewiseCollationMixin, _TextBase):
    """Free text that sorts identically (by code point) on SQLite and PostgreSQL."""


class UInt256Field(_BytewiseCollationMixin, _UIntBase):
    """An exact integer in [0, 2^256-1]; Python value `int`."""

    description = "Unsigned 256-bit integer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["max_length"] = UINT256_DIGITS
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        del kwargs["max_length"]
        return name, path, args, kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [message for message in super().check(**kwargs) if message.id != "fields.E120"]

    def to_python(self, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool):
            raise exceptions.ValidationError("a uint256 must be an integer, not a boolean", code="invalid")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise exceptions.ValidationError(f"{value!r} is not an integer", code="invalid") from None
        if not 0 <= number <= UINT256_MAX:
            raise exceptions.ValidationError(f"{number} is outside 0 .. 2^256-1", code="out_of_range")
        return number

    def from_db_value(self, value: str | None, expression: Any, connection: BaseDatabaseWrapper) -> int | None:
        return None if value is None else int(value)

    def get_prep_value(self, value: Any) -> str | None:
        number = self.to_python(value)
        return None if number is None else str(number).zfill(UINT256_DIGITS)

    def formfield(self, **kwargs: Any) -> Any:
        from django import forms

        return forms.CharField(max_length=UINT256_DIGITS, **kwargs)


class _HexField(_BytewiseCollationMixin, _HexBase):
    pattern: re.Pattern[str]
    length: int
    what: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["max_length"] = self.length
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        del kwargs["max_length"]
        return name, path, args, kwargs

    def to_python(self, value: Any) -> str | None:
        if value is None:
            return None
        text = str(value).lower()
        if not self.pattern.fullmatch(text):
            raise exceptions.ValidationError(f"{value!r} is not {self.what}", code="invalid")
        return text

    def get_prep_value(self, value: Any) -> str | None:
        return self.to_python(value)


class AddressField(_HexField):
    """An EVM address, stored as 0x + 40 lowercase hex digits."""

    description = "EVM address"
    pattern = _HEX_ADDRESS
    length = 42
    what = "an address (0x followed by 40 hex digits)"


class Bytes32Field(_HexField):
    """A 32-byte value (hash), stored as 0x + 64 lowercase hex digits."""

    description = "32-byte hex value"
    pattern = _HEX_BYTES32
    length = 66
    what = "a 32-byte hex value (0x followed by 64 hex digits)"
