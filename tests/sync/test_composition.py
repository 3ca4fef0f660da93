"""The vocabulary composes (issue 36 item 3): each pair of features, on a parent ``team`` and
its child ``member`` (ON DELETE CASCADE), followed by ``sync`` under random writes on both
engines, ends with ``verify`` exit 0 and Redis equal to a fresh ``migrate`` of the same rows.
The target is the session's server with JSON and search (tests/modules_server.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis

from migrator.commands import migrate, validate, verify
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from tests.services import create_database, drop_database, new_database_name
from tests.test_workers import snapshot as dump

_ids = iter(range(8700, 8800))
SCHEMA = """
CREATE TABLE team (id INT PRIMARY KEY, name VARCHAR(20), active TINYINT NOT NULL,
  ends DATETIME NULL, score INT, KEY (name));
CREATE TABLE member (id INT PRIMARY KEY, team_id INT NOT NULL, email VARCHAR(40),
  joined DATETIME NOT NULL, tag VARCHAR(20),
  FOREIGN KEY (team_id) REFERENCES team (id) ON DELETE CASCADE);
"""
TEAM, MEMBER = "  team:\n", "  member:\n"
PAIRS = {
    "where_x_references": TEAM + "    where: \"active = 1\"\n" + MEMBER
    + "    indexes: [team_id]\n    references:\n      - {columns: [team_id], table: team}\n",
    "where_x_expire": TEAM + "    where: \"active = 1\"\n    expire: {column: ends}\n"
    + MEMBER + "    indexes: [team_id]\n",
    "where_x_unenforced_unique": TEAM + "    {}\n" + MEMBER + "    where: \"tag <> 'x'\"\n"
    "    indexes: [team_id]\n    unique:\n      - {columns: [email], key: \"m:email:{email}\"}\n",
    "expire_x_unique_string": TEAM + "    {}\n" + MEMBER + "    expire: {column: joined}\n"
    "    indexes: [team_id]\n    unique:\n      - {columns: [email], key: \"m:email:{email}\"}\n",
    "where_x_search": TEAM + "    where: \"active = 1\"\n    indexes: [name]\n"
    "    search: {name: teams}\n" + MEMBER + "    indexes: [team_id]\n",
    "formats_x_search": TEAM + "    {}\n" + MEMBER + "    indexes: [team_id]\n"
    "    formats: {joined: epoch}\n    search: {name: members, numeric: [joined]}\n",
    "formats_x_cascade": TEAM + "    {}\n" + MEMBER + "    formats: {joined: epoch}\n",
    "where_x_nesting": TEAM + "    as: json-string\n    where: \"active = 1\"\n" + MEMBER
    + "    as: none\n    counter: false\n    nest: {in: team, as: members}\n",
    "expire_x_search": TEAM + "    expire: {column: ends}\n    indexes: [name]\n"
    "    search: {name: live}\n" + MEMBER + "    indexes: [team_id]\n",
}  # fmt: skip
FAR = ["'2000-01-01 00:00:00'", "'2999-01-01 00:00:00'", "'2998-06-01 12:00:00'"]
EMAILS = ["a@x", "b@x", "c@x", "d@x"]
#: values of a unique: MySQL does not enforce, shared at the end, are a difference by design
#: (docs/mapping.md): the writes share them on the way, then give each row its own
UNSHARE = "UPDATE member SET email = CONCAT(id, '@own')"
#: pairs sync refuses at start, which validate names with the fix (migrate and verify work):
#: none now (where_x_nesting's teams out of the filter are kept beside the documents with their
#: members: docs/mapping.md#nested-children)
REFUSED: dict[str, str] = {}


class Writer:
    """Random transactions on team and member, as an application would make them."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.teams: list[int] = []
        self.members: dict[int, int] = {}  # member -> its team
        self.next = 1

    def _id(self) -> int:
        self.next += 1
        return self.next

    def one(self) -> str:
        rnd = self.rnd
        pick = rnd.random()
        if not self.teams or pick < 0.2:
            t = self._id()
            self.teams.append(t)
            ends = rnd.choice([*FAR, "NULL"])
            return (f"INSERT INTO team VALUES ({t}, '{rnd.choice(['red', 'blue', 'Red'])}', "
                    f"{rnd.randint(0, 1)}, {ends}, {rnd.randint(0, 99)})")  # fmt: skip
        if pick < 0.5:
            m, t = self._id(), rnd.choice(self.teams)
            self.members[m] = t
            return (f"INSERT INTO member VALUES ({m}, {t}, '{rnd.choice(EMAILS)}', "
                    f"{rnd.choice(FAR)}, '{rnd.choice(['x', 'y', 'z'])}')")  # fmt: skip
        if pick < 0.65:
            t = rnd.choice(self.teams)
            what = rnd.choice(
                [
                    "active = 1 - active",
                    f"ends = {rnd.choice([*FAR, 'NULL'])}",
                    f"name = '{rnd.choice(['red', 'green'])}'",
                    "score = score + 1",
                ]
            )
            return f"UPDATE team SET {what} WHERE id = {t}"
        if pick < 0.85 and self.members:
            m = rnd.choice(list(self.members))
            what = rnd.choice([f"email = '{rnd.choice(EMAILS)}'", f"joined = {rnd.choice(FAR)}",
                               f"tag = '{rnd.choice(['x', 'y'])}'",
                               f"team_id = {self._move(m)}"])  # fmt: skip
            return f"UPDATE member SET {what} WHERE id = {m}"
        if pick < 0.93 and self.members:
            m = rnd.choice(list(self.members))
            del self.members[m]
            return f"DELETE FROM member WHERE id = {m}"
        t = rnd.choice(self.teams)  # the cascade takes its members
        self.teams.remove(t)
        self.members = {m: x for m, x in self.members.items() if x != t}
        return f"DELETE FROM team WHERE id = {t}"

    def _move(self, member: int) -> int:
        self.members[member] = self.rnd.choice(self.teams)
        return self.members[member]


