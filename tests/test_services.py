"""The service fixtures themselves: real servers, isolated databases, loaded sample data."""

from __future__ import annotations

import os
from pathlib import Path

import pymysql
import pytest
import redis
from sqlalchemy.engine import make_url

from tests.engines import engines_selected, server_facts
from tests.services import (
    MySQLDatabase,
    cli_args,
    redis_db_url,
    renamed_script,
    run_cli_file,
    server_url,
    with_seq_rows,
)


def test_mysql_db_is_a_fresh_database_that_runs_scripts(
    mysql_db: MySQLDatabase, mysql_server_url: str
) -> None:
    assert mysql_db.name.startswith("mig_t_")
    assert make_url(mysql_db.url).database == mysql_db.name
    assert make_url(mysql_server_url).database is None
    assert mysql_db.query("SHOW TABLES") == []
    assert mysql_db.query("SELECT @@character_set_database") == [("utf8mb4",)]

    mysql_db.run(
        """
        CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL);
        INSERT INTO t VALUES (1, 'ken'), (2, 'dennis');
        SELECT * FROM t;  -- a result set in the middle is consumed
        INSERT INTO t VALUES (3, 'Jöe 😀');
        """
    )
    assert mysql_db.query("SELECT id, name FROM t ORDER BY id") == [
        (1, "ken"),
        (2, "dennis"),
        (3, "Jöe 😀"),
    ]


def test_mysql_db_run_raises_on_a_failing_later_statement(mysql_db: MySQLDatabase) -> None:
    with pytest.raises(pymysql.MySQLError):
        mysql_db.run("CREATE TABLE a (id INT PRIMARY KEY); INSERT INTO missing VALUES (1);")


def test_each_test_gets_its_own_database(mysql_db: MySQLDatabase) -> None:
    # The table made by the test above is not here, and the old database is gone.
    assert mysql_db.query("SHOW TABLES") == []
    others = mysql_db.query("SHOW DATABASES LIKE 'mig\\_t\\_%'")
    assert (mysql_db.name,) in others


def test_redis_url_is_an_empty_database(redis_url: str, redis_client: redis.Redis) -> None:
    assert redis_client.dbsize() == 0
    assert redis_client.connection_pool.connection_kwargs["db"] >= 1
    redis_client.set("login:1:login_times", 5)
    assert redis_client.get("login:1:login_times") == b"5"  # bytes, not decoded


def test_redis_url_is_empty_again(redis_client: redis.Redis) -> None:
    assert redis_client.dbsize() == 0


def test_url_helpers() -> None:
    assert server_url("mysql://root@127.0.0.1:3306/x") == "mysql+pymysql://root@127.0.0.1:3306"
    assert cli_args("mysql+pymysql://u:secret@db.example:3307/d") == [
        "--user=u",
        "--protocol=TCP",
        "--host=db.example",
        "--port=3307",
        "--default-character-set=utf8mb4",
        "--database=d",
    ]
    assert redis_db_url("redis://127.0.0.1:6379", 3) == "redis://127.0.0.1:6379/3"
    assert redis_db_url("redis://:pw@h:1/0?protocol=3", 2) == "redis://:pw@h:1/2?protocol=3"


def _one(url: str, sql: str) -> object:
    conn = pymysql.connect(
        host=make_url(url).host,
        port=make_url(url).port or 3306,
        user=make_url(url).username or "root",
        password=make_url(url).password or "",
        database=make_url(url).database,
    )
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
            assert row is not None
            return row[0]
    finally:
        conn.close()


def test_sakila_is_loaded(sakila_url: str) -> None:
    name = make_url(sakila_url).database
    assert name is not None and name.startswith("mig_t_sakila_")  # this session's own copy
    base_tables = (
        "SELECT COUNT(*) FROM information_schema.tables"
        f" WHERE table_schema = '{name}' AND table_type = 'BASE TABLE'"
    )
    assert _one(sakila_url, base_tables) == 16
    assert _one(sakila_url, "SELECT COUNT(*) FROM film") == 1000
    assert _one(sakila_url, "SELECT COUNT(*) FROM payment") == 16044
    # The GEOMETRY column is there (on MariaDB only with the *.mariadb.sql pair).
    assert _one(sakila_url, "SELECT ST_AsText(location) FROM address WHERE address_id = 1") == (
        "POINT(-112.8185647 49.6999986)"
    )
    # actor_info names its tables sakila.film etc.: renamed, it reads this copy
    assert _one(sakila_url, "SELECT COUNT(*) FROM actor_info") == 200


def test_employees_is_loaded(employees_url: str) -> None:
    name = make_url(employees_url).database
    assert name is not None and name.startswith("mig_t_employees_")
    assert _one(employees_url, "SELECT COUNT(*) FROM employees") == 10000
    assert _one(employees_url, "SELECT COUNT(*) FROM salaries") == 94917


