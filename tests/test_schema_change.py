"""The effect of a schema change on the mapping (migrator.plan.schema_change): pure, no
server. The sync tests (tests/sync/test_schema_changes.py) run the same cases on MariaDB."""

from __future__ import annotations

import pytest

from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, Schema, TableSchema
from migrator.plan.planner import TablePlan
from migrator.plan.schema_change import (
    Shape,
    TableUse,
    decide,
    kind_of,
    renames,
    table_use,
    unlogged,
    verb,
)
from migrator.source.binlog.reader import ddl_table
from migrator.sync.schema_watch import parent_effect, parent_use

BEFORE = (("id", "int(11)"), ("email", "varchar(60)"), ("note", "text"), ("n", "int(11)"))
USE = TableUse(
    "emp",
    frozenset({"id", "email", "n"}),
    all_columns=False,
    uses=(("tables.emp.columns (line 4)", "email"), ("tables.emp.sorted[0].score (line 6)", "n")),
    place="tables.emp (line 3)",
)


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("ALTER TABLE emp ADD INDEX (email)", "alter"),
        ("/* gh */ alter online table emp add key k (n)", "alter"),
        ("TRUNCATE TABLE emp", "truncate"),
        ("truncate emp", "truncate"),
        ("DROP INDEX k ON emp", "drop index"),
        ("DROP TABLE emp", "drop"),
        ("RENAME TABLE emp TO e2", "rename"),
        ("CREATE OR REPLACE TABLE emp (id INT)", "create or replace"),
        ("OPTIMIZE TABLE emp", ""),
        ("DROP TEMPORARY TABLE emp", "drop"),
        ("DROP ONLINE INDEX k ON emp", "drop index"),
        ("DROP TRIGGER IF EXISTS `db`.`pt_osc_db_emp_ins`", ""),  # pt-osc's clean-up
        ("DROP VIEW emp", ""),
    ],
)
def test_verb(query: str, kind: str) -> None:
    assert verb(query) == kind


@pytest.mark.parametrize(
    ("query", "table"),
    [
        ("/* tool */ -- note\n# more\nALTER TABLE `shop`.emp ADD c INT", "emp"),
        ("/* ALTER TABLE emp */ OPTIMIZE TABLE emp", None),
        ("# ALTER TABLE emp\nSELECT 1", None),
    ],
)
def test_the_reader_and_the_planner_read_past_the_same_comments(
    query: str, table: str | None
) -> None:
    """One comment rule (plan/schema_change.py) for the statement's kind and the binary-log
    reader's mapped table, so the two never disagree on what a statement is."""
    assert ddl_table(query, "shop", "shop", ["emp"]) == table
    assert (verb(query) == "alter") == (table is not None)


@pytest.mark.parametrize(
    "after",
    [
        BEFORE,  # ADD/DROP INDEX, a comment, ENGINE=
        (*BEFORE, ("extra", "int(11)")),  # an added column the mapping does not draw from
        tuple(c for c in BEFORE if c[0] != "note"),  # an unmapped column dropped
        (("id", "int(11)"), ("email", "varchar(200)"), ("note", "text"), ("n", "bigint(20)")),
        tuple(reversed(BEFORE)),  # columns moved (FIRST / AFTER)
    ],
)
def test_changes_that_leave_the_mapping_alone_are_applied(after) -> None:  # type: ignore[no-untyped-def]
    effect = decide("alter", USE, BEFORE, after)
    assert effect.action == "apply" and "emp" in effect.what and not effect.places


def test_a_dropped_or_renamed_mapped_column_stops_naming_the_mapping_lines() -> None:
    after = (("id", "int(11)"), ("mail", "varchar(60)"), ("note", "text"), ("n", "int(11)"))
    effect = decide("alter", USE, BEFORE, after)
    assert effect.action == "stop"
    assert effect.places == ("tables.emp.columns (line 4)",) and "email" in effect.what


@pytest.mark.parametrize("kind", ["drop", "rename", "create or replace"])
def test_a_dropped_or_renamed_table_stops(kind: str) -> None:
    effect = decide(kind, USE, BEFORE, BEFORE)
    assert effect.action == "stop" and effect.places[0] == "tables.emp (line 3)"
    assert "tables.emp.columns (line 4)" in effect.places


def test_a_table_gone_after_an_alter_stops() -> None:  # ALTER TABLE emp RENAME TO e2
    assert decide("alter", USE, BEFORE, None).action == "stop"


def test_truncate_is_applied_as_a_removal() -> None:
    assert decide("truncate", USE, BEFORE, BEFORE).action == "truncate"


def test_a_column_added_to_an_all_columns_table_needs_a_resnapshot() -> None:
    use = TableUse("emp", frozenset(c for c, _ in BEFORE), all_columns=True, place="tables.emp")
    effect = decide("alter", use, BEFORE, (*BEFORE, ("extra", "int(11)")))
    assert effect.action == "resnapshot" and "extra" in effect.what


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("varchar(60)", "varchar(20)"),  # narrower: values cut
        ("int(11)", "decimal(10,2)"),  # the text changes (1 -> 1.00)
        ("int(11) unsigned", "bigint(20)"),
        ("varchar(60)", "char(60)"),
    ],
)
def test_a_type_whose_text_may_change_needs_a_resnapshot(old: str, new: str) -> None:
    before = (("id", "int(11)"), ("email", old))
    effect = decide("alter", USE, before, (("id", "int(11)"), ("email", new)))
    assert effect.action == "resnapshot" and effect.places == ("tables.emp (line 3)",)


def test_rows_logged_without_a_mapped_column_stop() -> None:
    effect = unlogged(USE, ["n"])
    assert effect.action == "stop" and effect.places == ("tables.emp.sorted[0].score (line 6)",)


