"""Mappings that would write one key from two places, refused before any row is read (issue 10
item 5a): two tables or structures writing the same keys, a per-value unique key without its
column, a key given twice in the YAML. Pure: a schema object, no server."""

from __future__ import annotations

import pytest

from migrator.errors import MappingError
from migrator.mapping.keyspace import example
from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Template
from migrator.mapping.schema import Column, IndexInfo, Schema, TableSchema
from migrator.plan.collisions import check_collisions


def _schema() -> Schema:
    def table(name: str, *cols: Column, pk: tuple[str, ...]) -> TableSchema:
        return TableSchema(name, cols, pk, (IndexInfo("u", ("email",), True),) * 0, ())

    emp = table(
        "emp",
        Column("emp_id", Kind.INTEGER, False, "int"),
        Column("email", Kind.TEXT, True, "varchar(60)"),
        Column("mgr_id", Kind.INTEGER, True, "int"),
        pk=("emp_id",),
    )
    item = table("item", Column("id", Kind.INTEGER, False, "int"), pk=("id",))
    part = table("part", Column("id", Kind.INTEGER, False, "int"), pk=("id",))
    tag = table(
        "tag",
        Column("a", Kind.TEXT, False, "varchar(20)"),
        Column("b", Kind.TEXT, False, "varchar(20)"),
        Column("email", Kind.TEXT, True, "varchar(60)"),
        pk=("a", "b"),
    )
    grp = table(
        "grp",
        Column("gid", Kind.INTEGER, False, "int"),
        Column("member", Kind.TEXT, False, "varchar(40)"),
        Column("at", Kind.DATETIME, False, "datetime"),
        pk=("gid", "member"),
    )
    return Schema("test", {t.name: t for t in (emp, item, part, tag, grp)}, ())


def problems(tables: str, options: str = "") -> list[tuple[str, str, str]]:
    opts = f"options: {{{options}}}\n" if options else ""
    m = parse_mapping(f"version: 1\n{opts}tables:\n" + tables, file="m.yaml")
    return [(p.level, p.path, p.message) for p in check_collisions(m, _schema())]


def test_two_tables_with_the_same_keys_are_an_error() -> None:
    (found,) = problems('  item: {}\n  part: {key: "item:{id}", counter: false}\n')
    assert found[0] == "error" and found[1] == "tables.part.key"
    assert "item hash 'item:{id}'" in found[2] and "write the same keys" in found[2]


def test_a_default_mapping_has_no_collision() -> None:
    assert problems("  emp: {unique: [email], indexes: [mgr_id]}\n  item: {}\n") == []


def test_values_that_meet_another_structure_are_a_warning_with_an_example() -> None:
    (found,) = problems("  tag: {unique: [email]}\n")
    assert found[0] == "warning"
    assert "e.g. 'tag:uniques:email'" in found[2]  # the row ('uniques', 'email')
    rows, counter = problems('  emp: {unique: [{columns: [email], key: "emp:{email}"}]}\n')
    assert rows[0] == "warning" and "e.g. 'emp:0'" in rows[2]  # an email made of digits
    assert counter[0] == "warning" and "e.g. 'emp:id'" in counter[2]  # the email 'id'


def test_placeholders_without_a_separator_between_them() -> None:
    (found,) = problems('  tag: {key: "tag:{a}-{b}"}\n')
    assert found[0] == "warning" and "{a} and {b} have no separator" in found[2]


