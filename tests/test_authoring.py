"""Writing a mapping (issue 9 item 6): what ``init`` leaves out and says why, a table without a
primary key mapped by hand, every error of a mapping in one pass, and YAML indentation hints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis
import yaml

from migrator.commands.validate import validate
from migrator.mapping import scaffold
from migrator.mapping.kinds import Kind
from migrator.mapping.loader import parse_mapping
from migrator.mapping.schema import Column, IndexInfo, Schema, TableSchema
from migrator.mapping.validate import check_schema
from migrator.source.mysql import Source
from tests.services import MySQLDatabase


def cli(*args: str, columns: str = "80") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_")}
    env["COLUMNS"] = columns
    program = Path(sys.executable).parent / "migrator"
    return subprocess.run(
        [str(program), *args], capture_output=True, text=True, env=env, timeout=120
    )


# -- init: indexes a Redis index would not serve -----------------------------------------------

INDEXED_SQL = """
CREATE TABLE post (
  id INT PRIMARY KEY, title VARCHAR(300), body TEXT, slug VARCHAR(250), code VARCHAR(20),
  grp INT, author INT,
  KEY title_prefix (title(191)), KEY body_ix (body(100)), UNIQUE KEY slug_prefix (slug(100)),
  KEY code_grp (code, grp), KEY id_grp (id, grp), KEY id_only (id), UNIQUE KEY id_unique (id),
  KEY author (author)
);
"""


def test_introspection_reads_prefix_lengths(mysql_db: MySQLDatabase) -> None:
    mysql_db.run(INDEXED_SQL)
    with Source(mysql_db.url) as src:
        post = src.schema().tables["post"]
    by_name = {ix.name: ix for ix in post.indexes}
    assert by_name["title_prefix"].lengths == (191,)
    assert by_name["body_ix"].lengths == (100,)
    assert by_name["code_grp"].lengths == (None, None)


def test_init_leaves_out_prefix_text_and_primary_key_indexes_saying_why(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    mysql_db.run(INDEXED_SQL)
    done = cli("init", "--source", mysql_db.url)
    assert done.returncode == 0, done.stderr
    body = yaml.safe_load(done.stdout)["tables"]["post"]
    assert sorted(map(str, body["indexes"])) == ["['code', 'grp']", "author"]
    assert "unique" not in body
    text = done.stdout
    assert "index title_prefix on (title(191)) left out: a prefix index" in text
    assert "index body_ix on (body(100)) left out: body is a TEXT column" in text
    assert "UNIQUE index slug_prefix on (slug(100)) left out: a prefix index" in text
    assert "index id_grp on (id, grp) left out: it contains the primary key" in text
    assert "index id_only on (id) left out: it contains the primary key" in text
    assert "UNIQUE index id_unique on (id): the primary key itself" in text
    # every comment stays a comment: the draft loads and validates
    path = tmp_path / "post.yaml"
    path.write_text(text, encoding="utf-8")
    report = validate(path, source=mysql_db.url, environ={})
    assert report.errors == [], report.problems


def test_pure_draft_of_an_index_on_a_blob_column() -> None:
    t = TableSchema(
        "doc",
        (
            Column("id", Kind.INTEGER, False, "int(11)"),
            Column("data", Kind.BINARY, True, "mediumblob"),
            Column("tag", Kind.TEXT, True, "varchar(20)"),
        ),
        ("id",),
        (
            IndexInfo("data_ix", ("data",), False, lengths=(None,)),
            IndexInfo("tag", ("tag",), False),
        ),
        (),
    )
    d = scaffold.draft(Schema("db", {"doc": t}, ()), source="mysql+pymysql://u@h/db")
    (doc,) = d.tables
    assert doc.body is not None and doc.body["indexes"] == ["tag"]
    assert any("data_ix on (data) left out: data is a MEDIUMBLOB column" in n for n in doc.notes)


# -- a table without a primary key, mapped by hand ---------------------------------------------

SIGNUPS_SQL = """
CREATE TABLE wp_signups (activation_key VARCHAR(50) NOT NULL, user_login VARCHAR(60),
  meta LONGTEXT, KEY activation_key (activation_key));
INSERT INTO wp_signups VALUES ('k1', 'bob', '{}'), ('k2', 'amy', 'x'), ('k3', 'eve', NULL);
"""
BY_HAND = """\
version: 1
source: {url}
tables:
  wp_signups:
    primary_key: [activation_key]
    key: "wp_signups:{{activation_key}}"
