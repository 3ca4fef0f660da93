"""``migrator init --shard NAME=URL ...`` (docs/sharding.md#init): a ``sources:`` mapping drafted
from the first shard once every shard holds the same tables, which ``validate``, ``migrate``
and ``verify`` then take as it is; shards whose tables differ are refused (exit 2, naming the
difference), a shard that does not answer exits 3 naming it, and a wrong ``--shard`` exits 2
with the fix. No password reaches the draft or the output. Shards are databases of their own
on the engine's server."""

from __future__ import annotations

from pathlib import Path

import redis
import yaml
from typer.testing import CliRunner

from migrator.cli import app
from tests.services import MySQLDatabase
from tests.test_shards import EAST, WEST, _fill, _shard, two  # noqa: F401  (fixture)

ORDERS = """
CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, total DECIMAL(8,2),
  FOREIGN KEY (customer_id) REFERENCES customer (id) ON DELETE CASCADE);
"""


def _init(tmp_path: Path, *shards: str) -> tuple[int, str, Path]:
    path = tmp_path / "drafted.yaml"
    args = ["init", *(x for s in shards for x in ("--shard", s)), "-o", str(path), "--force"]
    done = CliRunner(env={"MIGRATOR_SOURCE_URL": None}).invoke(app, args)
    return done.exit_code, " ".join(done.output.split()), path


def test_init_drafts_a_sharded_mapping_that_migrate_and_verify_take(
    two: tuple[MySQLDatabase, MySQLDatabase],  # noqa: F811
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    east, west = two
    for db, rows in ((east, EAST), (west, WEST)):
        db.run(ORDERS)
        _fill(db, rows)
        db.run(f"INSERT INTO orders VALUES ({rows[0][0]}, {rows[0][0]}, 9.50)")
    code, said, path = _init(tmp_path, f"east={east.url}", f"west={west.url}")
    assert code == 0, said
    drafted = yaml.safe_load(path.read_text())
    assert drafted["sources"] == [
        {"name": "east", "url": east.url},
        {"name": "west", "url": west.url},
    ]
    assert "source" not in drafted and set(drafted["tables"]) == {"customer", "orders"}
    assert "the first of 2 shards" in path.read_text()
    runner = CliRunner(env={"MIGRATOR_SOURCE_URL": None})
    for command in (["validate"], ["migrate", "--target", redis_url],
                    ["verify", "--target", redis_url]):  # fmt: skip
        done = runner.invoke(app, [command[0], str(path), *command[1:]])
        assert done.exit_code == 0, done.output
    assert redis_client.exists("customer:1", "customer:101", "orders:1", "orders:101") == 4
    assert redis_client.get("customer:id") == b"102"  # the highest key over both shards


def test_init_refuses_shards_whose_tables_differ_and_names_a_silent_one(
    two: tuple[MySQLDatabase, MySQLDatabase],  # noqa: F811
    mysql_server_url: str,
    tmp_path: Path,
) -> None:
    east, west = two
    west.run("ALTER TABLE customer ADD COLUMN tier INT")
    code, said, path = _init(tmp_path, f"east={east.url}", f"west={west.url}")
    assert code == 2 and "the shards do not hold one schema" in said and "tier" in said, said
    assert not path.exists()
    # a third shard with a password, on a port where no server answers: exit 3, named, masked
    dead = "mysql+pymysql://app:s3cret@127.0.0.1:1/shop"
    code, said, _ = _init(tmp_path, f"east={east.url}", f"north={dead}")
    assert code == 3 and "shard north" in said and "s3cret" not in said, said


def test_a_wrong_shard_option_says_the_form(tmp_path: Path, mysql_server_url: str) -> None:
    url = "mysql+pymysql://app:s3cret@127.0.0.1:3306/shop"
    for shards, why in (
        ((url, f"west={url}"), "is not NAME=URL"),
        ((f"e st={url}", f"west={url}"), "is not NAME=URL"),
        ((f"east={url}", f"east={url}"), "two shards are named 'east'"),
        ((f"east={url}",), "names one shard"),
    ):
        code, said, _ = _init(tmp_path, *shards)
        assert code == 2 and why in said and "s3cret" not in said, said
    both = CliRunner().invoke(app, ["init", "--source", url, "--shard", f"e={url}",
                                    "--shard", f"w={url}"])  # fmt: skip
    assert both.exit_code == 2 and "not both" in " ".join(both.output.split())


def test_a_shard_password_is_drafted_as_its_own_variable() -> None:
    from migrator.commands.init import password_variable
    from migrator.mapping.scaffold import source_setting

    assert password_variable("shard-01") == "MYSQL_PASSWORD_SHARD_01"
    url = "mysql+pymysql://app:s3cret@h:3306/shop"
    assert source_setting(url, password_variable("east")) == (
        "mysql+pymysql://app:${MYSQL_PASSWORD_EAST:-}@h:3306/shop"
    )
