#!/usr/bin/env bash
# `make demo`: load samples/*.sql into the database migrator_demo, then migrate and verify
# mappings/demo.yaml (README.md, "Quick start").
#
# The servers: MIGRATOR_SOURCE_URL (mysql+pymysql://USER:PASSWORD@HOST:PORT/DATABASE: the
# demo fills that database, so the account needs every privilege on it) and
# MIGRATOR_TARGET_URL (a Redis URL) where they are set; else those of scripts/services.sh: the
# local MariaDB and Redis as they are (root, no password), or private ones it starts. It changes
# no account or setting of any server.
#
# MYSQL names the client that loads the files (default: mariadb, else mysql), e.g.
# MYSQL="docker compose exec -T mysql mariadb"; DEMO_DB the database (default migrator_demo);
# VENV the virtualenv (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${VENV:-.venv}/bin
DEMO_DB=${DEMO_DB:-migrator_demo}
MYSQL=${MYSQL:-$(command -v mariadb || command -v mysql || echo mariadb)}
export DEMO_DB

if [[ -z ${MIGRATOR_SOURCE_URL:-} ]]; then
    bash scripts/services.sh start mysql
    MIGRATOR_SOURCE_URL="$(bash scripts/services.sh url mysql)/$DEMO_DB"
fi
if [[ -z ${MIGRATOR_TARGET_URL:-} ]]; then
    bash scripts/services.sh start redis
    MIGRATOR_TARGET_URL="$(bash scripts/services.sh url redis)/0"
fi
export MIGRATOR_SOURCE_URL MIGRATOR_TARGET_URL

# the client's arguments, read from the URL as migrator reads it (SQLAlchemy's make_url)
mapfile -t url < <("$BIN/python" - "$MIGRATOR_SOURCE_URL" <<'PY'
import sys

from sqlalchemy.engine import make_url

u = make_url(sys.argv[1])
for part in (u.host or "127.0.0.1", u.port or 3306, u.username or "", u.password or "",
             u.database or ""):
    print(part)
PY
)
host=${url[0]} port=${url[1]} user=${url[2]} password=${url[3]} db=${url[4]}
if [[ -z $db ]]; then
    echo "demo: MIGRATOR_SOURCE_URL names no database: end it with /$DEMO_DB (the demo loads" \
        "the samples into the database it names)" >&2
    exit 2
fi
read -ra client <<<"$MYSQL"
args=(--protocol=TCP "--host=$host" "--port=$port" --default-character-set=utf8mb4)
[[ -n $user ]] && args+=("--user=$user")
export MYSQL_PWD=$password  # not on the command line, where ps shows it

"${client[@]}" "${args[@]}" -e "CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4"
for f in samples/*.sql; do
    echo "loading $f into $db"
    "${client[@]}" "${args[@]}" "$db" <"$f"
done
"$BIN/migrator" migrate mappings/demo.yaml
"$BIN/migrator" verify mappings/demo.yaml
