#!/usr/bin/env bash
# Start the MariaDB (MySQL) and Redis servers the tests and `make demo` use, if they are down.
#
#   scripts/services.sh              start whichever of the two does not answer (README.md)
#   scripts/services.sh check NAME   exit 0 if NAME (mysql | redis) answers, else 1; starts nothing
#
# Servers: MariaDB on 127.0.0.1:3306 (user root, empty password), Redis on 127.0.0.1:6379.
# Where a binary is missing and we are root, the Debian packages mariadb-server and
# redis-server are installed first. With Docker instead: `docker compose up -d`.
set -euo pipefail

MYSQL_HOST=127.0.0.1
MYSQL_PORT=${MIGRATOR_MYSQL_PORT:-3306}
REDIS_HOST=127.0.0.1
REDIS_PORT=${MIGRATOR_REDIS_PORT:-6379}
WAIT_SECONDS=${MIGRATOR_SERVICES_WAIT:-30}

say() { printf 'services: %s\n' "$*" >&2; }

port_open() {  # host port: something accepts TCP connections there
    timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

mysql_up() {
    local admin
    admin=$(command -v mariadb-admin || command -v mysqladmin || true)
    if [[ -n $admin ]]; then
        # `ping` exits 0 when the server runs, even if the login is refused.
        "$admin" --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root \
            --connect-timeout=2 ping >/dev/null 2>&1
    else
        port_open "$MYSQL_HOST" "$MYSQL_PORT"
    fi
}

redis_up() {
    if command -v redis-cli >/dev/null; then
        [[ $(timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
    else
        port_open "$REDIS_HOST" "$REDIS_PORT"
    fi
}

wait_for() {  # name check-function
    local i
    for ((i = 0; i < WAIT_SECONDS; i++)); do
        if "$2"; then
            say "$1 is up"
            return 0
        fi
        sleep 1
    done
    say "$1 did not answer within ${WAIT_SECONDS} s"
    return 1
}

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
    say "installing $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

start_mysql() {
    if [[ ! -x /usr/sbin/mariadbd ]]; then
        install_packages mariadb-server mariadb-client || return 1
    fi
    say "starting MariaDB"
    # The socket directory lives on /run, which a reboot empties.
    if id mysql >/dev/null 2>&1; then
        install -d -o mysql -g mysql -m 0755 /run/mysqld
    fi
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    wait_for MariaDB mysql_up || return 1
    # A fresh Debian install lets root in through the unix socket only; the tests log in over
    # TCP as root with an empty password, as on the project's machines.
    if command -v mariadb >/dev/null \
        && ! mariadb --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot -e 'SELECT 1' >/dev/null 2>&1 \
        && [[ $(id -u) -eq 0 ]]; then
        say "allowing root@localhost to log in over TCP with an empty password"
        mariadb -uroot -e "ALTER USER root@localhost IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')"
    fi
}

start_redis() {
    if ! command -v redis-server >/dev/null; then
        install_packages redis-server || return 1
    fi
    say "starting Redis"
    redis-server --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save "" --appendonly no \
        >/dev/null
    wait_for Redis redis_up
}

case ${1:-start} in
    check)
        case ${2:-} in
            mysql) mysql_up ;;
            redis) redis_up ;;
            *) say "usage: $0 check mysql|redis"; exit 2 ;;
        esac
        ;;
    start)
        status=0
        if mysql_up; then say "MariaDB answers on $MYSQL_HOST:$MYSQL_PORT"; else start_mysql || status=1; fi
        if redis_up; then say "Redis answers on $REDIS_HOST:$REDIS_PORT"; else start_redis || status=1; fi
        exit $status
        ;;
    *)
        say "usage: $0 [start | check mysql|redis]"
        exit 2
        ;;
esac
