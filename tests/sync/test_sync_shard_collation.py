"""Latest lists over shards ordered by text under a collation (docs/sharding.md#migrate): a
private Oracle MySQL 9.7 (east) and a private MariaDB (west) each hold a shard of a table whose
latest list is ordered by a VARCHAR under a case- and accent-insensitive PAD SPACE collation,
with case, accent and trailing-space variants of the same text on both shards. ``migrate``,
``verify`` and each shard's ``sync`` rank the union's rows by the server's comparison key
(``WEIGHT_STRING``), so the list is what ``ORDER BY name DESC, id DESC LIMIT N`` over the union
gives, asked of a server (both engines, which agree), not sorted in Python; candidates an older
migrator ranked by their bytes are ranked again when the shard's process starts; a column
ordering a list under another collation on each shard is refused (exit 2)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate
from migrator.commands.sync import sync
from migrator.commands.verify import verify
from migrator.mapping.kinds import Kind
from migrator.source.order import order_key
from migrator.sync.shard_latest import MERGE, candidates_key
from tests.services import create_database
from tests.sync.shard_scene import servers  # noqa: F401  (the fixture)

SCHEMA = """
CREATE TABLE word (id INT PRIMARY KEY, name VARCHAR(20) COLLATE {collation}, note INT);
"""
TABLES = """tables:
  word:
    latest: [{key: "word:latest", order_by: name, limit: 7}]
"""
#: the same few words in case, accent and trailing-space variants (equal under the collation;
#: their bytes order otherwise: 'Zoe' < 'zoe' < 'Zoé' < 'zoe ' byte for byte), and followed by
#: a character below the space (a tab, a newline: before the word under PAD SPACE), a
#: no-break space and another word
WORDS = ["zoe", "Zoe", "ZOE", "zoé", "Zoé ", "zoe  ", "zoe\t", "Zoe\n ", "zoe\u00a0", "zoe z",
         "yann", "Yann", "yánn ", "ÿann", "yann\t", "xu", "Xu ", "XU", "b", "B", "bé"]  # fmt: skip
#: each shard's primary keys
BASE = {"east": 1000, "west": 0}
LIMIT = 7


def _shards(hosts: dict[str, Any], tmp_path: Path, collations: dict[str, str]) -> tuple[dict, str]:
    """A fresh database per shard, 30 rows of its own with random words, and the mapping."""
    dbs = {}
    for name, server in hosts.items():
        db = create_database(server.url, f"shard_coll_{name}_{random.randrange(10**8)}")
        db.run(SCHEMA.format(collation=collations[name]))
        rng = random.Random(len(name))
        db.insert("INSERT INTO word VALUES (%s, %s, %s)",
                  [(BASE[name] + i, rng.choice(WORDS), i) for i in range(1, 31)])  # fmt: skip
        dbs[name] = db
    path = tmp_path / "words.yaml"
    path.write_text(
        "version: 1\nsources:\n"
        + "".join(f'  - {{name: {n}, url: "{db.url}"}}\n' for n, db in dbs.items())
        + TABLES
    )
    return dbs, str(path)


def _write(db: Any, base: int, seed: int, steps: int) -> None:
    """Random writes on one shard: words changed, rows inserted and deleted."""
    rng = random.Random(seed)
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for _ in range(steps):
                roll, i = rng.random(), base + rng.randint(1, 40)
                if roll < 0.3:
                    cur.execute("REPLACE INTO word VALUES (%s, %s, %s)", (i, rng.choice(WORDS), 0))
                elif roll < 0.45:
                    cur.execute("DELETE FROM word WHERE id = %s", (i,))
                else:
                    cur.execute("UPDATE word SET name = %s WHERE id = %s", (rng.choice(WORDS), i))
    finally:
        conn.close()


def _newest(hosts: dict[str, Any], dbs: dict[str, Any], collation: str) -> list[bytes]:
    """``ORDER BY name DESC, id DESC LIMIT N`` over the union of the shards' rows, asked of
    each engine (a database of the union's rows on each server): both must answer alike."""
    rows = [r for db in dbs.values() for r in db.query("SELECT id, name, note FROM word")]
    answers = []
    for server in hosts.values():
        union = create_database(server.url, f"shard_coll_union_{random.randrange(10**8)}")
        union.run(SCHEMA.format(collation=collation))
        union.insert("INSERT INTO word VALUES (%s, %s, %s)", rows)
        got = union.query(f"SELECT id FROM word ORDER BY name DESC, id DESC LIMIT {LIMIT}")
        answers.append([str(r[0]).encode() for r in got])
    assert answers[0] == answers[1], answers  # the engines order the union alike
    return answers[0]


def _caught_up(mapping: str, dbs: dict[str, Any], redis_url: str) -> None:
    for name in dbs:
        report = sync(mapping, target=redis_url, shard=name, until_caught_up=True)
        assert report.exit_code == 0, report


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_unicode_ci"])
def test_a_latest_list_over_text_is_ordered_as_the_servers_collation_orders_the_union(
    servers: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    redis_url: str,
    collation: str,
) -> None:
    dbs, mapping = _shards(servers, tmp_path, {"east": collation, "west": collation})
    client = redis.Redis.from_url(redis_url)
    assert migrate(mapping, target=redis_url).exit_code == 0
    assert client.lrange("word:latest", 0, -1) == _newest(servers, dbs, collation)
    checked = verify(mapping, target=redis_url)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]
    _caught_up(mapping, dbs, redis_url)  # each shard's first load
    for seed in (1, 2, 3):  # random writes on both shards, each shard's process following
        for k, (name, db) in enumerate(dbs.items()):
            _write(db, BASE[name], 10 * seed + k, 60)
        _caught_up(mapping, dbs, redis_url)
        assert client.lrange("word:latest", 0, -1) == _newest(servers, dbs, collation), seed
    checked = verify(mapping, target=redis_url)
    assert checked.exit_code == 0, json.dumps(checked.as_dict(), default=str)[:3000]

    # west's candidates as an older migrator ranked them (the text's bytes), the list merged
    # so: west's process, started again with nothing to apply, ranks them as the server does
    mine = candidates_key("words", "west", b"word:latest")
    names = dict(dbs["west"].query("SELECT id, name FROM word"))
    old = [order_key(names[int(m.split(b"\0")[1])].encode(), Kind.TEXT).hex().encode()
           + order_key(m.split(b"\0")[1], Kind.INTEGER).hex().encode() + b"\0"
           + m.split(b"\0")[1] for m in client.zrange(mine, 0, -1)]  # fmt: skip
    client.delete(mine)
    client.zadd(mine, dict.fromkeys(old, 0))
    every = [candidates_key("words", n, b"word:latest") for n in dbs]
    client.eval(MERGE, 1 + len(every), b"word:latest", *every, LIMIT)
    assert client.lrange("word:latest", 0, -1) != _newest(servers, dbs, collation)
    assert sync(mapping, target=redis_url, shard="west", until_caught_up=True).exit_code == 0
    assert client.lrange("word:latest", 0, -1) == _newest(servers, dbs, collation)