"""


def by_hand(db: MySQLDatabase, tmp_path: Path) -> Path:
    path = tmp_path / "wp.yaml"
    path.write_text(BY_HAND.format(url=db.url), encoding="utf-8")
    return path


def test_init_suggests_how_to_map_a_table_without_a_key(mysql_db: MySQLDatabase) -> None:
    mysql_db.run(SIGNUPS_SQL)
    done = cli("init", "--source", mysql_db.url)
    assert done.returncode == 0, done.stderr
    assert "wp_signups: left out: no primary key" in done.stdout
    assert "  #     primary_key: [activation_key]\n" in done.stdout
    assert "  #     key: wp_signups:{activation_key}\n" in done.stdout


def test_declared_primary_key_is_trusted_with_a_warning(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mysql_db.run(SIGNUPS_SQL)
    path = by_hand(mysql_db, tmp_path)
    checked = cli("validate", str(path))
    assert checked.returncode == 0, checked.stderr
    assert "warning:" in checked.stderr
    assert "MySQL does not enforce ['activation_key'] as unique" in " ".join(
        checked.stderr.split()  # wrapped at 80 columns
    )
    assert "does not contain the primary key" not in checked.stderr
    done = cli("migrate", str(path), "--target", redis_url)
    assert done.returncode == 0, done.stderr
    assert redis_client.hgetall("wp_signups:k1") == {b"user_login": b"bob", b"meta": b"{}"}
    assert redis_client.hgetall("wp_signups:k3") == {b"user_login": b"eve"}
    verified = cli("verify", str(path), "--target", redis_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "Redis matches MySQL" in verified.stdout


def test_duplicate_declared_keys_are_reported_by_migrate_and_verify(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mysql_db.run(
        SIGNUPS_SQL + "INSERT INTO wp_signups VALUES ('k1', 'dup', 'y'), ('k2', 'x', 'z');"
    )
    path = by_hand(mysql_db, tmp_path)
    checked = cli("validate", str(path))
    assert checked.returncode == 0, checked.stderr
    said = " ".join(checked.stderr.split())
    assert "2 keys of wp_signups shared by several rows today (2 rows beyond one" in said
    assert "GROUP BY `activation_key` HAVING COUNT(*) > 1" in said
    planned = cli("dry-run", str(path), "--sample", "0", columns="200")
    assert planned.returncode == 0, planned.stderr
    assert "2 rows would be overwritten by a row with the same key (2 duplicate keys" in (
        planned.stdout
    )
    assert "total: 5 rows -> 3 keys" in planned.stdout
    done = cli("migrate", str(path), "--target", redis_url, "--json")
    assert done.returncode == 1, done.stderr
    (table,) = json.loads(done.stdout)["tables"]
    assert table["duplicate_keys"] == 2  # k1 and k2 are each the key of two rows
    assert table["duplicate_rows"] == 2  # rows Redis does not hold as they are
    human = cli("migrate", str(path), "--target", redis_url, columns="200")
    assert human.returncode == 1
    assert "2 rows overwritten: 2 duplicate keys" in human.stdout
    assert "primary_key" in human.stderr and "duplicate" in human.stderr
    verified = cli("verify", str(path), "--target", redis_url)
    assert verified.returncode == 1
    said = " ".join(verified.stdout.split())  # lines joined where they were wrapped
    assert "2 duplicate keys: the declared primary_key" in said
    assert "GROUP BY `activation_key` HAVING COUNT(*) > 1" in said
    assert "Redis matches MySQL" not in verified.stdout


def test_real_primary_key_still_refuses_a_key_without_it(tmp_path: Path) -> None:
    """Trust is for a declared primary_key; a key that drops the real one is still an error."""
    schema = Schema(
        "db",
        {
            "emp": TableSchema(
                "emp",
                (Column("id", Kind.INTEGER, False, "int"), Column("n", Kind.TEXT, False, "text")),
                ("id",),
                (),
                (),
            )
        },
        (),
    )
    m = parse_mapping('version: 1\ntables:\n  emp:\n    key: "emp:{n}"\n', file="m.yaml")
    (p,) = check_schema(m, schema)
    assert p.level == "error" and "does not contain the primary key ['id']" in p.message
    declared = parse_mapping(
        'version: 1\ntables:\n  emp:\n    primary_key: [n]\n    key: "emp:{n}"\n', file="m.yaml"
    )
    (w,) = check_schema(declared, schema)
    assert w.level == "warning" and "does not enforce ['n'] as unique" in w.message


# -- validate: every error in one pass; indentation hints ----------------------------------------


def test_validate_reports_unknown_columns_and_a_non_unique_key_together(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY, name VARCHAR(20), mgr INT);")
    path = tmp_path / "m.yaml"
    path.write_text(
        f"version: 1\nsource: {mysql_db.url}\ntables:\n  emp:\n"
        '    key: "emp:{name}"\n    columns: [nme, mgr]\n    indexes: [mgrr]\n'
    )
    done = cli("validate", str(path))
    assert done.returncode == 2
    assert "unknown column 'nme'" in done.stderr and "unknown column 'mgrr'" in done.stderr
    assert "does not contain the primary key ['id']" in " ".join(done.stderr.split())
    assert f"{path}: 3 errors" in " ".join(done.stderr.split())


def test_loader_reports_an_error_in_every_table_at_once(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\ntables:\n  emp:\n    indexs: [a]\n  dept:\n    as: hashes\n"
        "  book:\n    key: 'book:{'\n"
    )
    report = validate(path, environ={})
    assert [(p.path, p.line) for p in report.errors] == [
        ("tables.emp.indexs", 4),
        ("tables.dept.as", 6),
        ("tables.book.key", 8),
    ]


def test_loader_reports_every_mistaken_key_of_a_table(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\ntables:\n  emp:\n    indexs: [a]\n    as: hashes\n"
        "    counter: 'emp:{id}'\n    sorted: [{key: top}]\n    dept:\n"
    )
    report = validate(path, environ={})
    got = {p.path: p for p in report.errors}
    assert sorted(got) == [
        "tables.emp.as", "tables.emp.counter", "tables.emp.dept", "tables.emp.indexs",
        "tables.emp.sorted[0]",
    ]  # fmt: skip
    assert got["tables.emp.indexs"].hint == "did you mean 'indexes'?"
    assert got["tables.emp.dept"].hint == "if 'dept' is a table, indent it as much as 'emp'"
    assert "'score' is required" in got["tables.emp.sorted[0]"].message


def test_yaml_indentation_mistakes_get_a_hint(tmp_path: Path) -> None:
    cases = {
        # a table setting one level too far left: read as a table named 'indexes'
        "version: 1\ntables:\n  emp:\n    columns: [a]\n  indexes: [b]\n": (
            "tables.indexes",
            5,
            "indent it under its table",
        ),
        # a sibling less indented than the first: YAML cannot parse it
        "version: 1\ntables:\n  emp:\n    columns: [a]\n   indexes: [b]\n": ("", 5, "indentation"),
        # a tab
        "version: 1\ntables:\n  emp:\n\tcolumns: [a]\n": ("", 4, "spaces, not tabs"),
        # a table setting at the top level
        "version: 1\ntables:\n  emp: {}\ncolumns: [a]\n": ("columns", 4, "indent it under"),
        # a deeper line under a scalar; a colon-space in a plain value
        "version: 1\ntables:\n  emp:\n    key: emp\n     columns: [a]\n": ("", 5, "indentation"),
        "version: 1\ntables:\n  emp:\n    key: emp: {id}\n": ("", 4, 'quotes (key: "emp: {id}")'),
        # a quote left open
        'version: 1\ntables:\n  emp:\n    key: "emp:{id}\n    columns: [a]\n': (
            "",
            6,
            "the quote opened on line 4 is not closed",
        ),
        # a template starting with a brace, unquoted: YAML reads a mapping
        "version: 1\ntables:\n  tag:\n    as: none\n    sets:\n      - key: 'tag:{t}'\n"
        "        member: {book_id}\n": ("tables.tag.sets[0].member", 7, 'quote it, "{book_id}"'),
    }
    for text, (path_, line, hint) in cases.items():
        f = tmp_path / "m.yaml"
        f.write_text(text)
        report = validate(f, environ={})
        (p,) = report.errors
        assert (p.path, p.line) == (path_, line), (text, p)
        assert p.hint and hint in p.hint, (text, p)