def test_example_follows_the_value_classes() -> None:
    digits = frozenset("-0123456789")

    def num(c: str) -> frozenset[str]:
        return digits

    def text(c: str) -> None:
        return None

    assert example(Template.parse("emp:{id}"), Template.parse("emp:id"), ":", num, text) is None
    assert example(Template.parse("t:{a}"), Template.parse("t:x:{b}"), ":", text, text) is None
    got = example(Template.parse("t:{a}:{b}"), Template.parse("t:{c}:z"), ":", text, text)
    assert got is not None and got.startswith("t:") and got.endswith(":z")


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("  emp: {}\n  item: {}\n  emp: {}\n", 5, "'emp' is given twice (first on line 3)"),
        ("  emp:\n    columns: [email]\n    columns: [mgr_id]\n", 5, "'columns' is given twice"),
        (
            '  emp:\n    unique: [{columns: [email], key: "emp:uniques:email"}]\n',
            4,
            "the key 'emp:uniques:email' has no placeholder for email",
        ),
    ],
)
def test_loader_refuses_what_would_overwrite_silently(body: str, line: int, message: str) -> None:
    with pytest.raises(MappingError) as caught:
        parse_mapping("version: 1\ntables:\n" + body, file="m.yaml")
    assert caught.value.line == line and message in caught.value.message


# -- issue 16 item 2: values written with their separators --------------------------------------
ITEM = '  item: {key: "g:{id}:admin:x", counter: false}\n'


def test_the_one_varying_value_of_a_composite_may_hold_the_separator() -> None:
    """'member' is written with its ':' (the only text part beside an integer), so the row
    (1, 'admin:x') writes g:1:admin:x, the key of item 1."""
    (found,) = problems('  grp: {key: "g:{gid}:{member}"}\n' + ITEM)
    assert found[0] == "warning" and found[1] == "tables.item.key"
    assert "e.g. 'g:" in found[2] and ":admin:x'" in found[2]


def test_a_datetime_beside_the_varying_value() -> None:
    (found,) = problems('  grp: {key: "g:{at}:{member}"}\n' + ITEM)
    assert found[0] == "warning" and ":admin:x'" in found[2]


def test_two_varying_values_hold_no_separator_they_are_rejected() -> None:
    """(a, b) both text: a row with ':' in either is rejected, so tag:{a}:{b} never meets
    tag:{id}:x:y (b would have to be 'x:y')."""
    assert problems('  tag: {}\n  item: {key: "tag:{id}:x:y", counter: false}\n') == []


def test_escaped_values_hold_no_bare_separator() -> None:
    assert problems('  grp: {key: "g:{gid}:{member}"}\n' + ITEM, "escape: backslash") == []


def test_an_integer_is_never_empty_in_an_example() -> None:
    """An example key that can occur (issue 27 item 6): a number, a date, is never the empty
    string; text may be."""
    digits = frozenset("-0123456789")

    def num(c: str) -> frozenset[str]:
        return digits

    def text(c: str) -> None:
        return None

    def never(c: str) -> bool:
        return False

    a, b = Template.parse("item:{id}:x"), Template.parse("item::x")
    assert example(a, b, ":", num, text) == "item::x"  # (an empty id: what it said before)
    assert example(a, b, ":", num, text, never) is None
    c = Template.parse("item:{id}{code}")
    got = example(c, Template.parse("item:7"), ":", num, text, never, never)
    assert got is None  # two non-empty values make at least two characters
    assert example(c, Template.parse("item:75"), ":", num, text, never, never) == "item:75"


def test_an_enum_in_a_key_holds_its_values_alone() -> None:
    """ENUM columns in a key are no free text: a composite of ENUM('red','green') values
    cannot write the unique hash 'tag:uniques:email' (before: a warning with that
    example); one whose values hold those letters still can."""

    def schema(colours: str, sizes: str = "'s','m'") -> Schema:
        cols = (
            Column("a", Kind.TEXT, False, f"enum({colours})"),
            Column("b", Kind.TEXT, False, f"enum({sizes})"),
            Column("email", Kind.TEXT, True, "varchar(60)"),
        )
        return Schema("test", {"tag": TableSchema("tag", cols, ("a", "b"), (), ())}, ())

    m = parse_mapping("version: 1\ntables:\n  tag: {unique: [email]}\n", file="m.yaml")
    assert check_collisions(m, schema("'red','green'")) == []
    (found,) = check_collisions(m, schema("'uniques','red'", "'email','m'"))
    assert found.level == "warning" and "can write the same key" in found.message
