"""``migrator init``: the defaults (docs/mapping.md), commented YAML, and the round trip."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from migrator.cli import app
from migrator.errors import SourceError
from migrator.mapping import scaffold
from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.resolve import resolve
from migrator.mapping.schema import Column, ForeignKey, IndexInfo, Schema, TableSchema
from migrator.plan.planner import TablePlan

REPO = Path(__file__).resolve().parent.parent
URL = "mysql+pymysql://app:s3cret@db.example:3306/shop"


def col(name: str, kind: Kind = Kind.INTEGER, nullable: bool = False) -> Column:
    return Column(name, kind, nullable, "int" if kind is Kind.INTEGER else "varchar(40)")


def sample_schema() -> Schema:
    emp = TableSchema(
        "emp",
        (
            col("emp_id"), col("ename", Kind.TEXT), col("email", Kind.TEXT, True),
            col("mgr_id", nullable=True), col("dept_no", Kind.TEXT, True),
            col("title", Kind.TEXT, True), col("note", Kind.TEXT, True), col("spot", Kind.GEOMETRY),
        ),
        ("emp_id",),
        (
            IndexInfo("email", ("email",), True),
            IndexInfo("mgr_id", ("mgr_id",), False),
            IndexInfo("dept_title", ("dept_no", "title"), False),
            IndexInfo("ft_note", ("note",), False, "FULLTEXT"),
            IndexInfo("sp", ("spot",), False, "SPATIAL"),
        ),
        (
            ForeignKey("fk_mgr", ("mgr_id",), "emp", ("emp_id",)),
            ForeignKey("fk_dept", ("dept_no",), "dept", ("code",)),
        ),
        row_estimate=14,
    )  # fmt: skip
    dept = TableSchema(
        "dept",
        (col("dept_no", Kind.TEXT), col("code", Kind.TEXT), col("dname", Kind.TEXT)),
        ("dept_no",),
        (IndexInfo("code", ("code",), True), IndexInfo("dname", ("dname",), True)),
        (),
    )
    book_tag = TableSchema(
        "book_tag",
        (col("book_id"), col("tagname", Kind.TEXT)),
        ("book_id", "tagname"),
        (IndexInfo("tagname", ("tagname",), False),),
        (ForeignKey("fk_book", ("book_id",), "book", ("book_id",)),),
    )
    keyed_by_unique = TableSchema(
        "log",
        (col("seq"), col("msg", Kind.TEXT, True)),
        (),
        (IndexInfo("seq", ("seq",), True),),
        (),
    )
    no_key = TableSchema(
        "scratch", (col("a", nullable=True),), (), (IndexInfo("a", ("a",), True),), ()
    )
    tables = {t.name: t for t in (emp, dept, book_tag, keyed_by_unique, no_key)}
    return Schema("shop", tables, ("emp_view", "another_view"))


def odd_schema() -> Schema:
    group = TableSchema(
        "user:group",
        (col("id"), col("first name", Kind.TEXT), col("a{b}", Kind.TEXT), col("yes", Kind.TEXT),
         col("#x: y", Kind.TEXT, True), col("ünï", Kind.TEXT, True)),
        ("id",),
        (IndexInfo("u", ("first name",), True), IndexInfo("i", ("#x: y", "ünï"), False)),
        (),
    )  # fmt: skip
    tag = TableSchema(
        "tag {x}",
        (col("b id"), col("tag: name", Kind.TEXT)),
        ("b id", "tag: name"),
        (),
        (),
    )
    braces = TableSchema("br", (col("{k}"), col("v", Kind.TEXT)), ("{k}",), (), ())
    return Schema("odd", {t.name: t for t in (group, tag, braces)}, ())


def bodies(schema: Schema) -> dict[str, object]:
    return scaffold.draft(schema, source=URL).as_dict()["tables"]  # type: ignore[no-any-return]


def test_spec4_defaults_for_an_ordinary_table() -> None:
    assert bodies(sample_schema())["emp"] == {
        "key": "emp:{emp_id}",
        "columns": ["ename", "email", "mgr_id", "dept_no", "title", "note", "spot"],
        "counter": "emp:id",
        "unique": ["email"],
        "indexes": [["dept_no", "title"]],
        "references": [
            {"columns": "mgr_id", "table": "emp"},
            {"columns": "dept_no", "table": "dept", "parent_columns": "code"},
        ],
    }


def test_text_primary_key_gets_no_counter_and_every_unique_index() -> None:
    dept = bodies(sample_schema())["dept"]
    assert dept == {
        "key": "dept:{dept_no}",
        "columns": ["code", "dname"],
        "unique": ["code", "dname"],
    }


def test_join_table_gets_sets_in_both_directions_and_no_index_sets() -> None:
    assert bodies(sample_schema())["book_tag"] == {
        "as": "none",
        "sets": [
            {"key": "book_tag:book_id:{book_id}", "member": "{tagname}"},
            {"key": "book_tag:tagname:{tagname}", "member": "{book_id}"},
        ],
    }


def test_table_without_primary_key() -> None:
    d = scaffold.draft(sample_schema(), source=URL)
    log = next(t for t in d.tables if t.name == "log")
    assert log.body == {
        "primary_key": ["seq"],
        "key": "log:{seq}",
        "columns": ["msg"],
        "counter": "log:id",
    }
    scratch = next(t for t in d.tables if t.name == "scratch")
    assert scratch.body is None
    text = d.render()
    assert "scratch: left out: no primary key and no NOT NULL unique index" in text
    assert "NOT NULL unique index on (seq)" in text


def test_rendered_file_comments() -> None:
    text = scaffold.draft(sample_schema(), source=URL, today=dt.date(2024, 5, 1)).render()
    assert "s3cret" not in text
    assert "# migrator mapping drafted by 'migrator init' on 2024-05-01" in text
    assert "# source: mysql+pymysql://app:***@db.example:3306/shop" in text
    assert "source: mysql+pymysql://app:${MYSQL_PASSWORD:-}@db.example:3306/shop" in text
    assert "# views skipped (only base tables are migrated): another_view, emp_view" in text
    assert "# emp: ~14 rows (estimate)" in text
    assert "FULLTEXT index ft_note on (note) left out" in text
    assert "SPATIAL index sp on (spot) left out" in text
    assert "index on (mgr_id): the same SETs as the foreign keys under references" in text
    # the draft cites the project's own docs (by their address: pip installs no docs/ folder),
    # never a document outside the repository
    assert "# https://github.com/migrator-dev/migrator/blob/main/docs/mapping.md#what-" in text
    assert "SPEC" not in text and "shared/" not in text
    assert (Path(__file__).parent.parent / "docs" / "mapping.md").is_file()
    # the hand-written keys are named in comments, never drafted
    for key in ("where:", "fields:", "formats:", "expire:"):
        assert f"#   {key}" in text or f"; {key}" in text, key
        assert not [line for line in text.splitlines() if line.strip().startswith(key)]


def test_round_trip_gives_the_same_model_and_the_spec_defaults() -> None:
    for schema in (sample_schema(), odd_schema()):
        d = scaffold.draft(schema, source="mysql+pymysql://root@h/db")
        text = d.render()
        assert yaml.safe_load(text) == d.as_dict()
        loaded = parse_mapping(text, environ={})
        again = parse_mapping(yaml.safe_dump(d.as_dict(), sort_keys=False), environ={})
        assert loaded.tables == again.tables
        assert loaded.options == again.options
        names = [t.name for t in d.mapped]
        bare = parse_mapping(
            yaml.safe_dump({"version": 1, "tables": dict.fromkeys(names)}, sort_keys=False)
        )
        for mine, default in zip(resolve(loaded, schema), resolve(bare, schema)):
            assert (mine.primary_key, mine.key, mine.counter) == (
                default.primary_key,
                default.key,
                default.counter,
            )
            if mine.table.kind == "hash":
                assert mine.columns == default.columns


def test_odd_identifiers_are_quoted_and_escaped() -> None:
    schema = odd_schema()
    d = scaffold.draft(schema, source="mysql+pymysql://root@h/db")
    mapping = parse_mapping(d.render(), environ={})
    group, tag = resolve(mapping, schema)
    assert group.key.text == "user:group:{id}"
    assert group.columns == ("first name", "a{b}", "yes", "#x: y", "ünï")
    assert group.counter is not None and group.counter.render({}) == "user:group:id"
    assert [u.columns for u in group.table.unique] == [("first name",)]
    plan = TablePlan(group)
    row = [b"7", b"Ken T", b"braces", b"no", b"p: q", None]
    row_in_select = [row[["id", "first name", "a{b}", "yes", "#x: y", "ünï"].index(c)]
                     for c in plan.select]  # fmt: skip
    commands, _ = plan.plan([row_in_select])
    assert (b"HSET", b"user:group:7", b"first name", b"Ken T", b"a{b}", b"braces",
            b"yes", b"no", b"#x: y", b"p: q") in commands  # fmt: skip
    assert tag.table.kind == "none"
    assert [s.key.render({"b id": "1", "tag: name": "ruby"}) for s in tag.table.sets] == [
        "tag {x}:b id:1",
        "tag {x}:tag: name:ruby",
    ]
    text = d.render()
    assert "br: left out: key column '{k}' has a brace" in text


def test_tables_option_checks_names() -> None:
    with pytest.raises(SourceError, match="'emp_view', which is a view"):
        scaffold.draft(sample_schema(), source=URL, tables=["emp_view"])
    with pytest.raises(SourceError) as e:
        scaffold.draft(sample_schema(), source=URL, tables=["empp"])
    assert e.value.hint == "did you mean 'emp'?"
    only = scaffold.draft(sample_schema(), source=URL, tables=["dept"])
    assert [t.name for t in only.tables] == ["dept"]


# -- against the real server ------------------------------------------------------------------

ODD_SQL = """
CREATE TABLE `user:group` (
  id INT PRIMARY KEY, `first name` VARCHAR(40) NOT NULL, `a{b}` VARCHAR(10),
  body TEXT, UNIQUE KEY (`first name`), FULLTEXT KEY ft (body)
);
CREATE TABLE `order` (id INT PRIMARY KEY, grp INT, FOREIGN KEY (grp) REFERENCES `user:group`(id));
CREATE TABLE keyless (a INT, b INT);
CREATE TABLE by_unique (code CHAR(3) NOT NULL, v INT, UNIQUE KEY (code));
CREATE TABLE `tag {x}` (b INT, `t name` VARCHAR(20), PRIMARY KEY (b, `t name`));
CREATE VIEW v_order AS SELECT id FROM `order`;
INSERT INTO `user:group` VALUES (1, 'Ken T', '{x}', 'hello'), (2, 'Dennis', NULL, NULL);
INSERT INTO `order` VALUES (10, 1), (11, 1), (12, NULL);
INSERT INTO by_unique VALUES ('abc', 1), ('xyz', NULL);
INSERT INTO `tag {x}` VALUES (1, 'ruby'), (1, 'web'), (2, 'web');
"""


def test_cli_init_writes_refuses_and_forces(mysql_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mysql_db.run(ODD_SQL)
    runner = CliRunner()
    out = tmp_path / "m.yaml"
    result = runner.invoke(app, ["init", "--source", mysql_db.url, "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "# views skipped (only base tables are migrated): v_order" in text
    assert "keyless: left out: no primary key" in text
    assert "FULLTEXT index ft on (body) left out" in text
    assert "primary_key: [code]" in text
    again = runner.invoke(app, ["init", "--source", mysql_db.url, "-o", str(out)])
    assert again.exit_code == 2
    assert "already exists" in again.output and "--force" in again.output
    out.write_text("changed")
    forced = runner.invoke(app, ["init", "--source", mysql_db.url, "-o", str(out), "--force"])
    assert forced.exit_code == 0 and out.read_text() == text
    stdout = runner.invoke(app, ["init", "--source", mysql_db.url, "--tables", "order"])
    assert stdout.exit_code == 0
    assert "  order:\n    key: order:{id}" in stdout.stdout
    assert yaml.safe_load(stdout.stdout)["tables"] == {
        "order": {
            "key": "order:{id}",
            "columns": ["grp"],
            "counter": "order:id",
            "references": [{"columns": "grp", "table": "user:group"}],
        }
    }


@pytest.mark.smoke
def test_cli_init_then_migrate_odd_names(mysql_db, redis_url, redis_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from migrator.commands import migrate

    mysql_db.run(ODD_SQL)
    out = tmp_path / "m.yaml"
    assert (
        CliRunner().invoke(app, ["init", "--source", mysql_db.url, "-o", str(out)]).exit_code == 0
    )
    migrate(out, source=mysql_db.url, target=redis_url)
    r = redis_client
    assert r.hgetall(b"user:group:1") == {
        b"first name": b"Ken T",
        b"a{b}": b"{x}",
        b"body": b"hello",
    }
    assert r.hgetall(b"user:group:uniques:first name") == {b"Ken T": b"1", b"Dennis": b"2"}
    assert r.smembers(b"order:indices:grp:1") == {b"10", b"11"}
    assert r.get(b"order:id") == b"12"
    assert r.hgetall(b"by_unique:abc") == {b"v": b"1"}
    assert r.hgetall(b"by_unique:xyz") == {b"code": b"xyz"}  # all-NULL row: keyed by its key
    assert r.smembers(b"tag {x}:t name:web") == {b"1", b"2"}
    assert r.smembers(b"tag {x}:b:1") == {b"ruby", b"web"}
    assert not r.keys(b"keyless*") and not r.keys(b"v_order*")


def test_cli_init_errors(mysql_db) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    missing = runner.invoke(app, ["init"], env={"MIGRATOR_SOURCE_URL": ""})
    assert missing.exit_code == 2 and "--source" in missing.output
    bad = "mysql+pymysql://root:topsecret@127.0.0.1:1/x"
    unreachable = runner.invoke(app, ["init", "--source", bad])
    assert unreachable.exit_code == 3
    assert "topsecret" not in unreachable.output and "Traceback" not in unreachable.output
    unknown = runner.invoke(app, ["init", "--source", mysql_db.url, "--tables", "nope"])
    assert unknown.exit_code == 2 and "nope" in unknown.output


def test_init_on_the_samples_gives_the_documents_structures(  # type: ignore[no-untyped-def]
    mysql_db, redis_url, redis_client, tmp_path: Path
) -> None:
    from migrator.commands import migrate

    files = sorted((REPO / "samples").glob("*.sql"))
    assert {f.name for f in files} >= {"emp.sql", "book_tag.sql", "login.sql"}
    for f in files:
        mysql_db.run(f.read_text(encoding="utf-8"))
    out = tmp_path / "samples.yaml"
    assert (
        CliRunner().invoke(app, ["init", "--source", mysql_db.url, "-o", str(out)]).exit_code == 0
    )
    tables = yaml.safe_load(out.read_text())["tables"]
    assert tables["emp"]["unique"] == ["email"] and tables["emp"]["indexes"] == ["mgr_id"]
    assert tables["tag"] == {
        "as": "none",
        "sets": [
            {"key": "tag:tagname:{tagname}", "member": "{book_id}"},
            {"key": "tag:book_id:{book_id}", "member": "{tagname}"},
        ],
    }
    migrate(out, source=mysql_db.url, target=redis_url)
    r = redis_client
    assert r.get(b"emp:id") == b"3"
    assert r.hgetall(b"emp:1") == {b"ename": b"SMITH", b"mgr_id": b"8", b"email": b"foo@gmail.com"}
    assert r.hgetall(b"emp:uniques:email") == {
        b"foo@gmail.com": b"1",
        b"bar@163.com": b"2",
        b"zoo@hotmail.com": b"3",
    }
    assert r.smembers(b"emp:indices:mgr_id:8") == {b"1", b"2"}
    assert r.smembers(b"tag:tagname:ruby") == {b"1", b"2"}
    assert r.smembers(b"tag:book_id:2") == {b"ruby", b"web"}
    assert r.sinter(b"tag:tagname:web", b"tag:tagname:ruby") == {b"2"}
    assert r.sdiff(b"tag:tagname:ruby", b"tag:tagname:web") == {b"1"}
    assert r.hgetall(b"login:uniques:name")[b"ken thompson"] == b"1"
    assert not r.keys(b"tag:indices:*")  # the join sets serve the foreign key
