"""Field names, value formats and lower() in key templates (docs/mapping.md#fields,
#formats, #key-templates): validate's checks, and migrate, verify (stray keys and fields
read back), dry-run --resp on real servers."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from migrator.commands import dry_run, migrate
from migrator.commands.validate import validate
from migrator.commands.verify import verify
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Template
from tests.services import MySQLDatabase

SCHEMA = """
CREATE TABLE login (
  id INT PRIMARY KEY, name VARCHAR(20) COLLATE utf8mb4_general_ci, login_times INT,
  joined DATETIME(3), seen TIMESTAMP(6) NULL DEFAULT NULL, active TINYINT(1), flag BIT(1),
  score DECIMAL(6,2), d DATE, code VARCHAR(9) COLLATE utf8mb4_bin, UNIQUE KEY (name)
)
"""
ROWS = [
    (1, "Ken", 5, "2020-01-02 03:04:05.250", "2020-01-02 03:04:05.5", 1, 1, "99.50", "1970-01-02",
     "A"),
    (2, "dennis", 0, "1969-12-31 23:59:59.000", None, 0, 0, "-0.00", "0000-00-00", "b"),
    (3, "Über", None, None, None, None, None, "10.00", None, None),
]  # fmt: skip
HASH = """
version: 1
tables:
  login:
    fields: {login_times: times, active: is_active}
    formats: {joined: epoch_ms, seen: iso8601, active: boolean, flag: boolean, score: number,
              d: epoch}
    unique:
      - columns: [name]
        key: "login:{lower(name)}:id"
    sorted: [{key: "login:by:joined", score: joined}]
"""
COLUMNS = """
version: 1
tables:
  login:
    as: columns
    columns: [name, login_times, joined]
    fields: {login_times: times}
    formats: {joined: iso8601}
