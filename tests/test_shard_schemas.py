"""The shards of one mapping hold one schema (commands/shards.py ``refuse_different``), and
what is computed over their union (source/shards.py): the highest key, values ordered as
MySQL orders them. Pure: schemas built here, no server."""

from __future__ import annotations

import dataclasses
import re

import pytest

from migrator.commands.shards import refuse_different, spelt
from migrator.errors import MigratorError
from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column, Schema, TableSchema
from migrator.plan.owners import finder
from migrator.source.shards import highest, sort_value


def _schema(*columns: Column, pk: tuple[str, ...] = ("id",), table: str = "t") -> Schema:
    ts = TableSchema(name=table, columns=columns, primary_key=pk, indexes=(), foreign_keys=())
    return Schema("db", {table: ts}, ())


ID = Column("id", Kind.INTEGER, False, "int(11)")
NAME = Column("name", Kind.TEXT, True, "varchar(20)")
EAST = _schema(ID, NAME)


def test_the_same_schema_spelt_by_both_engines_passes():
    refuse_different(
        "t", "east", "west", EAST, _schema(dataclasses.replace(ID, column_type="int"), NAME)
    )
    assert spelt("BIGINT(20) UNSIGNED") == "bigint unsigned"


@pytest.mark.parametrize(
    ("west", "message"),
    [
        (_schema(ID, NAME, table="u"), "shard west has no table 't'"),
        (_schema(ID), "t.name: shard west has no such column"),
        (_schema(ID, NAME, Column("x", Kind.TEXT, True, "text")), "t.x: shard west has this"),
        (_schema(ID, dataclasses.replace(NAME, column_type="varchar(30)")),
         "t.name: shard east has varchar(20), shard west has varchar(30)"),
        (_schema(ID, NAME, pk=("name",)), "the primary key is ['id'] on shard east, ['name'] on"),
    ],
)  # fmt: skip
def test_a_shard_whose_table_differs_is_named(west, message):
    with pytest.raises(MigratorError, match=re.escape(message)) as e:
        refuse_different("t", "east", "west", EAST, west)
    assert e.value.exit_code == 2


def test_the_union_orders_values_as_mysql_does():
    assert highest([b"99", b"100", None], Kind.INTEGER) == b"100"  # numbers, not bytes
    assert highest([None, None], Kind.INTEGER) is None
    assert sort_value(b"9.5", Kind.DECIMAL) < sort_value(b"10.1", Kind.DECIMAL)
    assert sort_value(b"b", Kind.TEXT) > sort_value(b"a", Kind.TEXT)


def test_the_sql_that_finds_a_colliding_row():
    assert finder("t", [("id", b"7", True)]) == "SELECT * FROM `t` WHERE `id` = 7"
    assert (
        finder("t", [("a", b"O'Neil", False), ("b", None, False)])
        == "SELECT * FROM `t` WHERE `a` = 'O''Neil' AND `b` IS NULL"
    )
