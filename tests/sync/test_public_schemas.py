"""Schemas nobody here designed (issue 36: "the test data ... should include schemas you did
not design yourselves"): Oracle's Sakila and datacharmer's employees (tests/data), part of
their rows (tests/sync/public_data.py), under the mapping ``migrator init`` drafts, unchanged.

``sync`` follows random writes that run each schema's own foreign-key rules: parents' key
UPDATEs (Sakila's ``ON UPDATE CASCADE`` on every id, ``film``'s ``upd_film`` trigger moving
``film_text`` too), DELETEs refused by ``ON DELETE RESTRICT`` or cascaded (employees'
``ON DELETE CASCADE`` into ``dept_emp``, ``dept_manager``, ``titles``, ``salaries``;
``payment.rental_id``'s ``ON DELETE SET NULL``), and inserts, updates and deletes of ordinary
rows with text in case, accent and trailing-space variants. On MariaDB and on MySQL 9.7 with
``innodb_native_foreign_keys=ON`` the binary log lacks the rows those rules change; on MySQL
9.7's default SQL-layer foreign keys it carries them. Each run ends with ``verify`` 0 and
Redis equal, key by key (row images included), to a fresh ``migrate``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
import redis

from migrator.commands import init, validate
from migrator.commands.sync import sync
from migrator.mapping.loader import load_mapping
from migrator.mapping.model import Mapping
from tests.sync.helpers import RandomTransactions
from tests.sync.public_data import load_employees, load_sakila
from tests.sync.test_cascade_images import _on_innodb_fk_mysql, _rows, equals_a_fresh_migrate
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql

_ids = iter(range(12600, 12700))

#: text a column may hold in several spellings MySQL's ``_ci`` collations call equal
NAMES = ["Zoë", "ZOE", "zoe ", "Zoe", "ZOË  ", "Renée", "renee", "RENÉE ", "O'Brien", "Ñandú"]


class Writes(RandomTransactions):
    """Random transactions of ``step``s; a statement a foreign key or a unique key refuses
    (RESTRICT, a duplicate) fails alone, as it would for an application."""

    def __init__(self, db: Any, seed: int) -> None:
        super().__init__(db, seed)
        self.refused = self.done = 0
        self.kinds: Counter[str] = Counter()  # statements that changed rows, by kind

    def ids(self, table: str, column: str) -> list[Any]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT `{column}` FROM `{table}` ORDER BY 1")
            return [r[0] for r in cur.fetchall()]

    def unused(self, table: str, column: str, top: int) -> int:
        """An id ``table`` does not hold yet, below ``top`` (the column's type's limit)."""
        taken = set(self.ids(table, column))
        return self.rng.choice([n for n in range(1, top) if n not in taken])

    def pick(self, table: str, column: str) -> Any:
        return self.rng.choice(self.ids(table, column))

    def text(self) -> str:
        return self.rng.choice(NAMES).replace("'", "''")

    def execute(self, cur: Any, sql: str) -> None:
        try:
            if cur.execute(sql):
                self.kinds[" ".join(sql.split()[:4])] += 1
            self.done += 1
        except pymysql.err.IntegrityError:
            self.refused += 1


class SakilaWrites(Writes):
    def moved(self, table: str, top: int, also: str = "") -> str:
        """A parent's key UPDATE (its children follow: ON UPDATE CASCADE everywhere)."""
        col = f"{table}_id"
        new, old = self.unused(table, col, top), self.pick(table, col)
        return f"UPDATE {table} SET {col} = {new}{also} WHERE {col} = {old}"

    def step(self) -> str:  # one branch per kind of write
        r, q, p = self.rng, self.text(), self.pick
        actor, film = p("actor", "actor_id"), p("film", "film_id")
        lang, store, staff = (
            p("language", "language_id"),
            p("store", "store_id"),
            p("staff", "staff_id"),
        )
        customer, rental = p("customer", "customer_id"), p("rental", "rental_id")
        copy = p("inventory", "inventory_id")
        choice = r.randrange(24)
        if choice == 0:  # into film_actor
            return self.moved("actor", 65535)
        if choice == 1:
            names = f"first_name = '{q}', last_name = '{self.text()}'"
            return f"UPDATE actor SET {names} WHERE actor_id = {actor}"
        if choice == 2:
            return f"INSERT INTO actor (first_name, last_name) VALUES ('{q}', '{self.text()}')"
        if choice == 3:  # RESTRICT while it has films
            return f"DELETE FROM actor WHERE actor_id = {actor}"
        if choice in (4, 5):
            return f"INSERT IGNORE INTO film_actor (actor_id, film_id) VALUES ({actor}, {film})"
        if choice == 6:
            return "DELETE FROM film_actor ORDER BY RAND() LIMIT 1"
        if choice == 7:  # film_actor, film_category, inventory follow; upd_film moves film_text
            return self.moved("film", 65535)
        if choice == 8:
            text = f"title = '{q}', description = '{self.text()} '"
            return f"UPDATE film SET {text} WHERE film_id = {film}"
        if choice == 9:  # ins_film writes film_text
            other = r.choice(["NULL", lang])
            cols = "title, language_id, original_language_id"
            return f"INSERT INTO film ({cols}) VALUES ('{q}', {lang}, {other})"
        if choice == 10:  # RESTRICT while it has copies, actors or categories
            return f"DELETE FROM film WHERE film_id = {film}"
        if choice == 11:  # into film's language_id and original_language_id
            return self.moved("language", 255)
        if choice == 12:  # into film_category
            return self.moved("category", 255, f", name = '{q}'")
        if choice == 13:  # into rental
            return self.moved("inventory", 99999)
        if choice == 14:
            return f"INSERT INTO inventory (film_id, store_id) VALUES ({film}, {store})"
        if choice == 15:  # into payment
            return self.moved("rental", 99999)
        if choice == 16:  # payment.rental_id: ON DELETE SET NULL
            return f"DELETE FROM rental WHERE rental_id = {rental}"
        if choice == 17:  # rental_date: the rental_date trigger's NOW()
            cols = "rental_date, inventory_id, customer_id, staff_id"
            return f"INSERT IGNORE INTO rental ({cols}) VALUES (NOW(), {copy}, {customer}, {staff})"
        if choice == 18:
            cols, amount = "customer_id, staff_id, rental_id, amount, payment_date", r.randrange(99)
            values = f"{customer}, {staff}, {rental}, {amount}.5, NOW()"
            return f"INSERT INTO payment ({cols}) VALUES ({values})"
        if choice == 19:  # into payment and rental
            return self.moved("customer", 65535, f", first_name = '{q}'")
        if choice == 20:  # into customer, staff and store
            return self.moved("address", 65535, f", district = '{q}'")
        if choice == 21:  # into address; country's into city
            return (
                self.moved("city", 65535, f", city = '{q}'")
                if r.random() < 0.5
                else self.moved("country", 65535)
            )
        if choice == 22:  # into customer, inventory, staff
            return self.moved("store", 255)
        return self.moved("staff", 255, f", username = '{q}'")  # payment, rental, store


