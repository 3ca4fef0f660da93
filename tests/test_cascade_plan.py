"""Which foreign-key cascades sync applies and which it refuses, and why (plan/cascade.py):
pure, on a schema built by hand (the servers' side: tests/sync/test_hard_cases.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from migrator.mapping.cascades import cascade_notes, fit, inexact_match
from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, ForeignKey, Schema, TableSchema
from migrator.plan.cascade import followable
from migrator.plan.cascade_apply import Cascades
from migrator.plan.cascade_parents import outside, watched
from migrator.plan.delta import REMOVED, Delta, TableDelta
from migrator.plan.expiry import encode_row
from migrator.plan.planner import TablePlan
from migrator.plan.row_images import images_of


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
    [("SET NULL", CHILD + "    indexes: [[parent_id, name, tag]]\n" + REF,
      "a separator may occur in a composite's values next to the nulled columns"),
     ("CASCADE", CHILD + "    columns: []\n",
      "the foreign key's columns parent_id are not read by the mapping")],
)  # fmt: skip
def test_refused_where_redis_does_not_hold_what_the_rule_needs(
    on_delete: str, text: str, why: str
) -> None:
    rules, refused = followable(_plans(_schema(on_delete), text))
    assert rules == [] and len(refused) == 1
    assert refused[0].why == f"sync cannot apply it exactly: {why}"


@pytest.mark.parametrize(
    "text, whole",
    [(CHILD + REF + "    key: 'child:{id}:{name}'\n", True),  # the row key is not the pk
     (CHILD + REF + "    as: columns\n", True),
     (CHILD + REF + "    as: columns\n    expire: {ttl: 60}\n", True),  # as without expire:
     (CHILD + "    indexes: [[parent_id, name]]\n    expire: {ttl: 60}\n", False),
     (CHILD + REF + "    as: json-string\n", True),
     (CHILD + REF + "    as: none\n    indexes: [name]\n", True),  # a column beyond the pk
     (CHILD + REF + "    formats: {e: number}\n", True),
     (CHILD + REF + "    columns: [name]\n", True),  # the hash leaves parent_id out
     (CHILD + "    indexes: [[parent_id, name]]\n", False)],  # no index on parent_id alone
)  # fmt: skip
def test_a_child_not_read_back_keeps_row_images_and_is_followed(text: str, whole: bool) -> None:
    """Row images (plan/row_images.py) where the row cannot be read back from its hash; a
    SET per foreign-key value where no index finds the rows."""
    plans = _plans(_schema("CASCADE"), text)
    rules, refused = followable(plans)
    assert refused == [] and [r.key.name for r in rules] == ["fk_c"]
    images = images_of(plans["child"])
    assert images is not None and images.whole is whole
    assert (rules[0].images is not None) is whole and (rules[0].by is not None) is not whole
    assert images_of(plans["parent"]) is None  # a parent keeps none


def test_a_cascade_reads_the_rows_from_their_images() -> None:
    plans = _plans(_schema("CASCADE"), CHILD + REF + "    as: columns\n")
    rules, _ = followable(plans)
    deltas = {name: TableDelta(plan) for name, plan in plans.items()}
    images = images_of(plans["child"])
    assert images is not None
    select = plans["child"].select
    one = tuple(b"7" if c == "parent_id" else b"x" if c == "name" else b"1" for c in select)
    reads: list[list[tuple[bytes, ...]]] = []
    index = b"child:indices:parent_id:7"

    def read(commands: list[tuple[bytes, ...]]) -> list[object]:
        reads.append(commands)
        if commands[0][0] == b"SMEMBERS":
            return [[b"1", b"2"]]
        return [[encode_row(one), None]]  # 2: no image (gone already)

    delta = Delta()
    Cascades(rules, deltas, read).follow("parent", (b"7",), None, delta)  # DELETE parent 7
    pks = [encode_row((b"1",)), encode_row((b"2",))]
    assert reads == [[(b"SMEMBERS", index)], [(b"HMGET", images.key, *pks)]]
    assert delta.ops[("h", images.key)] == {encode_row((b"1",)): REMOVED}
    assert delta.pending_members(index, {b"1", b"2"}) == {b"2"}
    assert (b"DEL", b"child:1:name") in delta.commands


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


# -- keys of any type whose equality in MySQL is byte equality ------------------------------


def _col(column_type: str, collation: str | None = None) -> Column:
    base = column_type.split("(")[0]
    kind = {"int": Kind.INTEGER, "bigint": Kind.INTEGER, "binary": Kind.BINARY,
            "varbinary": Kind.BINARY, "decimal": Kind.DECIMAL, "date": Kind.DATE,
            "double": Kind.DOUBLE, "float": Kind.FLOAT,
            "datetime": Kind.DATETIME}.get(base, Kind.TEXT)  # fmt: skip
    return Column("k", kind, False, column_type, collation)


@pytest.mark.parametrize(
    "child, parent, why",
    [(_col("int(11)"), _col("int(10)"), ""),
     (_col("binary(16)"), _col("binary(16)"), ""),
     (_col("varbinary(20)"), _col("varbinary(16)"), ""),
     (_col("binary(20)"), _col("binary(16)"), ""),  # byte for byte: no child can match
     (_col("binary(8)"), _col("varbinary(12)"), ""),  # 8 bytes, 0x00s included, on both
     (_col("uuid"), _col("uuid"), ""),
     (_col("inet6"), _col("inet6"), ""),
     (_col("inet4"), _col("inet4"), ""),
     (_col("char(36)", "ascii_bin"), _col("char(36)", "ascii_bin"), ""),
     (_col("varchar(36)", "utf8mb4_nopad_bin"), _col("varchar(36)", "utf8mb4_nopad_bin"), ""),
     (_col("varchar(36)", "utf8mb4_0900_bin"), _col("char(36)", "utf8mb4_0900_bin"),
      "a NO PAD collation: InnoDB compares the CHAR's bytes padded"),  # 'a' -> 'a         '
     (_col("char(36)", "utf8mb4_nopad_bin"), _col("varchar(36)", "utf8mb4_nopad_bin"), "NO PAD"),
     (_col("varchar(36)", "ucs2_bin"), _col("char(36)", "ucs2_bin"), "its length in ucs2"),
     (_col("varchar(36)", "utf8mb4_bin"), _col("varchar(36)", "utf8mb4_bin"),
      "k is varchar(36) under the collation utf8mb4_bin, a PAD SPACE collation on a VARCHAR: "
      "'a' = 'a ' in MySQL, not in Redis"),
     (_col("char(36)", "utf8mb4_bin"), _col("varchar(36)", "utf8mb4_bin"), "PAD SPACE"),
     (_col("varchar(36)", "utf8mb4_general_ci"), _col("varchar(36)", "utf8mb4_general_ci"),
      "k is varchar(36) under the collation utf8mb4_general_ci, where MySQL's equality is not "
      "byte equality (e.g. 'Ken' = 'ken')"),
     (_col("char(36)", "ascii_general_ci"), _col("char(36)", "ascii_general_ci"), "'Ken'"),
     (_col("varchar(9)", "utf8mb4_0900_as_cs"), _col("varchar(9)", "utf8mb4_0900_as_cs"), "'Ken'"),
     (_col("decimal(5,2)"), _col("decimal(5,2)"), ""),
     (_col("decimal(5,2)"), _col("decimal(6,2)"), "k is decimal(5,2), compared by value"),
     (_col("date"), _col("date"), ""),
     (_col("datetime(3)"), _col("datetime(3)"), ""),
     (_col("datetime(3)"), _col("datetime(6)"), "compared by value"),
     (_col("double"), _col("double"), ""),  # (zero's two texts: both looked up)
     (_col("float"), _col("float"), ""),
     (_col("float"), _col("double"), "k is float, compared by value")],
)  # fmt: skip
def test_a_key_is_followed_where_mysql_compares_it_byte_wise(
    child: Column, parent: Column, why: str
) -> None:
    got = inexact_match(child, parent)
    assert why in got if why else got == "", got


@pytest.mark.parametrize(
    "child, parent_type, value, stored",
    [(_col("char(10)", "utf8mb4_bin"), "varchar(10)", b"b  ", b"b"),
     (_col("varchar(10)", "utf8mb4_bin"), "char(10)", b"b", b"b" + b" " * 9),
     (_col("varchar(10)", "utf8mb4_bin"), "char(10)", "é".encode(), "é".encode() + b" " * 8),
     (_col("varchar(10)", "latin1_bin"), "char(4)", "é".encode(), "é".encode() + b" " * 3),
     (_col("varchar(10)", "utf8mb4_bin"), "char(2)", b"abc", b"abc"),
     (_col("varchar(10)", "utf8mb4_bin"), "varchar(10)", b"b  ", None)],
)  # fmt: skip
def test_a_cascaded_key_is_stored_as_innodb_stores_it(
    child: Column, parent_type: str, value: bytes, stored: bytes | None
) -> None:
    """What MariaDB 10.11 and MySQL 9.7 (innodb_native_foreign_keys=ON) hold after an ON
    UPDATE CASCADE (tests/sync/test_cascade_collations.py follows them under writes)."""
    how = fit(child, parent_type)
    assert (how(value) if how is not None else None) == stored


def _text_keys(text_pk: Column, fk: Column, parent_key: Column) -> Schema:
    book = TableSchema("book", (Column("id", parent_key.kind, False, parent_key.column_type,
                                       parent_key.collation),), ("id",), (), ())  # fmt: skip
    tag = TableSchema(
        "tag",
        (Column("tagname", text_pk.kind, False, text_pk.column_type, text_pk.collation),
         Column("book_id", fk.kind, False, fk.column_type, fk.collation)),
        ("tagname", "book_id"), (),
        (ForeignKey("fk_tag_book", ("book_id",), "book", ("id",), "CASCADE", "CASCADE"),),
    )  # fmt: skip
    return Schema("db", {"book": book, "tag": tag}, ())


TAGS = """
version: 1
options: {separator: "%s", escape: %s}
tables:
  book: {}
  tag:
    as: none
    sets: [{key: "tag:{tagname}", member: "{book_id}"}]
    references: [{columns: [book_id], table: book}]