def test_a_changed_introspected_primary_key_needs_a_resnapshot() -> None:
    use = TableUse("emp", frozenset({"id", "email"}), False, introspected_key=True)
    effect = decide("alter", use, BEFORE, BEFORE, ("id",), ("id", "email"))
    assert effect.action == "resnapshot"
    declared = TableUse("emp", frozenset({"id", "email"}), False)
    assert decide("alter", declared, BEFORE, BEFORE, ("id",), ("id", "email")).action == "apply"


def _column(name: str, kind: Kind = Kind.INTEGER, ctype: str = "int(11)") -> Column:
    return Column(name, kind, True, ctype)


def test_table_use_from_a_mapping() -> None:
    ts = TableSchema(
        "emp",
        (_column("id"), _column("email", Kind.TEXT, "varchar(60)"), _column("n"), _column("x")),
        ("id",),
        (),
        (),
    )
    schema = Schema("db", {"emp": ts}, ())
    text = "version: 1\ntables:\n  emp:\n    columns: [email]\n"
    text += "    sorted:\n      - key: s\n        score: n\n"
    m = parse_mapping(text)
    use = table_use(m, TablePlan(resolve(m, schema)[0]))
    assert use.drawn == {"id", "email", "n"} and not use.all_columns and use.introspected_key
    assert ("tables.emp.columns (<mapping>:4)", "email") in use.uses
    assert use.place == "tables.emp (<mapping>:3)"
    everything = parse_mapping("version: 1\ntables:\n  emp: {}\n")
    whole = table_use(everything, TablePlan(resolve(everything, schema)[0]))
    assert whole.all_columns and whole.drawn == {"id", "email", "n", "x"}


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        # pt-online-schema-change's swap, as it logs it
        ("RENAME TABLE `db`.`emp` TO `db`.`_emp_old`, `db`.`_emp_new` TO `db`.`emp`", "swap"),
        # gh-ost's, unqualified, with its comment; the old name with a timestamp
        ("rename /* gh-ost */ table emp to _emp_del, _emp_gho to emp", "swap"),
        ("RENAME TABLE emp TO _emp_20261124_del, _emp_gho TO emp", "swap"),
        ("RENAME TABLE IF EXISTS emp WAIT 5 TO e_old, e_new TO emp", "swap"),
        ("RENAME TABLE emp TO e2", "rename"),  # gone, nothing in its place
        ("RENAME TABLE e_new TO emp, emp TO e_old", "rename"),  # the new one moved on too
        ("RENAME TABLE emp TO x, other.e TO emp", "swap"),
        ("RENAME TABLE emp TO x, y TO other.emp", "rename"),  # another database's emp
        ("ALTER TABLE emp ADD INDEX (n)", "alter"),
    ],
)
def test_kind_of_tells_a_table_swap_from_a_rename(query: str, kind: str) -> None:
    assert kind_of(query, "emp", "db", "db") == kind


def test_renames_reads_qualified_and_quoted_names() -> None:
    query = "RENAME TABLE `db`.`a``b` TO c, `x,y` TO other . `d`"
    assert renames(query, "db") == [(("db", "a`b"), ("db", "c")), (("db", "x,y"), ("other", "d"))]
    assert renames("ALTER TABLE a RENAME TO b", "db") == []


@pytest.mark.parametrize(
    "after",
    [BEFORE, (*BEFORE, ("extra", "int(11)")), tuple(reversed(BEFORE))],
)
def test_a_swap_that_leaves_the_mapping_alone_is_applied(after) -> None:  # type: ignore[no-untyped-def]
    effect = decide("swap", USE, BEFORE, after)
    assert effect.action == "apply" and "table swap of emp" in effect.what


def test_a_swap_that_drops_a_mapped_column_stops() -> None:
    after = tuple(c for c in BEFORE if c[0] != "email")
    effect = decide("swap", USE, BEFORE, after)
    assert effect.action == "stop" and effect.places == ("tables.emp.columns (line 4)",)


def test_a_swap_that_changes_a_mapped_type_needs_a_resnapshot() -> None:
    after = tuple((c, "decimal(10,2)" if c == "n" else t) for c, t in BEFORE)
    assert decide("swap", USE, BEFORE, after).action == "resnapshot"


# -- a parent table the mapping leaves out, read for its cascades only ------------------------

TICKET = (("id", "int(11)"), ("title", "varchar(40)"))


@pytest.mark.parametrize(
    "kind, after, action",
    [("truncate", TICKET, "apply"),  # nothing of it in Redis: nothing to remove
     ("alter", (*TICKET, ("prio", "int(11)")), "apply"),
     ("alter", (("id", "int(11)"), ("title", "varchar(80)")), "apply"),  # a column not read
     ("alter", (("id", "bigint(20)"), ("title", "varchar(40)")), "apply"),  # same text
     ("alter", (("id", "varchar(10)"), ("title", "varchar(40)")), "stop"),  # retyped
     ("alter", (("title", "varchar(40)"),), "stop"),  # the referenced column dropped
     ("swap", (*TICKET, ("prio", "int(11)")), "apply"),
     ("rename", None, "stop"),
     ("drop", None, "stop")],
)  # fmt: skip
def test_a_ddl_of_a_parent_left_out_is_judged_by_the_columns_read(
    kind: str, after: Shape | None, action: str
) -> None:
    found = parent_effect(decide(kind, parent_use("ticket", ("id",)), TICKET, after), "ticket")
    assert found.action == action, found
    if action == "stop":
        assert found.places == ("the mapping's children of ticket (its cascading foreign keys)",)
    if kind == "truncate":
        assert "nothing to remove" in found.what