#: employees' children: each ON DELETE CASCADE from employees (no ON UPDATE rule: RESTRICT)
CHILDREN = ("dept_emp", "dept_manager", "titles", "salaries")


class EmployeesWrites(Writes):
    def step(self) -> str:  # one branch per kind of write
        r, q = self.rng, self.text()
        emp, dept = self.pick("employees", "emp_no"), self.pick("departments", "dept_no")
        # the same department in another case or accent (a CHAR(4) drops trailing spaces):
        # the collation finds it ('Ď005' = 'd005' where it is accent-insensitive)
        spelled = r.choice([dept, dept.upper(), dept.capitalize(), "Ď" + dept[1:]])
        day = f"19{r.randrange(85, 99)}-0{r.randrange(1, 9)}-1{r.randrange(9)}"
        new = self.unused("employees", "emp_no", 99999)
        choice = r.randrange(17)
        if choice == 0:  # ON DELETE CASCADE into dept_emp, dept_manager, titles, salaries
            return f"DELETE FROM employees WHERE emp_no = {emp}"
        if choice == 1:
            who = f"'{q}', '{self.text()}', '{r.choice('MF')}'"
            return f"INSERT INTO employees VALUES ({new}, '1960-01-01', {who}, '{day}')"
        if choice == 2:
            return (
                f"UPDATE employees SET first_name = '{q}', last_name = '{q}' WHERE emp_no = {emp}"
            )
        if choice == 3:  # RESTRICT (no ON UPDATE rule) unless it has no children
            if r.random() < 0.5:
                return f"UPDATE employees SET emp_no = {new} WHERE emp_no = {emp}"
            alone = " AND ".join(f"emp_no NOT IN (SELECT emp_no FROM {t})" for t in CHILDREN)
            return f"UPDATE employees SET emp_no = {new} WHERE {alone} ORDER BY RAND() LIMIT 1"
        if choice in (4, 5):
            return f"INSERT IGNORE INTO dept_emp VALUES ({emp}, '{spelled}', '{day}', '9999-01-01')"
        if choice == 6:
            return f"INSERT IGNORE INTO dept_manager VALUES ({emp}, '{spelled}', '{day}', '{day}')"
        if choice == 7:  # title is part of the key: its variants collide, or not (_ci)
            return f"INSERT IGNORE INTO titles VALUES ({emp}, '{q}', '{day}', NULL)"
        if choice == 8:
            pay = r.randrange(40000, 90000)
            return f"INSERT IGNORE INTO salaries VALUES ({emp}, {pay}, '{day}', '9999-01-01')"
        if choice == 9:
            return (
                f"UPDATE salaries SET salary = salary + 1, to_date = '{day}' WHERE emp_no = {emp}"
            )
        if choice == 10 and r.random() < 0.5:  # with its rows in dept_emp and dept_manager
            return f"DELETE FROM departments WHERE dept_no = '{spelled}'"
        if choice in (10, 11):
            return f"INSERT IGNORE INTO departments VALUES ('d{r.randrange(10, 99)}', '{q}{day}')"
        if choice == 12:
            return f"DELETE FROM titles WHERE emp_no = {emp} ORDER BY from_date LIMIT 1"
        if choice == 13:  # the unique dept_name, in another spelling (_ci: one value)
            return f"UPDATE departments SET dept_name = '{q}{day}' WHERE dept_no = '{spelled}'"
        if choice == 14:  # RESTRICT unless no row of dept_emp or dept_manager names it
            to = f"d{r.randrange(10, 99)}"
            return f"UPDATE departments SET dept_no = '{to}' WHERE dept_no = '{spelled}'"
        if choice == 15:
            return f"DELETE FROM dept_emp WHERE emp_no = {emp}"
        return f"UPDATE dept_emp SET to_date = '{day}' WHERE emp_no = {emp}"


