"""Part of Sakila and of employees (tests/data), loaded into a test's own database: their
schemas unchanged (foreign keys, triggers, views, routines), a subset of their rows, chosen so
that every foreign key still finds its parent. The dumps are filtered tuple by tuple (each row
is a line of its own) and fed to the mariadb/mysql client, as ``tests/services.py`` loads the
whole sets for the acceptance tests."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.services import is_mariadb, renamed_script, run_cli_file, testdata_dir

Keep = Callable[[list[str]], bool]


def fields(row: str) -> list[str]:
    """The top-level fields of ``(a,'b,c',NULL)``, as written (quotes kept)."""
    out, cur, quoted, i = [], "", False, 1
    while i < len(row):
        ch = row[i]
        if quoted:
            cur += ch
            if ch == "\\":
                cur += row[i + 1]
                i += 1
            elif ch == "'":
                quoted = False
        elif ch == "'":
            quoted, cur = True, cur + ch
        elif ch in ",)":
            out.append(cur.strip())
            cur = ""
            if ch == ")":
                break
        else:
            cur += ch
        i += 1
    return out


def inserts(text: str) -> Iterator[tuple[str, str]]:
    """``(table, row)`` for each row of each ``INSERT INTO t VALUES`` of a dump, one row a
    line, in order."""
    table = ""
    for line in text.splitlines():
        head = re.match(r"INSERT INTO `?(\w+)`? VALUES\s*", line)
        if head:
            table, line = head[1], line[head.end() :]
        line = line.strip()
        if table and line.startswith("("):
            yield table, line.rstrip(",;")
        elif line and not line.startswith("("):
            table = "" if not head else table


def _script(rows: list[tuple[str, str]], head: str = "") -> str:
    out, tables = [head], list(dict.fromkeys(t for t, _ in rows))
    for table in tables:
        values = ",\n".join(r for t, r in rows if t == table)
        out.append(f"INSERT INTO `{table}` VALUES\n{values};")
    return "\n".join(out) + "\n"


def _run(db: Any, name: str, text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="migrator-public-") as tmp:
        script = Path(tmp) / name
        script.write_text(text, encoding="utf-8")
        run_cli_file(db.url, script)


def _schema_only(text: str, old: str, db: Any) -> str:
    """``text`` for the test's database: its own name, no DROP/CREATE of the database (the
    fixture made it, utf8mb4)."""
    out = renamed_script(text, old, db.name)
    name = re.escape(db.name)
    return re.sub(rf"(?im)^\s*(DROP|CREATE)\s+(SCHEMA|DATABASE)\b[^;]*`{name}`\s*;", "", out)


def load_sakila(db: Any, films: int = 100) -> None:
    """Sakila's schema (triggers, views and routines too) and: the small tables whole, the
    first ``films`` films with their actors, categories and copies, the rentals of those
    copies and the payments of those rentals. ``film_text`` is filled by ``ins_film``."""
    folder = testdata_dir() / "sakila"
    schema = (folder / "sakila-schema.sql").read_text(encoding="utf-8")
    data = (folder / "sakila-data.sql").read_text(encoding="utf-8")
    if is_mariadb(db.url):  # GEOMETRY on MariaDB too (tests/data/sakila/SOURCE.md)
        schema, data = (t.replace("/*!50705 ", "/*M!50705 ") for t in (schema, data))
    _run(db, "sakila-schema.sql", _schema_only(schema, "sakila", db))
    copies: set[str] = set()
    rentals: set[str] = set()

    def film(f: list[str]) -> bool:
        return int(f[0]) <= films

    def copy(f: list[str]) -> bool:
        if int(f[1]) <= films:
            copies.add(f[0])
        return f[0] in copies

    def rental(f: list[str]) -> bool:
        if f[2] in copies:
            rentals.add(f[0])
        return f[0] in rentals

    keep: dict[str, Keep] = {
        "film": film,
        "film_actor": lambda f: int(f[1]) <= films,
        "film_category": lambda f: int(f[0]) <= films,
        "inventory": copy,
        "rental": rental,
        "payment": lambda f: f[3] in rentals,
    }
    parsed = list(inserts(data))
    order = list(dict.fromkeys(t for t, _ in parsed))
    first = ["film", "inventory", "rental"]  # payment's rows follow its rentals'
    rows = []
    for table in first + [t for t in order if t not in first]:
        chosen = keep.get(table, lambda f: True)
        rows += [(t, r) for t, r in parsed if t == table and chosen(fields(r))]
    assert {t for t, _ in rows} == set(order), order
    head = "SET NAMES utf8mb4; SET FOREIGN_KEY_CHECKS=0; SET SQL_MODE='TRADITIONAL';"
    _run(db, "sakila-data.sql", _script(rows, head) + _triggers(data))


def _triggers(data: str) -> str:
    """The dump's three ``BEFORE INSERT`` triggers (created after each table's rows)."""
    found = re.findall(r"(?ms)^CREATE TRIGGER .*?;$", data)
    assert len(found) == 3, found
    return "\n".join(found) + "\n"


def load_employees(db: Any, employees: int = 300) -> None:
    """employees' schema (views too) and: the first ``employees`` employees and every
    manager, with their departments, titles and salaries; all 9 departments."""
    folder = testdata_dir() / "employees"
    script = (folder / "employees.sql").read_text(encoding="utf-8")
    schema = script[: script.index("flush /*!50503 binary */ logs;")]
    _run(db, "employees.sql", _schema_only(schema, "employees", db))
    managers = {fields(r)[0] for t, r in inserts((folder / "load_dept_manager.dump").read_text())}
    kept = {str(n) for n in range(10001, 10001 + employees)} | managers
    rows = []
    for part in ("departments", "employees", "dept_emp", "dept_manager", "titles", "salaries1"):
        text = (folder / f"load_{part}.dump").read_text(encoding="utf-8")
        rows += [(t, r) for t, r in inserts(text) if t == "departments" or fields(r)[0] in kept]
    _run(db, "employees-data.sql", _script(rows))
