"""No account or global setting is changed on a server the project did not start (issue 34).

The tests make accounts and change global settings only on servers they start themselves:
the private mariadbd of tests/binlog_server.py (``binlog_server``, and those modules start on
their own), the session's Oracle MySQL, the tests' own ``redis-server`` processes. The shared
servers, ``mysql_server_url`` (MariaDB at ``MIGRATOR_TEST_MYSQL_URL``) and ``redis_server_url``
(``MIGRATOR_TEST_REDIS_URL``), are used as they are. Read from the files, without a server:

* in tests/, every function that runs such a statement (a string passed anywhere but to an
  ``assert``; a module constant it names; a Redis ``config_set``/``ACL``/``CONFIG`` call) is
  followed up through the helpers that call it to the tests and fixtures, and none of those
  may reach the shared server's fixture (a test marked ``engine("mysql")`` runs on the
  session's Oracle MySQL alone);
* scripts/, the Makefile, .ci/run and benchmarks/ hold no such statement, except the init
  file scripts/mysql-server.sh gives ``mysqld --initialize-insecure`` for the data directory
  it makes itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: SQL that changes an account or a server-wide setting (the repository writes SQL upper case)
ACCOUNT_SQL = re.compile(
    r"\b(?:CREATE|DROP|ALTER|RENAME)\s+USER\b|\bGRANT\b.*\bTO\b|\bREVOKE\b|"
    r"\bSET\s+(?:GLOBAL|PERSIST|PERSIST_ONLY|PASSWORD)\b|@@(?:GLOBAL|PERSIST)\.\w+\s*=|"
    r"\bFLUSH\s+PRIVILEGES\b|\bINSTALL\s+(?:SONAME|PLUGIN)\b|\bUPDATE\s+mysql\.user\b"
)
REDIS_METHODS = {"config_set", "config_rewrite", "config_resetstat", "acl_setuser", "acl_deluser"}
REDIS_COMMANDS = {"ACL", "CONFIG"}
REDIS_WORDS = (*REDIS_METHODS, "execute_command")  # a module without them runs neither
SHARED = {"sql": "mysql_server_url", "redis": "redis_server_url"}


@dataclass
class Function:
    """A module-level function or a method of a module-level class."""

    module: str
    name: str
    node: ast.FunctionDef
    method: bool
    fixture: bool = False
    params: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)  # names it calls (f() and x.f())
    mysql_only: bool = False  # @pytest.mark.engine("mysql", ...)


def _text(node: ast.AST) -> str | None:
    """A string constant, or an f-string with ``{}`` for its fields."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _strings(node: ast.AST) -> Iterator[str]:
    """The strings under ``node`` that can reach a server: not in an assert, not a docstring."""
    if isinstance(node, ast.Assert):
        return
    body = getattr(node, "body", None)
    first = body[0] if isinstance(body, list) and body else None
    docstring = first.value if isinstance(first, ast.Expr) and _text(first.value) else None
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Expr) and child.value is docstring:
            continue
        text = _text(child)
        if text is not None:
            yield text
        elif not isinstance(child, ast.JoinedStr):
            yield from _strings(child)


