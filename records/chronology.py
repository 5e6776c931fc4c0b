"""Whether a deployment's records of a kind are in chain order: `created_at` never decreases as
the on-chain ID rises.

The indexer creates records from logs in chain order and stamps each with its block's time, so
this holds for every deployment it writes, and it keeps `Deployment.<kind>_in_chain_order` up to
date (clearing it should a batch ever break the rule). The read side relies on the flag for deep
pages sorted by `created_at`: in chain order, a record's position in that order follows from its
ID (records.selectors)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.sql.compiler import SQLCompiler

from records.kinds import KINDS

if TYPE_CHECKING:
    from django.db.models.sql.compiler import _AsSqlType

    _Condition = models.Lookup[bool]
else:
    _Condition = models.Lookup



def out_of_order(model: type[Any], id_field: str, deployment_id: int, using: str = "default") -> bool:
    """True if some record of the deployment is older than the record before it by ID (one pass
    over the deployment's records of `model`, a current or historical model)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    table, key = quote(model._meta.db_table), quote(id_field)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM (SELECT created_at, LAG(created_at) OVER (ORDER BY {key}) AS previous "
            f"FROM {table} WHERE deployment_id = %s) AS ordered WHERE created_at < previous LIMIT 1",
            [deployment_id],
        )
        return cursor.fetchone() is not None


def refresh_in_chain_order(apps: Any, using: str = "default") -> None:
    """Sets every deployment's flags from its records (for a data migration: `apps` gives the
    models, current or historical)."""
    deployments = apps.get_model("records", "Deployment")
    for deployment in deployments.objects.using(using).all():
        flags = {kind.in_chain_order_field: not out_of_order(apps.get_model("records", kind.model_name),
                                                             kind.id_field, deployment.pk, using)
                 for kind in KINDS}
        deployments.objects.using(using).filter(pk=deployment.pk).update(**flags)


class EpochMicroseconds(models.Func):
    """A datetime column as whole microseconds since 1970 (UTC): exact, ordered as the column is,
    and cheaper to read than a datetime when many are compared and none is shown."""

    output_field = models.BigIntegerField()

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper,
                      **extra: Any) -> _AsSqlType:
        # EXTRACT gives an exact numeric (PostgreSQL 14 and later)
        return self.as_sql(compiler, connection, template="(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint",
                           **extra)

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper,
                  **extra: Any) -> _AsSqlType:
        # Django stores UTC as 'YYYY-MM-DD HH:MM:SS' and, unless zero, '.ffffff' (six digits)
        template = ("(CAST(strftime('%%%%s', substr(%(expressions)s, 1, 19)) AS INTEGER) * 1000000"
                    " + CAST(substr(%(expressions)s, 21, 6) AS INTEGER))")
        return self.as_sql(compiler, connection, template=template, **extra)


class AnyOf(_Condition):
    """`AnyOf(F("bounty_id"), [ids])`: one array parameter on PostgreSQL (`= ANY(%s)`) rather
    than a placeholder per value, which Django and psycopg would each process one by one."""

    lookup_name = "any_of"
    prepare_rhs = False

    def get_prep_lookup(self) -> list[int]:
        return [int(value) for value in self.rhs]

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> _AsSqlType:
        lhs, params = self.process_lhs(compiler, connection)
        return f"{lhs} IN ({', '.join(['%s'] * len(self.rhs))})", (*params, *self.rhs)

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> _AsSqlType:
        lhs, params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s)", (*params, self.rhs)