def test_run_cli_file_handles_client_commands(mysql_db: MySQLDatabase, tmp_path: Path) -> None:
    # DELIMITER and `source` are client commands: the sample dumps need the real client.
    (tmp_path / "rows.sql").write_text("INSERT INTO t VALUES (1), (2);\n")
    script = tmp_path / "script.sql"
    script.write_text(
        "CREATE TABLE t (id INT PRIMARY KEY);\n"
        "source rows.sql\n"
        "DELIMITER ;;\n"
        "CREATE PROCEDURE add_three() BEGIN INSERT INTO t VALUES (3); END;;\n"
        "DELIMITER ;\n"
        "CALL add_three();\n"
    )
    run_cli_file(mysql_db.url, script)
    assert mysql_db.query("SELECT id FROM t ORDER BY id") == [(1,), (2,), (3,)]


def test_renamed_script_points_every_statement_at_the_new_database() -> None:
    script = (
        "DROP DATABASE IF EXISTS employees;\n"
        "CREATE DATABASE IF NOT EXISTS employees;\n"
        "USE employees;\n"
        "CREATE TABLE employees (emp_no INT);\n"
        "CREATE VIEW v AS SELECT * FROM employees.employees e;\n"
        "SELECT 'LOADING employees' as 'INFO';\n"
    )
    assert renamed_script(script, "employees", "mig_t_e") == (
        "DROP DATABASE IF EXISTS `mig_t_e`;\n"
        "CREATE DATABASE IF NOT EXISTS `mig_t_e`;\n"
        "USE `mig_t_e`;\n"
        "CREATE TABLE employees (emp_no INT);\n"
        "CREATE VIEW v AS SELECT * FROM `mig_t_e`.employees e;\n"
        "SELECT 'LOADING employees' as 'INFO';\n"
    )


def test_renamed_script_refuses_what_it_cannot_rename() -> None:
    # a DROP it does not recognise would hit the fixed-name database: refused, not run
    with pytest.raises(RuntimeError, match="could not rename"):
        renamed_script("DROP /* x */ SCHEMA sakila;\n", "sakila", "mig_t_s")


def test_long_tests_run_only_when_asked_for() -> None:
    """``make test`` leaves the ``long`` tests out; ``-m long`` (make test-long) or a test's
    own node id runs them (tests/conftest.py)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    long_one = "tests/test_dryrun.py::test_resp_export_on_sakila"
    other = "tests/test_dryrun.py::test_json_output"

    def collected(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
                              cwd=repo, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    everything = collected("tests/test_dryrun.py")
    assert long_one not in everything and other in everything
    asked = collected("tests/test_dryrun.py", "-m", "long")
    assert long_one in asked and other not in asked
    assert long_one in collected(long_one)


def test_seq_tables_work_on_each_engine(mysql_db: MySQLDatabase) -> None:
    """MariaDB's ``seq_1_to_N`` in a test's script runs on MySQL too (a derived table)."""
    mysql_db.run("CREATE TABLE s (n INT PRIMARY KEY); INSERT INTO s SELECT seq FROM seq_1_to_1234;")
    assert mysql_db.query("SELECT COUNT(*), MIN(n), MAX(n) FROM s") == [(1234, 1, 1234)]
    mysql_db.run("INSERT INTO s SELECT seq FROM seq_60001_to_60500;")
    assert mysql_db.query("SELECT COUNT(*), MAX(n) FROM s WHERE n > 1234") == [(500, 60500)]
    assert "seq_1_to_7" not in with_seq_rows("SELECT 1 FROM seq_1_to_70").replace(
        "AS seq_1_to_70", ""
    )


def test_each_engine_is_the_one_its_id_says(engine: str, mysql_server_url: str) -> None:
    """``[mariadb]`` runs on MariaDB, ``[mysql]`` on Oracle MySQL (tests/engines.py); the
    MySQL one has its binary log and GTIDs on, as MySQL sites run it."""
    facts = server_facts(mysql_server_url)
    assert ("mariadb" in facts["version"].lower()) == (engine == "mariadb"), facts
    if engine == "mysql":
        assert facts["log_bin"] == "1" and facts["gtid_mode"] == "ON", facts


def test_engines_can_be_chosen() -> None:
    """``MIGRATOR_TEST_ENGINES`` keeps one engine's variants; a one-engine test's other variant
    is skipped with the reason its marker gives."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    one = "tests/test_services.py::test_each_engine_is_the_one_its_id_says"

    def collected(engines: str, *args: str) -> str:
        env = {**os.environ, "MIGRATOR_TEST_ENGINES": engines}
        argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", *args]
        done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert f"{one}[mariadb]" in collected("", one) and f"{one}[mysql]" in collected("", one)
    only = collected("mysql", one)
    assert f"{one}[mysql]" in only and f"{one}[mariadb]" not in only
    with pytest.raises(ValueError, match="unknown engine 'oracle'"):
        os.environ["MIGRATOR_TEST_ENGINES"] = "oracle"
        try:
            engines_selected()
        finally:
            del os.environ["MIGRATOR_TEST_ENGINES"]