def _called(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _kinds(node: ast.AST, constants: set[str]) -> set[str]:
    """ "sql" and/or "redis" where ``node`` changes an account or a setting."""
    kinds = {"sql"} if any(ACCOUNT_SQL.search(s) for s in _strings(node)) else set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in constants:
            kinds.add("sql")
        if isinstance(sub, ast.Call):
            name = _called(sub)
            first = _text(sub.args[0]) if sub.args else None
            if name in REDIS_METHODS or (
                name == "execute_command" and (first or "").upper() in REDIS_COMMANDS
            ):
                kinds.add("redis")
    return kinds


def _is_fixture(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
    return False


def _mysql_only(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        if (
            isinstance(dec, ast.Call)
            and isinstance(dec.func, ast.Attribute)
            and dec.func.attr == "engine"
            and dec.args
            and _text(dec.args[0]) == "mysql"
        ):
            return True
    return False


def _functions(module: str, tree: ast.Module) -> Iterator[Function]:
    tops = [(n, False) for n in tree.body if isinstance(n, ast.FunctionDef)]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        tops += [(n, True) for n in cls.body if isinstance(n, ast.FunctionDef)]
    for node, method in tops:
        fn = Function(module, node.name, node, method, _is_fixture(node))
        fn.params = {a.arg for a in node.args.args + node.args.kwonlyargs}
        fn.mysql_only = _mysql_only(node)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = _called(sub)
                if name:
                    fn.calls.add(name)
                if name == "getfixturevalue" and sub.args and _text(sub.args[0]):
                    fn.params.add(str(_text(sub.args[0])))
        yield fn


def violations(sources: dict[str, str]) -> tuple[list[str], list[str]]:
    """(what runs such a statement where a shared server can be reached, every function that
    runs one) for ``sources``: module path -> Python text."""
    functions: list[Function] = []
    sites: list[tuple[Function, str]] = []
    for module, text in sources.items():
        tree = ast.parse(text)
        constants = (
            set()
            if not ACCOUNT_SQL.search(text)
            else {
                t.id
                for n in tree.body
                if isinstance(n, ast.Assign) and any(ACCOUNT_SQL.search(s) for s in _strings(n))
                for t in n.targets
                if isinstance(t, ast.Name)
            }
        )
        suspect = ACCOUNT_SQL.search(text) or any(w in text for w in REDIS_WORDS)
        for fn in _functions(module, tree):
            functions.append(fn)
            if suspect:
                sites += [(fn, kind) for kind in _kinds(fn.node, constants)]
    fixtures = {(fn.module, fn.name): fn.params for fn in functions if fn.fixture}

    def fixture(module: str, name: str) -> tuple[str, str] | None:
        """Where pytest finds fixture ``name`` for ``module``: the module, then the
        conftest.py files of its folder and the folders above, up to tests/."""
        places = [module]
        folder = Path(module).parent
        while folder.parts:
            places.append(str(folder / "conftest.py"))
            folder = folder.parent
        return next(((m, name) for m in places if (m, name) in fixtures), None)

    def reaches(user: Function, shared: str) -> bool:
        seen: set[tuple[str, str]] = set()
        todo = [(user.module, p) for p in user.params]
        while todo:
            module, name = todo.pop()
            if name == shared:
                return True
            where = fixture(module, name)
            if where and where not in seen:
                seen.add(where)
                todo += [(where[0], p) for p in fixtures[where]]
        return False

    def users(fn: Function) -> Iterator[Function]:
        """The tests and fixtures that run ``fn``, through any helpers between."""
        seen: set[tuple[str, str]] = set()
        todo = [fn]
        while todo:
            f = todo.pop()
            if (f.module, f.name) in seen:
                continue
            seen.add((f.module, f.name))
            if f.fixture or f.name.startswith("test_"):
                yield f
                continue
            todo += [
                c for c in functions if f.name in c.calls and (c.module == f.module or not f.method)
            ]

    found = []
    for fn, kind in sites:
        for user in users(fn):
            if reaches(user, SHARED[kind]) and not (kind == "sql" and user.mysql_only):
                found.append(
                    f"{fn.module}:{fn.node.lineno} {fn.name} changes accounts or settings ({kind})"
                    f" and {user.module}:{user.node.lineno} {user.name} runs it on the shared"
                    f" server ({SHARED[kind]})"
                )
    return found, [f"{fn.module}::{fn.name}" for fn, _ in sites]


def test_sources() -> dict[str, str]:
    return {
        str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
        for p in sorted((REPO / "tests").rglob("*.py"))
        if p.name != Path(__file__).name
    }


test_sources.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def test_the_tests_change_accounts_and_settings_only_on_servers_they_started() -> None:
    found, sites = violations(test_sources())
    assert found == [], "\n".join(found)
    # the check sees the statements it is about: a blind one would pass as well
    for known in (
        "tests/binlog_server.py::add_reader",
        "tests/sync/test_accounts.py::make",
        "tests/test_reader_parity.py::tls_server",
        "tests/test_snapshot.py::test_the_mysql_way_to_the_position_under_a_short_read_lock",
        "tests/sync/test_log_guard.py::_global",
        "tests/test_userinfo.py::test_a_password_with_at_and_colon_works_unencoded_on_both_servers",
        "tests/test_safety.py::_acl_user",
    ):
        assert known in sites, (known, sites)


def test_the_check_fails_on_an_account_made_on_the_shared_server() -> None:
    name, conftest = "tests/test_userinfo.py", "tests/conftest.py"
    sources = {n: (REPO / n).read_text(encoding="utf-8") for n in (name, conftest)}
    assert violations(sources)[0] == []
    # the test as it was before issue 34: the account made on mysql_db's (the shared) server
    now = "    own_emp_db: MySQLDatabase, tmp_path"
    before = sources[name].replace(now, "    emp_db: MySQLDatabase, tmp_path")
    assert before != sources[name]
    found, _ = violations({**sources, name: before})
    assert len(found) == 1 and "test_a_password_with_at_and_colon" in found[0], found
    made_up = {
        "tests/test_x.py": (
            "import pytest\n"
            "@pytest.fixture\n"
            "def db(mysql_db):\n    return mysql_db\n"
            "def grant(d, user):\n    d.run(f\"GRANT SELECT ON *.* TO '{user}'@'%'\")\n"
            "def test_a(db):\n    grant(db, 'u')\n"
            "def test_b(binlog_db):\n    grant(binlog_db, 'u')\n"
            "def test_c(redis_client):\n    redis_client.config_set('maxmemory', '1')\n"
            "@pytest.mark.engine('mysql', why='x')\n"
            "def test_d(mysql_db):\n    mysql_db.run('SET GLOBAL x = 1')\n"
        ),
        "tests/conftest.py": (
            "import pytest\n"
            "@pytest.fixture\ndef redis_client(redis_url):\n    pass\n"
            "@pytest.fixture\ndef redis_url(redis_server_url):\n    pass\n"
            "@pytest.fixture\ndef mysql_db(mysql_server_url):\n    pass\n"
        ),
    }
    found, _ = violations(made_up)
    assert [line.split(" runs it")[0].split(" and ")[1] for line in found] == [
        "tests/test_x.py:7 test_a",
        "tests/test_x.py:11 test_c",
    ], found


def _statements(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [(n, line) for n, line in enumerate(lines, 1) if ACCOUNT_SQL.search(line)]


def test_scripts_change_no_account_or_setting() -> None:
    """``make demo`` and ``make test`` run scripts/services.sh on a user's own servers: it and
    the other scripts leave their accounts and settings alone (no ALTER USER, GRANT, ...)."""
    files = [REPO / "Makefile", REPO / ".ci" / "run"]
    files += sorted(p for p in (REPO / "scripts").iterdir() if p.is_file())
    files += sorted((REPO / "benchmarks").glob("*.py"))
    assert REPO / "scripts" / "services.sh" in files
    found = {str(p.relative_to(REPO)): _statements(p) for p in files}
    # the init file of the data directory scripts/mysql-server.sh makes (--initialize-insecure)
    mysql_server = (REPO / "scripts" / "mysql-server.sh").read_text(encoding="utf-8")
    init = re.search(r"""cat > "\$init" <<'SQL'\n(.*?)\nSQL\n""", mysql_server, re.S)
    assert init and '--initialize-insecure --init-file="$init"' in mysql_server
    allowed = set(init.group(1).splitlines())
    assert allowed and all(ACCOUNT_SQL.search(line) for line in allowed)
    found["scripts/mysql-server.sh"] = [
        (n, line) for n, line in found["scripts/mysql-server.sh"] if line not in allowed
    ]
    assert {k: v for k, v in found.items() if v} == {}
    assert _statements(REPO / "tests" / "binlog_server.py")  # the pattern finds them
