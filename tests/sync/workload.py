"""A schema with every structure sync maintains, its mapping, and random writes from a seed:
updates that move unique, index, score and order values, NULL toggles, primary-key changes,
deletes, inserts, join-table changes, multi-row transactions and rollbacks."""

from __future__ import annotations

import random
from typing import Any

import pymysql

SCHEMA = """
CREATE TABLE dept (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, UNIQUE KEY (name));
CREATE TABLE emp (
  id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(60), login VARCHAR(30),
  dept_id INT, title VARCHAR(20), salary DECIMAL(10,2), hired DATETIME(3), note TEXT,
  UNIQUE KEY (email), UNIQUE KEY (login), KEY (dept_id, title), KEY (title));
CREATE TABLE tag (emp_id INT NOT NULL, tag VARCHAR(20) NOT NULL, PRIMARY KEY (emp_id, tag));
CREATE TABLE stats (id INT PRIMARY KEY, logins INT, last_ip VARCHAR(40));
CREATE TABLE other (id INT PRIMARY KEY, v INT);
INSERT INTO dept VALUES (1, 'sales'), (2, 'ops'), (3, 'dev');
INSERT INTO emp (email, login, dept_id, title, salary, hired) VALUES
  ('a@x', 'a', 1, 'boss', 100.50, '2020-01-01 10:00:00.123'),
  ('b@x', 'b', 2, 'dev', NULL, '2021-05-05 00:00:00'),
  (NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO tag VALUES (1, 'ruby'), (1, 'web'), (2, 'web');
INSERT INTO stats VALUES (1, 5, '10.0.0.1'), (2, NULL, NULL);
"""

MAPPING = """
version: 1
tables:
  dept:
    unique: [name]
  emp:
    unique:
      - email
      - columns: [login]
        key: "login:{login}:id"
    indexes:
      - [dept_id, title]
      - title
    references:
      - columns: [dept_id]
        table: dept
    sorted:
      - key: "emp:by:salary"
        score: salary
      - key: "emp:by:hired"
        score: hired
    latest:
      - key: "emp:latest"
        order_by: hired
        limit: 5
  tag:
    as: none
    sets:
      - key: "tag:{tag}"
        member: "{emp_id}"
      - key: "emp_tags:{emp_id}"
        member: "{tag}"
  stats:
    as: columns
"""

TITLES = ["boss", "dev", "ops", "intern", None]
TAGS = ["ruby", "web", "go", "db"]


class Writer:
    """Random writes from one seed; ``step()`` does one transaction (or rollback)."""

    def __init__(self, conn: pymysql.Connection, seed: int) -> None:  # type: ignore[type-arg]
        self.conn, self.rng, self.seed, self.n = conn, random.Random(seed), seed, 0

    def _unique(self, prefix: str) -> str | None:
        self.n += 1
        return None if self.rng.random() < 0.15 else f"{prefix}{self.seed}_{self.n}"

    def _ids(self, cur: Any) -> list[int]:
        cur.execute("SELECT id FROM emp")
        return [r[0] for r in cur.fetchall()]

    def _hired(self) -> str | None:
        r = self.rng
        if r.random() < 0.15:
            return None
        day = f"20{r.randint(10, 29)}-0{r.randint(1, 9)}-1{r.randint(0, 9)}"
        return f"{day} 0{r.randint(0, 9)}:00:00.{r.randint(0, 999):03d}"

    def one(self, cur: Any) -> None:
        r = self.rng
        ids = self._ids(cur)
        op = r.choice(["insert", "insert", "update", "update", "update", "delete", "pk", "tag",
                       "untag", "dept", "stats", "other"])  # fmt: skip
        if op == "insert" or not ids:
            cur.execute(
                "INSERT INTO emp (email, login, dept_id, title, salary, hired, note) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (self._unique("e"), self._unique("l"), r.choice([1, 2, 3, None]),
                 r.choice(TITLES), r.choice([None, f"{r.randint(1, 99999)}.{r.randint(0, 99)}"]),
                 self._hired(), r.choice([None, "x" * r.randint(0, 30)])),
            )  # fmt: skip
            return
        emp = r.choice(ids)
        if op == "update":
            col = r.choice(["email", "login", "dept_id", "title", "salary", "hired", "note"])
            value: Any = {
                "email": self._unique("e"), "login": self._unique("l"),
                "dept_id": r.choice([1, 2, 3, None]), "title": r.choice(TITLES),
                "salary": r.choice([None, r.randint(1, 99999)]), "hired": self._hired(),
                "note": r.choice([None, "", "note"]),
            }[col]  # fmt: skip
            cur.execute(f"UPDATE emp SET {col} = %s WHERE id = %s", (value, emp))
        elif op == "delete":
            cur.execute("DELETE FROM emp WHERE id = %s", (emp,))
            cur.execute("DELETE FROM tag WHERE emp_id = %s", (emp,))
        elif op == "pk":
            new = emp + 100_000 * self.rng.randint(1, 9)
            cur.execute("SELECT 1 FROM emp WHERE id = %s", (new,))
            if not cur.fetchall():
                cur.execute("UPDATE emp SET id = %s WHERE id = %s", (new, emp))
                cur.execute("UPDATE tag SET emp_id = %s WHERE emp_id = %s", (new, emp))
        elif op == "tag":
            cur.execute("INSERT IGNORE INTO tag VALUES (%s, %s)", (emp, r.choice(TAGS)))
        elif op == "untag":
            cur.execute("DELETE FROM tag WHERE emp_id = %s AND tag = %s", (emp, r.choice(TAGS)))
        elif op == "dept":
            cur.execute(
                "UPDATE dept SET name = %s WHERE id = %s",
                (self._unique("d") or "x", r.randint(1, 3)),
            )
        elif op == "stats":
            cur.execute(
                "INSERT INTO stats VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE "
                "logins = VALUES(logins), last_ip = VALUES(last_ip)",
                (r.randint(1, 20), r.choice([None, r.randint(0, 9)]), r.choice([None, "1.2.3.4"])),
            )
        else:
            cur.execute("REPLACE INTO other VALUES (%s, %s)", (r.randint(1, 5), r.randint(0, 9)))

    def step(self) -> None:
        r = self.rng
        cur = self.conn.cursor()
        try:
            self.conn.begin()
            for _ in range(r.choice([1, 1, 1, 2, 5])):
                try:
                    self.one(cur)
                except pymysql.err.IntegrityError:
                    pass  # a duplicate unique value: that statement did nothing
            if r.random() < 0.1:
                self.conn.rollback()
            else:
                self.conn.commit()
        except pymysql.err.OperationalError as e:
            # writers of several seeds run side by side: a deadlock (1213) or lock wait
            # timeout (1205) rolls this transaction back, which sync must follow all the same
            if e.args[0] not in (1205, 1213):
                raise
            self.conn.rollback()
        finally:
            cur.close()