def _keys(client: redis.Redis) -> dict[bytes, tuple[bytes, Any]]:
    return dump(client)


@pytest.mark.parametrize("pair", list(PAIRS))
def test_each_pair_under_sync_ends_equal_to_a_fresh_migrate(  # type: ignore[no-untyped-def]
    binlog_server, modules_server, pair: str, tmp_path
) -> None:
    db = create_database(binlog_server.url, new_database_name())
    modules_server.empty()
    url = modules_server.url
    client = redis.Redis.from_url(url)
    try:
        db.run(SCHEMA)
        text = f"version: 1\nsource: {db.url}\ntables:\n" + PAIRS[pair]
        path = tmp_path / "m.yaml"
        path.write_text(text)
        report = validate(path)
        refusals = [str(p) for p in report.warnings if p.brief]
        assert not report.errors and len(refusals) == (pair in REFUSED), (pair, refusals)
        m = parse_mapping(text, name="pairs")
        writer, sid = Writer(sum(map(ord, pair))), next(_ids)
        if pair in REFUSED:
            assert REFUSED[pair] in refusals[0]
            with pytest.raises(MigratorError) as e:
                sync(m, source=db.url, target=url, until_caught_up=True, server_id=sid)
            assert e.value.exit_code == 2 and REFUSED[pair] in str(e.value.hint)
        for batch in range(4):
            for _ in range(25):
                db.run(writer.one())
            if batch == 3:
                db.run(UNSHARE)
            if pair in REFUSED:
                assert migrate(m, source=db.url, target=url, replace=True).exit_code == 0
                continue
            done = sync(m, source=db.url, target=url, until_caught_up=True, server_id=sid)
            assert done.stopped == "caught up"
        checked = verify(m, source=db.url, target=url)
        assert checked.exit_code == 0, (pair, [(t.table, t.counts, t.examples)
                                               for t in checked.tables if not t.ok])  # fmt: skip
        through_log = _keys(client)
        modules_server.empty()
        assert migrate(m, source=db.url, target=url).exit_code == 0
        migrated = _keys(client)
        differ = sorted(k for k in through_log.keys() | migrated.keys()
                        if through_log.get(k) != migrated.get(k))  # fmt: skip
        shown = [(k, through_log.get(k), migrated.get(k)) for k in differ[:4]]
        assert not differ, f"{pair} ({binlog_server.kind}): sync, migrate: {shown}"
    finally:
        client.close()
        modules_server.empty()
        drop_database(binlog_server.url, db.name)