"""


@pytest.mark.parametrize(
    "sep, escape, members",
    [(":", "reject", [b"a:b:2", b"x:2"]),  # one text column: the integer's end is exact
     (":", "backslash", [b"a\\:b:2", b"x:2"]),
     ("1", "reject", [b"a:b12", b"x12"])],  # a digit separator: read back, not refused
)  # fmt: skip
def test_a_text_primary_key_is_read_back_from_the_members(
    sep: str, escape: str, members: list[bytes]
) -> None:
    """The demo's tag table: primary key (tagname, book_id), the foreign key an integer."""
    schema = _text_keys(_col("varchar(32)", "utf8mb4_general_ci"), _col("int"), _col("int"))
    plans = _plans(schema, TAGS % (sep, escape))
    rules, refused = followable(plans)
    assert refused == [] and [r.key.name for r in rules] == ["fk_tag_book"]
    deltas = {name: TableDelta(plan) for name, plan in plans.items()}
    index = f"tag{sep}indices{sep}book_id{sep}2".encode()
    reads: list[list[tuple[bytes, ...]]] = []

    def read(commands: list[tuple[bytes, ...]]) -> list[object]:
        reads.append(commands)
        return [members]

    delta = Delta()
    Cascades(rules, deltas, read).follow("book", (b"2",), None, delta)  # DELETE book 2
    assert reads == [[(b"SMEMBERS", index)]]  # as: none: the members are the whole rows
    assert delta.pending_members(index, set(members)) == set()  # both rows deleted
    tag_key = plans["tag"].key_fn(plans["tag"].table.sets[0].key)
    for name in (b"a:b", b"x"):
        assert delta.pending_members(tag_key((name, b"2")), {b"2"}) == set()


