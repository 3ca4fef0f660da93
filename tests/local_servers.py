"""Which MariaDB and Redis a plain ``pytest`` uses: the same as ``make test`` (README.md, "Tests").

``find_local_servers()``, called once by tests/conftest.py's ``pytest_configure``, fills
``MIGRATOR_TEST_MYSQL_URL`` and ``MIGRATOR_TEST_REDIS_URL`` where they are unset, in this
order: the private servers scripts/services.sh started (their URLs in ``.services/urls.env``,
or ``$MIGRATOR_SERVICES_DIR/urls.env``), if they answer; else the local servers on
127.0.0.1:3306 and 6379 (``MIGRATOR_MYSQL_PORT`` / ``MIGRATOR_REDIS_PORT``), if MariaDB lets
root in with an empty password and Redis answers without one. Where neither is there, the
variable stays unset, the fixtures fall back to Docker or skip (tests/conftest.py), and one
line on stderr says why. It logs in and pings; it changes nothing on any server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

from tests.services import MYSQL_ENV, REDIS_ENV, REPO, probe_mysql, probe_redis

SERVICES_DIR_ENV = "MIGRATOR_SERVICES_DIR"
RECORDED = {MYSQL_ENV: "MIGRATOR_SERVICES_MYSQL_URL", REDIS_ENV: "MIGRATOR_SERVICES_REDIS_URL"}


def urls_file(environ: MutableMapping[str, str]) -> Path:
    """scripts/services.sh's record of the private servers it started."""
    return Path(environ.get(SERVICES_DIR_ENV) or REPO / ".services") / "urls.env"


def recorded_urls(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of ``path`` (none if it is missing)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def local_urls(environ: MutableMapping[str, str]) -> dict[str, str]:
    """The servers that run on this machine's usual ports (as scripts/services.sh looks)."""
    mysql_port = environ.get("MIGRATOR_MYSQL_PORT") or "3306"
    redis_port = environ.get("MIGRATOR_REDIS_PORT") or "6379"
    return {
        MYSQL_ENV: f"mysql+pymysql://root@127.0.0.1:{mysql_port}",
        REDIS_ENV: f"redis://127.0.0.1:{redis_port}",
    }


def find_local_servers(
    environ: MutableMapping[str, str] | None = None, *, quiet: bool = False
) -> dict[str, str]:
    """Set each unset ``MIGRATOR_TEST_*_URL`` of ``environ`` (default ``os.environ``) to the
    first server that answers (see the module's docstring). Returns, per variable, where its
    value came from or why it stays unset; prints the latter on stderr unless ``quiet``."""
    env = os.environ if environ is None else environ
    path = urls_file(env)
    recorded = recorded_urls(path)
    local = local_urls(env)
    probes = {MYSQL_ENV: probe_mysql, REDIS_ENV: probe_redis}
    found: dict[str, str] = {}
    for var, probe in probes.items():
        if env.get(var):
            found[var] = "set"
            continue
        tried: list[str] = []
        private = recorded.get(RECORDED[var])
        if private:
            problem = probe(private)
            if problem is None:
                env[var] = private
                found[var] = f"the private server of scripts/services.sh ({path})"
                continue
            tried.append(f"{private} of {path}: {problem}")
        else:
            tried.append(f"no private server in {path}")
        problem = probe(local[var])
        if problem is None:
            env[var] = local[var]
            found[var] = f"the local server {local[var]}"
            continue
        tried.append(f"{local[var]}: {problem}")
        found[var] = f"{var} is not set; " + "; ".join(tried)
        if not quiet:
            print(f"tests: {found[var]} (scripts/services.sh starts one)", file=sys.stderr)
    return found
