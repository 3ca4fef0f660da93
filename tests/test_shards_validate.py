"""``migrator validate`` of a sharded mapping (``sources:``): every shard checked as one server
is, a problem met on some shards naming them, and the shards compared with each other
(mapping/shard_schemas.py) — on a MariaDB shard and an Oracle MySQL 9.7 shard of one schema,
whose engines spell some types otherwise."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import validate
from migrator.errors import ConnectError
from tests.services import MySQLDatabase, create_database, drop_database, new_database_name

SCHEMA = """
CREATE TABLE customer (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, balance DECIMAL(10,2),
  joined DATETIME(3), tags JSON, flag TINYINT, UNIQUE KEY (name));
CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY, customer_id INT NOT NULL, KEY (customer_id));
"""
MIXED = "the shards are a MariaDB and an Oracle MySQL server: one schema, two engines"


@pytest.fixture
def shards(mysql_server_url: str, oracle_mysql: object) -> Iterator[list[MySQLDatabase]]:
    """A database on the MariaDB server and one on the session's Oracle MySQL 9.7."""
    servers = [mysql_server_url, oracle_mysql.url]  # type: ignore[attr-defined]
    made = [create_database(s, new_database_name()) for s in servers]
    try:
        yield made
    finally:
        for server, db in zip(servers, made):
            drop_database(server, db.name)


def _mapping(tmp_path: Path, east: str, west: str, tables: str = "  customer: {}\n") -> Path:
    path = tmp_path / "shards.yaml"
    path.write_text(
        f"version: 1\nsources:\n  - {{name: east, url: '{east}'}}\n"
        f"  - {{name: west, url: '{west}'}}\ntables:\n{tables}"
    )
    return path


@pytest.mark.engine("mariadb", why=MIXED)
def test_one_schema_on_two_engines_passes(shards: list[MySQLDatabase], tmp_path: Path) -> None:
    """int(11) beside int, MariaDB's JSON beside MySQL's, two default collations: no difference."""
    east, west = shards
    for db in shards:
        db.run(SCHEMA)
    path = _mapping(tmp_path, east.url, west.url, "  customer: {}\n  orders: {}\n")
    report = validate(path)
    assert report.exit_code == 0 and not report.problems, [str(p) for p in report.problems]
    assert report.source is not None
    assert report.source.startswith("east: mysql+pymysql://") and ", west: " in report.source
    done = CliRunner().invoke(app, ["validate", str(path)])
    assert done.exit_code == 0 and "OK, 2 tables" in " ".join(done.output.split()), done.output


@pytest.mark.engine("mariadb", why=MIXED)
def test_shards_that_differ_are_named_with_the_column_and_the_fix(
    shards: list[MySQLDatabase], tmp_path: Path
) -> None:
    east, west = shards
    east.run(SCHEMA)
    west.run(SCHEMA.replace("DECIMAL(10,2)", "DECIMAL(10,3)").replace(" flag TINYINT,", "")
             .replace("DATETIME(3)", "DATETIME(3), extra INT"))  # fmt: skip
    path = _mapping(tmp_path, east.url, west.url, "  customer: {}\n  orders: {}\n  nope: {}\n")
    as_json = json.loads(CliRunner().invoke(app, ["validate", "--json", str(path)]).stdout)
    errors = {p["message"]: p for p in as_json["problems"] if p["level"] == "error"}
    printed = "decimal(10,2) on east, decimal(10,3) on west"
    assert f"column customer.balance has types whose values print otherwise: {printed}" in errors
    assert "column customer.flag is on east but not on west" in errors
    assert "column customer.extra is on west but not on east" in errors
    assert all(e["path"] == "tables.customer" and "same schema" in e["hint"]
               for m, e in errors.items() if m.startswith("column customer"))  # fmt: skip
    # a problem each shard has in its own words (its database's name) names each shard
    nope = sorted(m for m in errors if "no such table 'nope'" in m)
    assert [m.split(":")[0] for m in nope] == ["on shard east", "on shard west"], nope
    done = CliRunner().invoke(app, ["validate", str(path)])
    assert done.exit_code == 2


@pytest.mark.engine("mariadb", why=MIXED)
def test_a_problem_of_one_shard_names_it(shards: list[MySQLDatabase], tmp_path: Path) -> None:
    east, west = shards
    east.run(SCHEMA)
    west.run(SCHEMA.replace("CREATE TABLE orders", "CREATE TABLE other"))
    path = _mapping(tmp_path, east.url, west.url, "  orders: {}\n")
    messages = [p.message for p in validate(path).errors]
    assert "on shard west: no such table 'orders'" in " ".join(messages), messages
    assert "table orders is on east but not on west" in messages


def test_an_unreachable_shard_is_named_and_a_source_flag_refused(tmp_path: Path) -> None:
    path = _mapping(tmp_path, "mysql+pymysql://root:pw@127.0.0.1:1/a", "mysql+pymysql://r@h/b")
    with pytest.raises(ConnectError) as e:
        validate(path)
    # the shard named with its URL, password masked, as migrate and verify name it
    assert e.value.message.startswith("shard east (") and "pw" not in str(e.value)
    assert "127.0.0.1:1/a" in e.value.message
    done = CliRunner().invoke(app, ["validate", str(path)])
    assert done.exit_code == 3 and "shard east" in done.output and ":pw@" not in done.output
    other = CliRunner().invoke(app, ["validate", str(path), "--source", "mysql+pymysql://x@h/db"])
    assert other.exit_code == 2 and "--source names one server" in other.output
