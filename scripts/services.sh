#!/usr/bin/env bash
# The MariaDB and Redis servers `make demo` and the tests use (README.md, "Tests").
#
#   scripts/services.sh [start] [mysql|redis]  a server that runs on 127.0.0.1:3306 / 6379 is
#                                              used as it is; where none runs, a private one of
#                                              the project's own is started (below)
#   scripts/services.sh stop                   stop the private servers, and nothing else
#   scripts/services.sh url mysql|redis        print the URL (no database) of the one to use
#
# It never changes an account or a setting of a server it did not start. A running MariaDB
# must let root in over TCP with an empty password; if it does not, the script says which
# account the demo needs and how to name another (MIGRATOR_SOURCE_URL; for the tests
# MIGRATOR_TEST_MYSQL_URL) and exits 1. The same for a Redis that wants a password.
#
# The private servers live in MIGRATOR_SERVICES_DIR (default: .services/ in the checkout):
# mariadb/ holds a data directory of mariadb-install-db's (root, empty password: an account
# of this install's own), its socket, pid file and log, and the server listens on
# 127.0.0.1:3307; redis/ a redis-server on 127.0.0.1:6380 that keeps nothing on disk. Their URLs
# go into urls.env, which scripts/demo.sh and the tests read (tests/local_servers.py). Where
# mariadbd or redis-server is missing and we are root, the Debian packages are installed
# first, without starting the system's own service (policy-rc.d) or touching its data.
#
# Ports: MIGRATOR_MYSQL_PORT / MIGRATOR_REDIS_PORT (3306 / 6379) where a running server is
# looked for; MIGRATOR_PRIVATE_MYSQL_PORT / MIGRATOR_PRIVATE_REDIS_PORT (3307 / 6380) for the
# private ones. With Docker instead: `docker compose up -d`.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd -P)
HOST=127.0.0.1
MYSQL_PORT=${MIGRATOR_MYSQL_PORT:-3306}
REDIS_PORT=${MIGRATOR_REDIS_PORT:-6379}
PRIVATE_MYSQL_PORT=${MIGRATOR_PRIVATE_MYSQL_PORT:-3307}
PRIVATE_REDIS_PORT=${MIGRATOR_PRIVATE_REDIS_PORT:-6380}
DIR=${MIGRATOR_SERVICES_DIR:-$REPO/.services}
WAIT_SECONDS=${MIGRATOR_SERVICES_WAIT:-60}
MARIADBD=${MIGRATOR_MARIADBD:-/usr/sbin/mariadbd}
DEMO_DB=${DEMO_DB:-migrator_demo}
MYSQL_KEY=MIGRATOR_SERVICES_MYSQL_URL
REDIS_KEY=MIGRATOR_SERVICES_REDIS_URL

say() { printf 'services: %s\n' "$*" >&2; }

port_open() {  # port: something accepts TCP connections on 127.0.0.1 there
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
}

client() {  # the mariadb (or mysql) client, or nothing
    command -v mariadb || command -v mysql || true
}

mysql_login() {  # port: root with an empty password over TCP; prints the client's error
    local cli
    cli=$(client)
    if [[ -z $cli ]]; then
        echo "no mariadb or mysql client to log in with (Debian package mariadb-client)"
        return 1
    fi
    "$cli" --no-defaults --protocol=TCP --host="$HOST" --port="$1" --user=root --password= \
        --connect-timeout=3 -e 'SELECT 1' 2>&1 >/dev/null
}

mysql_speaks() {  # port: a MySQL-protocol server answers there, whether or not it lets us in
    local admin
    admin=$(command -v mariadb-admin || command -v mysqladmin || true)
    if [[ -n $admin ]]; then
        # `ping` exits 0 when the server runs, even if it refuses the login
        "$admin" --no-defaults --protocol=TCP --host="$HOST" --port="$1" --user=root \
            --connect-timeout=2 ping >/dev/null 2>&1
    else
        port_open "$1"
    fi
}

redis_reply() {  # port: the first line a server there answers to PING ("+PONG" for a Redis)
    (
        exec 3<>"/dev/tcp/$HOST/$1" || exit 0
        printf 'PING\r\n' >&3
        IFS= read -r -t 3 line <&3 || true
        printf '%s' "${line%$'\r'}"
    ) 2>/dev/null
}

redis_pongs() { [[ $(redis_reply "$1") == +PONG ]]; }

# -- urls.env: the private servers that run ------------------------------------------------

record() {  # KEY [VALUE]: set (or, without VALUE, drop) KEY in urls.env
    local file=$DIR/urls.env rest=""
    [[ -f $file ]] && rest=$(grep -v -e "^$1=" -e '^#' "$file" || true)
    {
        echo "# the private servers scripts/services.sh started (scripts/services.sh stop ends them)"
        [[ -n $rest ]] && printf '%s\n' "$rest"
        [[ -n ${2:-} ]] && echo "$1=$2"
    } >"$file.new"
    if grep -q '=' "$file.new"; then mv "$file.new" "$file"; else rm -f "$file.new" "$file"; fi
}