def _drafted(db: Any, tmp: Path) -> Mapping:
    """The mapping ``migrator init`` drafts, unchanged; ``validate`` accepts it."""
    path = tmp / "drafted.yaml"
    path.write_text(init(db.url).render())
    report = validate(path, source=db.url)
    assert report.exit_code == 0, report.as_dict()
    return load_mapping(path)


def _synced(
    db: Any, make: Callable[[Any, int], Writes], redis_url: str, client: redis.Redis, tmp: Path
) -> Writes:
    mapping = _drafted(db, tmp)
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    assert sync(mapping, server_id=sid, **run).exit_code == 0  # type: ignore[arg-type]
    work = make(db, 2)
    for _ in range(3):
        work.run(40)
        assert sync(mapping, server_id=sid, **run).exit_code == 0  # type: ignore[arg-type]
    work.close()
    equals_a_fresh_migrate(db, mapping, redis_url, client)
    return work


def _sakila(db: Any, redis_url: str, client: redis.Redis, tmp: Path) -> None:
    load_sakila(db)
    work = _synced(db, SakilaWrites, redis_url, client, tmp)
    assert work.done > 100 and work.refused > 5, (work.done, work.refused)
    # the subset loads no payment without its rental: these are ON DELETE SET NULL's
    (n,) = _rows(db, "SELECT COUNT(*) FROM payment WHERE rental_id IS NULL")[0]
    assert n > 3, n


def _employees(db: Any, redis_url: str, client: redis.Redis, tmp: Path) -> None:
    load_employees(db)
    work = _synced(db, EmployeesWrites, redis_url, client, tmp)
    assert work.done > 100 and work.refused > 5, (work.done, work.refused)
    # children that name their department in another spelling than its own, as MySQL allows
    (n,) = _rows(db, SPELLED_OTHERWISE)[0]
    assert n > 3, n


SPELLED_OTHERWISE = """SELECT COUNT(*) FROM dept_emp d JOIN departments p ON d.dept_no = p.dept_no
  WHERE CAST(d.dept_no AS BINARY) <> CAST(p.dept_no AS BINARY)"""


def test_sakila_syncs_under_the_mapping_init_drafts(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _sakila(binlog_db, redis_url, redis_client, tmp_path)


def test_sakila_syncs_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _sakila(db, redis_url, redis_client, tmp_path))


def test_employees_syncs_under_the_mapping_init_drafts(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """dept_emp's and dept_manager's dept_no is CHAR(4) under the database's utf8mb4_general_ci
    (MariaDB) or utf8mb4_0900_ai_ci (MySQL): 'D005' and 'Ď005' are 'd005' there."""
    _employees(binlog_db, redis_url, redis_client, tmp_path)


def test_employees_syncs_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql, lambda db: _employees(db, redis_url, redis_client, tmp_path)
    )
