"""A batch's write plan for the record tables (`Writes`), and the records it creates (`new_record`).

`RecordStore.render` (indexer.store) puts in a `Writes` everything a batch writes to the record
tables, each row already rendered: the deployment's record totals, the removals, the updates and
the inserts. `write` sends them in the caller's transaction, through indexer.bulk; a bulk
backfill renders them in one process and writes them from another (`converted`).

`new_record` builds the records the transitions create (indexer.transitions) without
`Model.__init__`, which is most of a backfill's in-memory work otherwise (the figure is beside it).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import models
from django.db.models import F
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from indexer.bulk import RowStream, convert_rows, insert_rows, update_rows
from records.kinds import BY_NAME, Kind
from records.models import Deployment

_M = TypeVar("_M", bound=models.Model)


@dataclass
class Writes:
    """A batch's writes to the record tables, rendered: `write` sends them (in the caller's
    transaction), possibly from another thread than the one that rendered them."""

    deployment: Deployment
    deltas: dict[Kind, int] = field(default_factory=dict)
    removals: list[tuple[type[Any], str, list[int]]] = field(default_factory=list)
    updates: list[tuple[type[Any], tuple[str, str], list[str], Sequence[Sequence[Any]]]] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    inserts: list[tuple[type[Any], list[str], Sequence[Sequence[Any]]]] = field(default_factory=list)

    def converted(self) -> Writes:
        """These writes with their rows' values converted for the database ahead (bulk.convert_rows)."""
        return dataclasses.replace(
            self,
            updates=[(model, keys, names, convert_rows(model, [*keys, *names], rows))
                     for model, keys, names, rows in self.updates],
            inserts=[(model, columns, convert_rows(model, columns, rows)) for model, columns, rows in self.inserts],
        )

    def write(self, stream: RowStream | None = None) -> None:
        """Sends the writes; the inserts through `stream` when given."""
        deployment = Deployment.objects.filter(pk=self.deployment.pk)
        if any(self.deltas.values()):
            totals = {BY_NAME[kind].total_field: delta for kind, delta in self.deltas.items() if delta}
            deployment.update(**{name: F(name) + delta for name, delta in totals.items()})
        for model, id_field, gone in self.removals:
            model.objects.filter(deployment=self.deployment, **{f"{id_field}__in": gone}).delete()
        for model, keys, names, rows in self.updates:
            update_rows(model, keys, names, rows)
        if self.out_of_order:  # before `stream` owns the connection
            deployment.update(**dict.fromkeys(self.out_of_order, False))
        for model, columns, rows in self.inserts:
            if stream is not None:
                stream.insert(model, columns, rows)
            else:
                insert_rows(model, columns, rows)


# Measured: 50,000 bounties with the fields apply_bounty_created gives, built by `new_record` in
# 0.30 s and by `Bounty(**values)` in 1.57 s (5.3 times as long), the best of five runs of
# timeit each (Python 3.11, Django 5; the values made beforehand, outside the timing).
def new_record(model: type[_M], **values: Any) -> _M:
    """A new record from its field values by attname, the rest at their defaults.

    What `Model.__init__` does for attnames, without its per-field checks and its pre_init and
    post_init signals (no receiver for these models): a fifth of its cost (measured above),
    which is a large part of a backfill's in-memory work."""
    listened = (pre_init.receivers or post_init.receivers) and (
        pre_init.has_listeners(model) or post_init.has_listeners(model))
    if listened:
        arguments = [values[f.attname] if f.attname in values else f.get_default() for f in model._meta.concrete_fields]
        construct: Callable[..., _M] = model  # the stubs' plugin reads *args as the primary key
        return construct(*arguments)
    record = model.__new__(model)
    record._state = ModelState()
    fields = record.__dict__
    constants, computed = _defaults(model)
    fields.update(constants)
    fields.update(values)
    for field_ in computed:
        if field_.attname not in values:
            fields[field_.attname] = field_.get_default()
    return record


@functools.cache
def _defaults(model: type[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The model's fields' defaults: those that are constants (immutable, so shared), by attname,
    and the fields whose default is computed per record."""
    constants, computed = {}, []
    for field_ in model._meta.concrete_fields:
        if field_.has_default() and callable(field_.default):
            computed.append(field_)
        else:
            constants[field_.attname] = field_.get_default()
    return constants, computed