recorded() {  # KEY: its URL in urls.env, or nothing
    [[ -f $DIR/urls.env ]] && sed -n "s/^$1=//p" "$DIR/urls.env" | tail -1
    return 0
}

ours() {  # pid-file dir: the process of pid-file runs, in dir (its working directory)
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$2" ]] && echo "$pid"
}

wait_until() {  # what command...: run the command each 0.2 s until it succeeds
    local what=$1 i
    shift
    for ((i = 0; i < WAIT_SECONDS * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    say "$what did not answer within $WAIT_SECONDS s"
    return 1
}

# -- Debian packages --------------------------------------------------------------------------

apt_updated=no
install_packages() {
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        say "cannot install $* here (needs root and apt-get); install them, or run 'docker compose up -d'"
        return 1
    fi
    if [[ $apt_updated == no ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=yes
    fi
    say "installing $* (the system's own service is not started)"
    # policy-rc.d 101: the packages' scripts start no daemon on the system's data directory
    local policy=/usr/sbin/policy-rc.d made=no status=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=yes
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || status=$?
    [[ $made == yes ]] && rm -f "$policy"
    return "$status"
}

# -- MariaDB ----------------------------------------------------------------------------------

refused_mysql() {  # error: the one message for a MariaDB that will not let root in
    say "MariaDB on $HOST:$MYSQL_PORT refused root with an empty password over TCP ($1)." \
        "The demo needs an account that may create the database $DEMO_DB and everything in it" \
        "(GRANT ALL ON \`$DEMO_DB\`.* for that account); give it as" \
        "MIGRATOR_SOURCE_URL=mysql+pymysql://USER:PASSWORD@$HOST:$MYSQL_PORT/$DEMO_DB make demo" \
        "(the tests: MIGRATOR_TEST_MYSQL_URL=mysql+pymysql://USER:PASSWORD@$HOST:$MYSQL_PORT," \
        "an account that may create and drop databases), or stop that server and" \
        "this script starts a private one on port $PRIVATE_MYSQL_PORT. Nothing was changed on it."
}

start_mysql() {
    local dir=$DIR/mariadb url="mysql+pymysql://root@$HOST:$PRIVATE_MYSQL_PORT" error
    if ours "$dir/mariadb.pid" "$dir/data" >/dev/null && mysql_login "$PRIVATE_MYSQL_PORT" >/dev/null; then
        record "$MYSQL_KEY" "$url"
        say "MariaDB: the private one on $HOST:$PRIVATE_MYSQL_PORT ($dir)"
        return 0
    fi
    record "$MYSQL_KEY"
    if mysql_speaks "$MYSQL_PORT"; then
        if ! error=$(mysql_login "$MYSQL_PORT"); then
            refused_mysql "$(echo "$error" | tail -1)"
            return 1
        fi
        say "MariaDB answers on $HOST:$MYSQL_PORT (root, empty password): used as it is"
        return 0
    fi
    if port_open "$MYSQL_PORT"; then
        say "something on $HOST:$MYSQL_PORT accepts connections but is no MySQL server; name" \
            "the demo's database with MIGRATOR_SOURCE_URL, or the port to look at with MIGRATOR_MYSQL_PORT"
        return 1
    fi
    if [[ ! -x $MARIADBD ]] || ! command -v mariadb-install-db >/dev/null || [[ -z $(client) ]]; then
        install_packages mariadb-server mariadb-client || return 1
    fi
    if port_open "$PRIVATE_MYSQL_PORT"; then
        say "port $PRIVATE_MYSQL_PORT, for the private MariaDB, is taken; set MIGRATOR_PRIVATE_MYSQL_PORT to a free one"
        return 1
    fi
    mkdir -p "$dir"
    local user
    user=$(id -un)
    if [[ ! -d $dir/data/mysql ]]; then
        say "making a private MariaDB in $dir (mariadb-install-db)"
        rm -rf "$dir/data"
        if ! mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
            --auth-root-authentication-method=normal --skip-test-db --tmpdir="$dir" \
            >"$dir/install.log" 2>&1; then
            tail -20 "$dir/install.log" >&2
            say "mariadb-install-db failed (log: $dir/install.log)"
            return 1
        fi
    fi
    say "starting the private MariaDB on $HOST:$PRIVATE_MYSQL_PORT"
    # its own session: a Ctrl-C of `make` does not reach it; `scripts/services.sh stop` does
    setsid "$MARIADBD" --no-defaults --user="$user" --datadir="$dir/data" \
        --port="$PRIVATE_MYSQL_PORT" --bind-address="$HOST" --socket="$dir/mariadb.sock" \
        --pid-file="$dir/mariadb.pid" --log-error="$dir/error.log" --tmpdir="$dir" \
        --skip-name-resolve --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
        </dev/null >/dev/null 2>&1 &
    if ! wait_until "the private MariaDB" mysql_login "$PRIVATE_MYSQL_PORT"; then
        tail -20 "$dir/error.log" >&2 || true
        return 1
    fi
    record "$MYSQL_KEY" "$url"
    say "MariaDB: the private one on $HOST:$PRIVATE_MYSQL_PORT is up"
}

# -- Redis ------------------------------------------------------------------------------------

start_redis() {
    local dir=$DIR/redis url="redis://$HOST:$PRIVATE_REDIS_PORT" reply
    if ours "$dir/redis.pid" "$dir" >/dev/null && redis_pongs "$PRIVATE_REDIS_PORT"; then
        record "$REDIS_KEY" "$url"
        say "Redis: the private one on $HOST:$PRIVATE_REDIS_PORT ($dir)"
        return 0
    fi
    record "$REDIS_KEY"
    if port_open "$REDIS_PORT"; then
        reply=$(redis_reply "$REDIS_PORT")
        if [[ $reply == +PONG ]]; then
            say "Redis answers on $HOST:$REDIS_PORT: used as it is"
            return 0
        fi
        say "the server on $HOST:$REDIS_PORT did not answer PING as a Redis without a password" \
            "does (${reply:-no answer}). The demo writes its keys to database 0 of a Redis; give it" \
            "as MIGRATOR_TARGET_URL=redis://:PASSWORD@$HOST:$REDIS_PORT/0 make demo (the tests:" \
            "MIGRATOR_TEST_REDIS_URL), or stop that server and this script starts a private one" \
            "on port $PRIVATE_REDIS_PORT. Nothing was changed on it."
        return 1
    fi
    if ! command -v redis-server >/dev/null; then
        install_packages redis-server || return 1
    fi
    if port_open "$PRIVATE_REDIS_PORT"; then
        say "port $PRIVATE_REDIS_PORT, for the private Redis, is taken; set MIGRATOR_PRIVATE_REDIS_PORT to a free one"
        return 1
    fi
    mkdir -p "$dir"
    say "starting the private Redis on $HOST:$PRIVATE_REDIS_PORT"
    (cd "$dir" && setsid redis-server --daemonize yes --bind "$HOST" --port "$PRIVATE_REDIS_PORT" \
        --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save "" \
        --appendonly no </dev/null >/dev/null 2>&1)
    if ! wait_until "the private Redis" redis_pongs "$PRIVATE_REDIS_PORT"; then
        tail -20 "$dir/redis.log" >&2 || true
        return 1
    fi
    record "$REDIS_KEY" "$url"
    say "Redis: the private one on $HOST:$PRIVATE_REDIS_PORT is up"
}

# -- stop, url --------------------------------------------------------------------------------

stop_one() {  # name pid-file working-dir key
    local pid i
    if pid=$(ours "$2" "$3"); then
        kill -TERM "$pid"
        for ((i = 0; i < 150; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "the private $1 (pid $pid) did not stop within 30 s: killed"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        say "stopped the private $1 (pid $pid)"
    fi
    record "$4"
}

url_of() {  # mysql|redis: the private server's URL where it runs, else the local one's
    local key url
    case ${1:-} in
        mysql) key=$MYSQL_KEY; set -- "$DIR/mariadb/mariadb.pid" "$DIR/mariadb/data" \
            "mysql+pymysql://root@$HOST:$MYSQL_PORT" ;;
        redis) key=$REDIS_KEY; set -- "$DIR/redis/redis.pid" "$DIR/redis" "redis://$HOST:$REDIS_PORT" ;;
        *) say "usage: $0 url mysql|redis"; return 2 ;;
    esac
    url=$(recorded "$key")
    if [[ -n $url ]] && ours "$1" "$2" >/dev/null; then echo "$url"; else echo "$3"; fi
}

usage() { say "usage: $0 [start [mysql|redis]...] | stop | url mysql|redis"; exit 2; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
command=${1:-start}
[[ $# -gt 0 ]] && shift
case $command in
    start)
        [[ $# -gt 0 ]] || set -- mysql redis
        status=0
        for name in "$@"; do
            case $name in
                mysql) start_mysql || status=1 ;;
                redis) start_redis || status=1 ;;
                *) usage ;;
            esac
        done
        exit $status
        ;;
    stop)
        stop_one MariaDB "$DIR/mariadb/mariadb.pid" "$DIR/mariadb/data" "$MYSQL_KEY"
        stop_one Redis "$DIR/redis/redis.pid" "$DIR/redis" "$REDIS_KEY"
        ;;
    url) url_of "${1:-}" ;;
    *) usage ;;
esac
