"""The shards of one mapping hold one schema (commands/shards.py ``refuse_different``), and
what is computed over their union (source/shards.py): the highest key, values ordered as
MySQL orders them. Pure: schemas built here, no server."""

from __future__ import annotations

import dataclasses
import re

import pytest

from migrator.commands.shards import refuse_different
from migrator.errors import MigratorError
from migrator.mapping.kinds import Kind
from migrator.mapping.model import Table
from migrator.mapping.schema import Column, Schema, TableSchema
from migrator.mapping.shard_schemas import spelt
from migrator.plan.owners import finder
from migrator.source.order import order_key
from migrator.source.shards import highest


def _schema(*columns: Column, pk: tuple[str, ...] = ("id",), table: str = "t") -> Schema:
    ts = TableSchema(name=table, columns=columns, primary_key=pk, indexes=(), foreign_keys=())
    return Schema("db", {table: ts}, ())


ID = Column("id", Kind.INTEGER, False, "int(11)")
NAME = Column("name", Kind.TEXT, True, "varchar(20)")
EAST = _schema(ID, NAME)


def test_the_same_schema_spelt_by_both_engines_passes():
    refuse_different(
        Table("t"), "east", "west", EAST, _schema(dataclasses.replace(ID, column_type="int"), NAME)
    )
    assert spelt(dataclasses.replace(ID, column_type="BIGINT(20) UNSIGNED")) == "bigint unsigned"


@pytest.mark.parametrize(
    ("west", "message"),
    [
        (_schema(ID, NAME, table="u"), "table t is on east but not on west"),
        (_schema(ID), "column t.name is on east but not on west"),
        (_schema(ID, NAME, Column("x", Kind.TEXT, True, "text")),
         "column t.x is on west but not on east"),
        (_schema(ID, dataclasses.replace(NAME, column_type="varchar(30)")),
         "column t.name has types whose values print otherwise: varchar(20) on east, "
         "varchar(30) on west"),
        (_schema(ID, NAME, pk=("name",)), "t's primary key is (id) on east but (name) on west"),
    ],
)  # fmt: skip
def test_a_shard_whose_table_differs_is_named(west, message):
    with pytest.raises(MigratorError, match=re.escape(message)) as e:
        refuse_different(Table("t"), "east", "west", EAST, west)
    assert e.value.exit_code == 2


def test_the_union_orders_values_as_mysql_does():
    assert highest([b"99", b"100", None], Kind.INTEGER) == b"100"  # numbers, not bytes
    assert highest([None, None], Kind.INTEGER) is None
    assert highest([b"18446744073709551615", b"9"], Kind.BIT) == b"18446744073709551615"
    assert order_key(b"9.50", Kind.DECIMAL) < order_key(b"10.10", Kind.DECIMAL)
    assert order_key(b"b", Kind.TEXT) > order_key(b"a", Kind.TEXT)


def test_the_sql_that_finds_a_colliding_row():
    assert finder("t", [("id", b"7", True)]) == "SELECT * FROM `t` WHERE `id` = 7"
    assert (
        finder("t", [("a", b"O'Neil", False), ("b", None, False)])
        == "SELECT * FROM `t` WHERE `a` = 'O''Neil' AND `b` IS NULL"
    )