def test_with_the_cascaded_rows_in_the_log_nothing_is_applied_or_refused() -> None:
    """MySQL 9.7's SQL-layer foreign keys log the rows their cascades change."""
    schema = _text_keys(_col("varchar(9)", "utf8mb4_general_ci"),
                        _col("varchar(9)", "utf8mb4_general_ci"),
                        _col("varchar(9)", "utf8mb4_unicode_ci"))  # fmt: skip
    plans = _plans(schema, TAGS % (":", "reject"))
    assert [u.table for u in followable(plans)[1]] == ["tag"]
    assert "utf8mb4_nopad_bin on MariaDB" in followable(plans)[1][0].fix
    assert followable(plans, logged=True) == ([], [])
    assert followable(plans, cluster=True, logged=True) == ([], [])
    versioned = _plans(_schema("RESTRICT", row_end="e"))
    assert len(followable(versioned, logged=True)[1]) == 1  # still: statements, not rows


TAGGED = """
version: 1
tables:
  book: {}
  tag:
    references: [{columns: [book_id], table: book}]
"""


@pytest.mark.parametrize(
    "fk, key, extra, followed",
    [("utf8mb4_general_ci", "utf8mb4_general_ci", "", True),
     ("utf8mb4_bin", "utf8mb4_bin", "", True),  # PAD SPACE on a VARCHAR
     ("latin1_swedish_ci", "latin1_swedish_ci", "", True),
     ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "", False),  # two collations
     ("utf8mb4_general_ci", "utf8mb4_general_ci", "    expire: {ttl: 60}\n", True)],
)  # fmt: skip
def test_a_text_key_under_a_collation_is_found_by_its_comparison_key(
    fk: str, key: str, extra: str, followed: bool
) -> None:
    """Issue 36 item 1: the child's rows are found by the server's comparison key of the
    foreign key (row images, a SET per key), read after the row's select values."""
    schema = _text_keys(_col("varchar(9)", "utf8mb4_general_ci"), _col("varchar(9)", fk),
                        _col("varchar(9)", key))  # fmt: skip
    plans = _plans(schema, TAGGED + extra)
    rules, refused = followable(plans)
    tag = plans["tag"]
    if not followed:
        assert rules == [] and len(refused) == 1 and "book_id" in refused[0].why
        return
    assert refused == [] and tag.weighed == ("book_id",)
    assert tag.row_names == (*tag.select, "\x00weight:book_id")
    (rule,) = rules
    assert rule.weigh == ((fk, len(tag.select)),) and rule.set_key is None
    images = images_of(tag)
    assert images is not None and images.whole and rule.images == images.key
    row = (b"x", b"KEN ", b"<key of ken>")
    by_key = b"migrator:mapping:rows:tag:by:book_id:" + encode_row((b"<key of ken>",))
    assert ("S", by_key, encode_row((b"x", b"KEN ")), b"") in images.entries(row)