def test_a_list_ordered_under_another_collation_on_each_shard_is_refused(
    servers: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    redis_url: str,
) -> None:
    """MySQL's default utf8mb4_0900_ai_ci (east) beside MariaDB's utf8mb4_general_ci (west):
    their comparison keys do not compare, so validate, migrate, verify and dry-run refuse
    (exit 2), naming the column and each shard's collation; nothing is written."""
    collations = {"east": "utf8mb4_0900_ai_ci", "west": "utf8mb4_general_ci"}
    _, mapping = _shards(servers, tmp_path, collations)
    for command in (["validate", mapping], ["migrate", mapping, "--target", redis_url],
                    ["verify", mapping, "--target", redis_url], ["dry-run", mapping]):  # fmt: skip
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        flat = " ".join(result.output.split())
        assert "word.name" in flat and "utf8mb4_0900_ai_ci on east" in flat, flat
        assert "utf8mb4_general_ci on west" in flat, flat
    assert redis.Redis.from_url(redis_url).dbsize() == 0


#: values whose comparison keys the engines are compared on: case, accents, ligatures and
#: expansions, letters several languages order apart, kana, hangul, CJK, symbols, an emoji
PROBE = ["a", "A", "á", "ä", "Ä", "ae", "æ", "ß", "ss", "ø", "Ö", "ı", "İ", "i", "ﬁ", "😀", "𝐀",
         "中", "Dž", "ǅ", "ŉ", "ｱ", "ア", "Ω", "Ω", "ǰ", "ch", "ll", "ñ", "å", "aa", "þ", "ð",
         "đ", "ł", "œ", "ĳ", "ŋ", "ə", "\u0300a", "a\u0300", "·", "-", "'", "ヴ", "ｳﾞ", "가",
         "\u00a0", "z", "Ž", "č", "ç", "ş", "ğ", "ő", "ô", "ơ", "Ą", "ę", "a b", "ab "]  # fmt: skip


def test_both_engines_give_the_same_comparison_keys_under_each_collation_they_share(
    servers: dict[str, Any],  # noqa: F811
) -> None:
    """Each collation both servers know (by name), the comparison key migrator ranks text by
    (WEIGHT_STRING of the value, trailing spaces cut: source/selects.py ``weight_expr``) of
    every PROBE value: the same on MariaDB and on MySQL 9.7, so shards on the two engines
    under one collation rank their rows as one server would."""
    dbs = {e: create_database(server.url, f"shard_coll_probe_{random.randrange(10**8)}")
           for e, server in servers.items()}  # fmt: skip
    names = {e: dict(db.query("SELECT COLLATION_NAME, CHARACTER_SET_NAME FROM "
                              "information_schema.COLLATIONS WHERE CHARACTER_SET_NAME <> 'binary'"))
             for e, db in dbs.items()}  # fmt: skip
    shared = sorted(set(names["east"]) & set(names["west"]))
    assert {"utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin"} <= set(shared)
    keys: dict[str, dict[str, list[Any]]] = {e: {} for e in dbs}
    for engine, db in dbs.items():
        for collation in shared:
            charset = names[engine][collation]
            exprs = ", ".join(
                f"HEX(WEIGHT_STRING(RTRIM(CONVERT(%s USING {charset}) COLLATE {collation})))"
                for _ in PROBE
            )
            (row,) = db.query(f"SELECT {exprs}", PROBE)
            keys[engine][collation] = list(row)
    differ = [c for c in shared if keys["east"][c] != keys["west"][c]]
    assert differ == [], differ
    assert "utf8mb4_0900_ai_ci" in names["east"] and "utf8mb4_0900_ai_ci" not in names["west"]
