"""Which unlogged foreign-key rules can bring a row into a row filter (mapping/filter_rules.py):
MySQL's three-valued logic with the key's columns NULL, or compared by value; and which tables
then keep the images of the rows their filter leaves out. Pure."""

from __future__ import annotations

import pytest

from migrator.mapping.filter_rules import (
    admitting,
    compares_values,
    keeps_left_out,
    true_with_nulls,
)
from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.schema import Column, ForeignKey, Schema, TableSchema
from migrator.mapping.where import parse

SET_NULL = ["ON DELETE SET NULL"]
UPDATE = ["ON UPDATE CASCADE"]


@pytest.mark.parametrize(
    ("text", "can"),
    [
        ("crew_id IS NULL", True),
        ("crew_id IS NOT NULL", False),
        ("crew_id IN (1, 2)", False),  # unknown for a NULL: the row is not kept
        ("crew_id NOT IN (1, 2)", False),
        ("crew_id <> 5", False),
        ("NOT crew_id = 5", False),  # NOT unknown is unknown
        ("NOT (crew_id IS NOT NULL)", True),
        ("active = 1 AND crew_id IS NOT NULL", False),
        ("active = 1 OR crew_id <> 5", True),  # true by active alone
        ("active = 1 AND (crew_id IS NULL OR crew_id = 3)", True),
        ("(crew_id = 3 OR crew_id = 4) AND active = 1", False),
        ("active = 1", True),  # but it does not read the key: admitting says no row comes in
    ],
)
def test_a_set_null_can_bring_a_row_in_where_the_filter_can_be_true_with_nulls(
    text: str, can: bool
) -> None:
    assert true_with_nulls(parse(text), ["crew_id"]) is can


def test_an_update_cascade_brings_rows_in_only_where_the_values_are_compared() -> None:
    assert compares_values(parse("crew_id IS NOT NULL AND active = 1"), ["crew_id"]) == []
    assert compares_values(parse("crew_id > 3 OR crew_id IS NULL"), ["crew_id"]) == ["crew_id"]
    assert admitting(parse("crew_id IS NOT NULL"), ["crew_id"], [*SET_NULL, *UPDATE]) == ""
    assert admitting(parse("crew_id IN (1, 2)"), ["crew_id"], SET_NULL) == ""
    assert admitting(parse("crew_id IN (1, 2)"), ["crew_id"], UPDATE) == "ON UPDATE CASCADE"
    assert admitting(parse("crew_id IS NULL"), ["crew_id"], SET_NULL) == "ON DELETE SET NULL"
    # a delete takes rows out only; a filter on other columns is never moved by the rule
    assert admitting(parse("crew_id IS NULL"), ["crew_id"], ["ON DELETE CASCADE"]) == ""
    assert admitting(parse("active = 1"), ["crew_id"], [*SET_NULL, *UPDATE]) == ""


def test_a_composite_key_is_nulled_whole() -> None:
    f = parse("a IS NULL AND b = 2")
    assert not true_with_nulls(f, ["a", "b"])  # b = NULL is unknown
    assert true_with_nulls(f, ["a"])  # b is not the key's: it may hold 2


def _crews() -> Schema:
    def ints(*names: str) -> tuple[Column, ...]:
        return tuple(Column(n, Kind.INTEGER, n != "id", "int") for n in names)

    team = ForeignKey("fk_crew_team", ("team_id",), "team", ("id",), on_delete="CASCADE")
    crew_fk = ForeignKey("fk_shift_crew", ("crew_id",), "crew", ("id",), "SET NULL", "CASCADE")
    tables = {
        "team": TableSchema("team", ints("id"), ("id",), (), ()),
        "crew": TableSchema("crew", ints("id", "team_id", "active"), ("id",), (), (team,)),
        "shift": TableSchema("shift", ints("id", "crew_id", "hours"), ("id",), (), (crew_fk,)),
    }
    return Schema("db", tables, ())


@pytest.mark.parametrize(
    ("tables", "keeping"),
    [
        ("crew: {}\n  shift: {where: 'hours > 2'}", []),  # the rule never moves a row in
        ("crew: {}\n  shift: {where: 'crew_id IS NULL'}", ["shift"]),  # SET NULL brings it in
        ("crew: {}\n  shift: {where: 'crew_id IN (1, 2)'}", ["shift"]),  # ON UPDATE CASCADE
        ("crew: {}\n  shift: {where: 'crew_id IS NOT NULL'}", []),
        # a filtered parent whose own rows go with their team: its children are followed
        ("crew: {where: 'active = 1'}\n  shift: {}", ["crew"]),
        ("crew: {where: 'active = 1'}", []),  # no mapped child to follow
        # with expire: too, their images without a moment
        ("crew: {}\n  shift: {where: 'crew_id IS NULL', expire: {column: hours}}", ["shift"]),
    ],
)
def test_the_tables_that_keep_the_images_of_the_rows_their_filter_leaves_out(
    tables: str, keeping: list[str]
) -> None:
    schema = _crews()
    mapping = parse_mapping(f"version: 1\ntables:\n  team: {{}}\n  {tables}\n")
    kept = [t.name for t in mapping.tables
            if keeps_left_out(t, schema.tables[t.name], mapping, schema)]  # fmt: skip
    assert kept == keeping


def test_a_sharded_source_keeps_no_images_of_the_rows_left_out() -> None:
    """(sync refuses those shapes there: tests/sync/test_cascade_filters.py)"""
    schema = _crews()
    shards = "sources:\n  - {name: a, url: 'mysql://h/a'}\n  - {name: b, url: 'mysql://h/b'}\n"
    tables = (
        "tables:\n  team: {}\n  crew: {where: 'active = 1'}\n  shift: {where: 'crew_id IS NULL'}\n"
    )
    mapping = parse_mapping(f"version: 1\n{shards}{tables}")
    assert not [
        t for t in mapping.tables if keeps_left_out(t, schema.tables[t.name], mapping, schema)
    ]