# -- a parent the mapping leaves out ----------------------------------------------------------

ONLY_CHILD = "version: 1\ntables:\n  child:\n    indexes: [parent_id]\n"


def test_a_parent_left_out_of_the_mapping_is_read_for_its_rules_only() -> None:
    """Its referenced columns are read from the log (``watched``), the rule's positions
    point into them, and the children are found as for a mapped parent."""
    schema = _schema("CASCADE")
    plans = _plans(schema, ONLY_CHILD)
    parents = outside(schema.tables, plans)
    assert list(parents) == ["parent"] and watched(plans, parents) == {"parent": ("id",)}
    rules, refused = followable(plans, parents=parents)
    assert refused == [] and [(r.parent, r.child, r.parent_pos) for r in rules] == [
        ("parent", "child", (0,))
    ]
    deltas = {name: TableDelta(plan) for name, plan in plans.items()}
    index = b"child:indices:parent_id:7"

    def read(commands: list[tuple[bytes, ...]]) -> list[object]:
        if commands[0][0] == b"SMEMBERS":
            return [[b"1"]]
        return [[b"parent_id", b"7", b"name", b"x"]]

    delta = Delta()
    Cascades(rules, deltas, read).follow("parent", (b"7",), None, delta)  # DELETE parent 7
    assert delta.pending_members(index, {b"1"}) == set()
    assert (b"DEL", b"child:1") in delta.commands
    # without the source's tables (a caller that has none): refused, naming the table
    rules, refused = followable(plans)
    assert rules == [] and "the parent table parent is not read from the log" in refused[0].why