"""


def _load(db: MySQLDatabase) -> None:
    db.run(SCHEMA)
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
            cur.executemany("INSERT INTO login VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", ROWS)
        conn.commit()
    finally:
        conn.close()


def test_lower_in_a_template() -> None:
    t = Template.parse("login:{lower(name)}:id")
    assert (t.columns, t.render({"name": "KeN"})) == (("name",), "login:ken:id")
    with pytest.raises(ValueError, match="only one is lower"):
        Template.parse("login:{upper(name)}")


def test_migrate_writes_names_and_formats_and_verify_reads_them_back(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _load(mysql_db)
    path = tmp_path / "login.yaml"
    path.write_text(HASH)
    resp = tmp_path / "load.resp"
    dry_run(path, source=mysql_db.url, sample=0, resp_file=resp)
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
    assert redis_client.hgetall("login:1") == {
        b"name": b"Ken", b"times": b"5", b"joined": b"1577934245250",
        b"seen": b"2020-01-02T03:04:05.500000Z", b"is_active": b"true", b"flag": b"true",
        b"score": b"99.5", b"d": b"86400", b"code": b"A",
    }  # fmt: skip
    assert redis_client.hgetall("login:2") == {
        b"name": b"dennis", b"times": b"0", b"joined": b"-1000", b"is_active": b"false",
        b"flag": b"false", b"score": b"0", b"code": b"b",
    }  # fmt: skip
    assert redis_client.hgetall("login:3") == {b"name": "Über".encode(), b"score": b"10"}
    assert redis_client.get("login:ken:id") == b"1"
    assert redis_client.get("login:über:id".encode()) == b"3"
    assert redis_client.zscore("login:by:joined", b"1") == 1577934245.25  # scores unchanged
    written = resp.read_bytes()  # dry-run --resp writes the same keys and values
    for piece in (b"login:ken:id", b"$5\r\ntimes\r\n", b"$13\r\n1577934245250\r\n"):
        assert piece in written, piece
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    # MySQL's own spelling changes; the lowered key does not
    mysql_db.run("UPDATE login SET name = 'KEN' WHERE id = 1")
    report = verify(path, source=mysql_db.url, target=redis_url)
    assert report.exit_code == 1 and "login:1" in str(report.as_dict())  # the name field
    redis_client.hset("login:1", "name", "KEN")
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    # a key of a value no row has, and a field under the column's own name: both found
    redis_client.set("login:bob:id", "9")
    redis_client.hset("login:2", "login_times", "0")
    found = str(verify(path, source=mysql_db.url, target=redis_url).as_dict())
    assert "login:bob:id" in found and "login_times" in found, found
    assert verify(path, source=mysql_db.url, target=redis_url, fix=True).exit_code in (0, 1)
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    assert not redis_client.exists("login:bob:id")


def test_column_strings_take_their_field_names(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _load(mysql_db)
    path = tmp_path / "cols.yaml"
    path.write_text(COLUMNS)
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
    assert redis_client.get("login:1:times") == b"5"
    assert redis_client.get("login:1:joined") == b"2020-01-02T03:04:05.250"
    assert not redis_client.exists("login:1:login_times")
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    redis_client.set("login:1:login_times", "5")
    found = verify(path, source=mysql_db.url, target=redis_url)
    assert found.exit_code == 1 and "login:1:login_times" in str(found.as_dict())


@pytest.mark.parametrize(
    ("change", "level", "message"),
    [
        ("    formats: {login_times: epoch}\n", "error", "no epoch"),
        ("    formats: {login_times: boolean}\n", "error", "no boolean"),
        ("    formats: {name: number}\n", "error", "no number format"),
        ("    fields: {name: login_times}\n", "error", "two columns would be written as the field"),
        ("    columns: [name]\n    formats: {joined: epoch}\n", "error", "is not written"),
        ("    unique: [{columns: [code], key: \"c:{lower(code)}\"}]\n", "error",
         "not case-insensitive"),
        ("    unique: [{columns: [name], key: \"n:{name}\"}]\n", "warning",
         "case-insensitive collation"),
    ],
)  # fmt: skip
def test_validate_says_what_does_not_fit(
    mysql_db: MySQLDatabase, tmp_path: Path, change: str, level: str, message: str
) -> None:
    mysql_db.run(SCHEMA)
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ntables:\n  login:\n" + change)
    report = validate(path, source=mysql_db.url)
    got = [p for p in report.problems if p.level == level and message in p.message]
    assert got, [str(p) for p in report.problems]
    assert report.exit_code == (2 if level == "error" else 0)


def test_bad_shapes_are_refused_by_the_loader() -> None:
    from migrator.errors import MappingError

    with pytest.raises(MappingError, match="unknown format 'epoc'"):
        parse_mapping("version: 1\ntables:\n  t:\n    formats: {a: epoc}\n")
    with pytest.raises(MappingError, match="two columns would be written"):
        parse_mapping("version: 1\ntables:\n  t:\n    fields: {a: x, b: x}\n")


def test_formats_and_fields_are_parts_of_the_fingerprint_and_cascades_follow_both() -> None:
    from migrator.mapping.fingerprint import changes, fingerprint
    from migrator.mapping.resolve import resolve
    from migrator.plan.cascade import followable
    from tests.test_cascade_plan import _plans, _schema

    schema = _schema("SET NULL")
    base = "version: 1\ntables:\n  parent: {}\n  child:\n"
    base += "    references: [{columns: [parent_id], table: parent}]\n"

    def printed(extra: str) -> dict:  # type: ignore[type-arg]
        m = parse_mapping(base + extra)
        return fingerprint(m, resolve(m, schema))

    assert changes(printed(""), printed(""), ["child"]) == []
    assert changes(printed(""), printed("    fields: {tag: t}\n"), ["child"]) == [
        "tables.child: fields"
    ]
    assert changes(printed(""), printed("    formats: {e: number}\n"), ["child"]) == [
        "tables.child: formats"
    ]
    rules, refused = followable(_plans(schema, base + "    formats: {e: number}\n"))
    assert len(rules) == 1 and not refused  # formatted values: read from its row images
    rules, refused = followable(_plans(schema, base + "    fields: {tag: t}\n"))
    assert len(rules) == 1 and not refused  # a renamed field is read back by its name


def test_renamed_fields_alone_keep_the_fast_paths_exact(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Without a format or lower(), the generated packer and verify's fast path run, with the
    fields' own names."""
    _load(mysql_db)
    path = tmp_path / "renamed.yaml"
    path.write_text("version: 1\ntables:\n  login:\n    fields: {login_times: times, d: day}\n"
                    "    unique: [name]\n")  # fmt: skip
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
    assert redis_client.hget("login:1", "times") == b"5"
    assert redis_client.hget("login:1", "day") == b"1970-01-02"
    assert not redis_client.hexists("login:1", "login_times")
    assert verify(path, source=mysql_db.url, target=redis_url).exit_code == 0
    redis_client.hset("login:1", "login_times", "5")
    found = verify(path, source=mysql_db.url, target=redis_url)
    assert found.exit_code == 1 and "login_times" in str(found.as_dict())
