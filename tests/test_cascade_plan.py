"""Which foreign-key cascades sync applies and which it refuses, and why (plan/cascade.py):
pure, on a schema built by hand (the servers' side: tests/sync/test_hard_cases.py)."""

from __future__ import annotations

import pytest

from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, ForeignKey, Schema, TableSchema
from migrator.plan.cascade import followable
from migrator.plan.delta import REMOVED, Delta
from migrator.plan.planner import TablePlan


def _schema(on_delete: str = "CASCADE", row_end: str | None = None) -> Schema:
    parent = TableSchema("parent", (Column("id", Kind.INTEGER, False, "int"),), ("id",), (), ())
    child = TableSchema(
        "child",
        (
            Column("id", Kind.INTEGER, False, "int"),
            Column("parent_id", Kind.INTEGER, True, "int"),
            Column("e", Kind.INTEGER, False, "bigint(20) unsigned"),
            Column("name", Kind.TEXT, True, "varchar(10)"),
            Column("tag", Kind.TEXT, True, "varchar(10)"),
        ),
        ("id",),
        (),
        (ForeignKey("fk_c", ("parent_id",), "parent", ("id",), on_delete, ""),),
        row_end=row_end,
    )
    return Schema("db", {"parent": parent, "child": child}, ())


MAPPING = """
version: 1
tables:
  parent: {}
  child:
    references: [{columns: [parent_id], table: parent}]
"""


def _plans(schema: Schema, text: str = MAPPING) -> dict[str, TablePlan]:
    return {r.name: TablePlan(r) for r in resolve(parse_mapping(text), schema)}


def test_a_cascade_with_what_it_needs_is_applied() -> None:
    rules, refused = followable(_plans(_schema()))
    assert [(r.parent, r.child, r.key.name) for r in rules] == [("parent", "child", "fk_c")]
    assert refused == []
    assert rules[0].action((b"1",), None) == ("delete", None)
    assert rules[0].action((b"1",), (b"2",)) is None  # no ON UPDATE rule


@pytest.mark.parametrize(
    "on_delete, cluster, why",
    [("CASCADE", True, "on a Redis Cluster"), ("SET DEFAULT", False, "SET DEFAULT")],
)
def test_refused_on_a_cluster_and_for_set_default(on_delete: str, cluster: bool, why: str) -> None:
    rules, refused = followable(_plans(_schema(on_delete)), cluster=cluster)
    assert rules == []
    assert [str(u) for u in refused] == [
        f"child: foreign key fk_c (parent_id) -> parent ON DELETE {on_delete}"
    ]
    assert why in refused[0].why


CHILD = MAPPING.split("  child:\n")[0] + "  child:\n"
REF = "    references: [{columns: [parent_id], table: parent}]\n"


@pytest.mark.parametrize(
    "on_delete, text, why",
    [("CASCADE", CHILD + REF + "    key: 'child:{id}:{name}'\n",
      "the row key is not made of the primary key"),
     ("CASCADE", MAPPING.replace("tables:", "options: {separator: '1'}\ntables:"),
      "the separator holds a digit or a sign"),
     ("SET NULL", CHILD + "    indexes: [[parent_id, name, tag]]\n" + REF,
      "a separator may occur in a composite's values next to the nulled columns"),
     ("CASCADE", CHILD + REF + "    as: columns\n",
      "the row hash does not hold every column the mapping uses (parent_id)"),
     ("CASCADE", CHILD + "    indexes: [[parent_id, name]]\n",
      "no index or reference on exactly (parent_id) to find the rows by")],
)  # fmt: skip
def test_refused_where_redis_does_not_hold_what_the_rule_needs(
    on_delete: str, text: str, why: str
) -> None:
    rules, refused = followable(_plans(_schema(on_delete), text))
    assert rules == [] and len(refused) == 1
    assert refused[0].why == f"sync cannot apply it exactly: {why}"


def test_set_null_beside_one_varying_value_is_applied() -> None:
    """(parent_id, name) holds one text column: not ambiguous (issue 16), so no row is ever
    rejected for it, and nulling parent_id changes nothing Redis could not follow."""
    text = CHILD + "    indexes: [[parent_id, name]]\n" + REF
    rules, refused = followable(_plans(_schema("SET NULL"), text))
    assert [r.key.name for r in rules] == ["fk_c"] and refused == []


def test_transaction_precise_versioning_is_refused() -> None:
    _, refused = followable(_plans(_schema("RESTRICT", row_end="e")))
    assert [u.what for u in refused] == [
        "transaction-precise system versioning (ROW END e is a transaction id)"
    ]


def test_reads_in_the_middle_of_a_group_see_what_the_group_planned() -> None:
    d = Delta()
    d.put(("S", b"s", b"1"), REMOVED)
    d.put(("S", b"s", b"3"), b"")
    assert d.pending_members(b"s", {b"1", b"2"}) == {b"2", b"3"}
    d.put(("H", b"h", b"a"), b"x")
    d.put(("H", b"h", b"b"), REMOVED)
    assert d.pending_hash(b"h", {b"b": b"1", b"c": b"2"}) == {b"a": b"x", b"c": b"2"}
    d.delete_row(b"h")
    assert d.pending_hash(b"h", {b"c": b"2"}) == {}
    d.put(("H", b"h", b"z"), b"1")
    assert d.pending_hash(b"h", {b"c": b"2"}) == {b"z": b"1"}