def _three(middle_delete: str, middle_update: str, referenced: str) -> Schema:
    """top <- middle <- bottom: bottom's foreign key references middle's ``referenced``."""
    top = TableSchema("top", (Column("id", Kind.INTEGER, False, "int"),), ("id",), (), ())
    middle = TableSchema(
        "middle",
        (Column("id", Kind.INTEGER, False, "int"), Column("top_id", Kind.INTEGER, True, "int")),
        ("id",), (),
        (ForeignKey("fk_m", ("top_id",), "top", ("id",), middle_delete, middle_update),),
    )  # fmt: skip
    bottom = TableSchema(
        "bottom",
        (Column("id", Kind.INTEGER, False, "int"), Column("m", Kind.INTEGER, True, "int")),
        ("id",), (),
        (ForeignKey("fk_b", ("m",), "middle", (referenced,), "CASCADE", "CASCADE"),),
    )  # fmt: skip
    return Schema("db", {"top": top, "middle": middle, "bottom": bottom}, ())


@pytest.mark.parametrize(
    "middle_delete, middle_update, referenced, refused",
    [("CASCADE", "", "id", True),  # middle's rows deleted by top's: bottom's unknown
     ("SET NULL", "", "top_id", True),  # the referenced column nulled without a trace
     ("RESTRICT", "CASCADE", "top_id", True),
     ("RESTRICT", "CASCADE", "id", False),  # top_id follows, id does not move: nothing reaches
     ("SET NULL", "SET NULL", "id", False),
     ("RESTRICT", "RESTRICT", "id", False)],
)  # fmt: skip
def test_a_cascade_of_a_cascade_through_a_parent_left_out_is_refused_where_it_reaches(
    middle_delete: str, middle_update: str, referenced: str, refused: bool
) -> None:
    schema = _three(middle_delete, middle_update, referenced)
    plans = _plans(schema, "version: 1\ntables:\n  top: {}\n  bottom: {}\n")
    rules, why = followable(plans, parents=outside(schema.tables, plans))
    assert [r.key.name for r in rules] == ([] if refused else ["fk_b"])
    if refused:
        (u,) = why
        assert u.table == "bottom" and "a cascade of a cascade through a table sync" in u.why
        head = "the parent table middle is not in the mapping and its own rows change by its "
        assert head + "foreign key fk_m -> top" in u.why and "map the parent table too" in u.fix
    else:
        assert why == []


def test_init_says_when_the_parent_must_be_mapped_too() -> None:
    """``init``'s note above a child: the parent is read for its rules mapped or not, unless
    its own rows change by a rule the log lacks that reaches the child (then map it)."""
    reached = _three("CASCADE", "", "id")
    (note,) = cascade_notes(reached.tables["bottom"], reached)
    assert "keep (m) read and middle mapped (its own rows change by fk_m -> top ON DELETE " in note
    alone = _three("RESTRICT", "CASCADE", "id")
    (note,) = cascade_notes(alone.tables["bottom"], alone)
    assert "keep (m) read (middle is read for it, mapped or not)" in note
    assert "mapped (its own" not in note


def test_a_parent_in_another_database_is_read_under_its_own_key() -> None:
    """A parent in another database is keyed ``database.table``: a same-named table of the
    source's (mapped or not) is never taken for it; unread, it is refused naming the grant."""
    schema = _schema("CASCADE")
    child = schema.tables["child"]
    fk = child.foreign_keys[0]
    other = ForeignKey(fk.name, fk.columns, fk.parent, fk.parent_columns, "CASCADE", "",
                       "elsewhere")  # fmt: skip
    schema.tables["child"] = TableSchema(child.name, child.columns, child.primary_key, (),
                                         (other,))  # fmt: skip
    for text in (MAPPING, ONLY_CHILD):
        plans = _plans(schema, text)
        rules, (u,) = followable(plans, parents=outside(schema.tables, plans))
        assert rules == [] and "the schema of the parent table elsewhere.parent cannot" in u.why
        assert "GRANT SELECT ON `elsewhere`.*" in u.fix
        there = {**outside(schema.tables, plans), "elsewhere.parent": schema.tables["parent"]}
        rules, refused = followable(plans, parents=there)
        assert refused == [] and [r.parent for r in rules] == ["elsewhere.parent"]
        assert watched(plans, there) == {"elsewhere.parent": ("id",)}
        # a source's table named elsewhere.parent too: the two cannot be told apart
        named = replace(schema.tables["parent"], name="elsewhere.parent")
        rules, (u,) = followable(plans, parents={**there, "elsewhere.parent": named})
        assert rules == [] and "cannot be told apart" in u.why
