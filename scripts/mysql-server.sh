#!/usr/bin/env bash
# A private Oracle MySQL server (Debian's mysql-server-core, pinned to 9.7.4-2) on a Debian 12
# (bookworm) machine, which ships no MySQL, without changing the system. The tests start theirs
# with it (tests/mysql_server.py) and .ci/run fetches it; README.md, "Tests".
#
# How: apt-get downloads the server and the libraries it links (sid's glibc, libstdc++, ICU, ...)
# through a private apt state in the cache dir (the system's /etc/apt, its lists and its
# installed packages are never touched; no dpkg -i; root is not needed);
# dpkg-deb -x unpacks them into one prefix; mysqld runs through the prefix's own dynamic loader
# (ld-linux-x86-64.so.2 --inhibit-cache --library-path PREFIX/...), so no system library is used.
# The .debs and the prefix stay in the cache dir: later runs on the machine download nothing
# (and need no network), and the server stays the pinned version while the suite moves on.
#
#   mysql-server.sh [options] start     fetch + unpack (once), initialize (once), start, print the URL
#   mysql-server.sh [options] stop      stop the server of --port / --data (SIGTERM, by its PID)
#   mysql-server.sh [options] kill      kill -9 the server of --port / --data (a crash)
#   mysql-server.sh [options] status    running or not, and the URL
#   mysql-server.sh [options] url       print the URL (mysql://root@127.0.0.1:PORT)
#   mysql-server.sh [options] fetch     only download + unpack into the prefix; print the prefix
#   mysql-server.sh [options] run TOOL [ARGS...]   run a program from the prefix, e.g.
#                                       run mysqlbinlog -vv --base64-output=decode-rows FILE
#   mysql-server.sh [options] clean     stop, then remove the data dir (--all: the whole cache dir)
#
# Options (or the environment variables in brackets):
#   --port N          TCP port on 127.0.0.1 [MYSQL_SH_PORT, default 3450]
#   --work DIR        cache: apt state, .debs, prefix, template data dir
#                     [MYSQL_SH_WORK, default ${XDG_CACHE_HOME:-$HOME/.cache}/migrator/mysql-server]
#   --data DIR        data directory; DIR.err, DIR.pid, DIR.sock, DIR.tmp beside it
#                     [MYSQL_SH_DATA, default ${TMPDIR:-/tmp}/migrator-mysql-PORT]
#   --server-id N     server_id [MYSQL_SH_SERVER_ID, default 1]
#   --version V       mysql-server-core's Debian version [MYSQL_SH_VERSION, default 9.7.4-2];
#                     "any": whatever the suite has
#   --suite S         Debian suite to take the packages from [MYSQL_SH_SUITE, default sid]
#   --mirror URL      Debian mirror [MYSQL_SH_MIRROR, default: the one this machine's apt uses]
#   --keyring FILE    [MYSQL_SH_KEYRING, default /usr/share/keyrings/debian-archive-keyring.gpg]
#   --fresh           remove the data dir first (a new, empty server)
#   --refresh         re-download the package lists and re-unpack the prefix
#   --client          (the default) mysql-client-core is unpacked too: mysql, mysqldump, mysqladmin
#   --                everything after it goes to mysqld as is (later options win), e.g.
#                     -- --binlog-transaction-compression=ON --innodb-buffer-pool-size=256M
#
# The server: root@'%' and root@localhost with an empty password (caching_sha2_password, the
# default plugin), TLS on with the auto-generated certificates (DATA/ca.pem), binary log on:
# log_bin, binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL, gtid_mode=ON,
# enforce_gtid_consistency=ON; X protocol off; small memory (about 160 MB RSS) and no fsyncs,
# for tests only: kill -9 of mysqld loses nothing committed, a power cut may. A new data dir is
# a copy of a template initialized once per version in the cache dir (~1 s instead of ~11 s;
# each copy gets its own server UUID at its first start).
# stdout carries only the URL (fetch: the prefix), messages go to stderr:
#   URL=$(scripts/mysql-server.sh --port 3450 start)          # e.g. mysql://root@127.0.0.1:3450
#   scripts/mysql-server.sh --port 3450 stop
#
# Pinned: when the suite no longer has the pinned version and the cache lacks its .debs, fetch
# stops and says so (a newer version is a deliberate change: --version, after the tests pass).
set -euo pipefail

PORT=${MYSQL_SH_PORT:-3450}
WORK=${MYSQL_SH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/migrator/mysql-server}
DATA=${MYSQL_SH_DATA:-}
SERVER_ID=${MYSQL_SH_SERVER_ID:-1}
VERSION=${MYSQL_SH_VERSION:-9.7.4-2}
SUITE=${MYSQL_SH_SUITE:-sid}
MIRROR=${MYSQL_SH_MIRROR:-}
KEYRING=${MYSQL_SH_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
FRESH=no REFRESH=no CLIENT=yes ALL=no
EXTRA=()

say() { printf 'mysql-server.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

CMD=
while [[ $# -gt 0 ]]; do
    case $1 in
        --port) PORT=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --data) DATA=$2; shift 2 ;;
        --server-id) SERVER_ID=$2; shift 2 ;;
        --version) VERSION=$2; shift 2 ;;
        --suite) SUITE=$2; shift 2 ;;
        --mirror) MIRROR=$2; shift 2 ;;
        --keyring) KEYRING=$2; shift 2 ;;
        --fresh) FRESH=yes; shift ;;
        --refresh) REFRESH=yes; shift ;;
        --client) CLIENT=yes; shift ;;
        --all) ALL=yes; shift ;;
        -h|--help) usage ;;
        --) shift; EXTRA=("$@"); break ;;
        start|stop|kill|status|url|fetch|clean) CMD=$1; shift ;;
        run) CMD=run; shift; EXTRA=("$@"); break ;;
        *) say "unknown argument: $1"; usage 2 ;;
    esac
done
[[ -n $CMD ]] || usage 2
[[ $PORT =~ ^[0-9]+$ ]] || die "--port wants a number, not '$PORT'"
WORK=$(mkdir -p "$WORK" && cd "$WORK" && pwd)
DATA=${DATA:-${TMPDIR:-/tmp}/migrator-mysql-$PORT}
DATA=$(mkdir -p "$(dirname "$DATA")" && cd "$(dirname "$DATA")" && pwd)/$(basename "$DATA")
APT=$WORK/apt               # private apt state: sources.list, lists, cache
DEBS=$WORK/debs             # the downloaded .debs (keep them to skip the download next time)
PREFIX=$WORK/prefix         # everything unpacked here
TEMPLATE=$WORK/template     # an initialized, never started data dir, copied for each new one
SOCK=$DATA.sock
TMPD=$DATA.tmp
PIDFILE=$DATA.pid
LOG=$DATA.err
URL="mysql://root@127.0.0.1:$PORT"

LOADER=$PREFIX/usr/lib64/ld-linux-x86-64.so.2
LIBPATH=$PREFIX/usr/lib/x86_64-linux-gnu
in_prefix() {  # PROGRAM ARGS...: run a program of the prefix through the prefix's loader
    local prog=$1; shift
    exec "$LOADER" --inhibit-cache --library-path "$LIBPATH" "$prog" "$@"
}

# ---------------------------------------------------------------- packages
# shellcheck source=scripts/debian-prefix.sh
source "$(dirname "${BASH_SOURCE[0]}")/debian-prefix.sh"
apt_options

# Depends of mysql-server-core that only its plugins load (telemetry: curl, protobuf; webauthn:
# fido2; mecab; group replication: tirpc), left out; and packages with no file a server loads.
PLUGIN_ONLY='^(libcurl4.*|libfido2-.*|libmecab2|libprotobuf[0-9]+(t64)?|libtirpc3.*)$'
SKIP='^(perl|perl-base|perl:any|debconf.*|openssl-provider-legacy|gcc-[0-9]+-base|libc-gconv-modules-extra)$'

depends_of() {  # PACKAGE: its Depends/Pre-Depends names (every alternative), one a line
    { apt-cache "${APT_OPTS[@]}" show --no-all-versions "$1" 2>/dev/null || true; } |
        sed -n 's/^\(Pre-\)\{0,1\}Depends: //p' | tr ',|' '\n\n' |
        sed 's/^ *//; s/ .*//; s/:any$//' | grep . | sort -u
}

closure() {  # PACKAGE...: them and their Depends, recursively (one apt-cache run), less SKIP
    apt-cache "${APT_OPTS[@]}" depends --recurse --important "$@" |
        grep -v '^ ' | grep -v '^<' | grep -Ev "$SKIP" | sort -u
}

fetch() {  # one at a time per work dir; the lock's fd is closed before mysqld starts
    ( flock 9; fetch_locked ) 9>"$WORK/.lock"
}

fetch_locked() {
    local stamp=$PREFIX/.mysql-server-sh
    if [[ $REFRESH == no && -f $stamp && -x $PREFIX/usr/sbin/mysqld ]] &&
        { [[ $VERSION == any ]] || grep -qxF "mysql-server-core_${VERSION//:/%3a}_amd64.deb" "$stamp"; } &&
        { [[ $CLIENT == no ]] || [[ -e $PREFIX/usr/bin/mysql ]]; }; then
        return 0  # unpacked before: reuse
    fi
    command -v dpkg-deb >/dev/null || die "needs dpkg-deb (Debian)"
    local t0=$SECONDS t1 t2 t3 roots pkgs manifest=$DEBS/manifest-$VERSION
    [[ $CLIENT == yes ]] && manifest+=-client
    mkdir -p "$DEBS"
    if [[ $VERSION != any && $REFRESH == no && -s $manifest ]] && all_cached "$manifest"; then
        say "the .debs of mysql-server-core $VERSION are in $DEBS: no download"
        mapfile -t pkgs < "$manifest"
        t1=$SECONDS t2=$SECONDS t3=$SECONDS
    else
        command -v apt-get >/dev/null || die "needs apt-get (Debian)"
        apt_lists "$SUITE"
        t1=$SECONDS
        local have
        have=$(apt-cache "${APT_OPTS[@]}" show --no-all-versions mysql-server-core 2>/dev/null |
            sed -n 's/^Version: //p' | head -1)
        [[ -n $have ]] || die "no mysql-server-core in $SUITE"
        if [[ $VERSION != any && $have != "$VERSION" ]]; then
            die "$SUITE has mysql-server-core $have, not the pinned $VERSION, and $DEBS lacks" \
                "the pinned .debs: run with --version $have (MYSQL_SH_VERSION=$have) and update the" \
                "pin in scripts/mysql-server.sh once the tests pass on it"
        fi
        # the server's own libraries (not its plugins'), the client's if asked, and glibc,
        # libstdc++ and libgcc from the suite too (sid's mysqld wants GLIBC_2.38, GLIBCXX_3.4.35)
        mapfile -t roots < <(depends_of mysql-server-core | grep -Ev "$PLUGIN_ONLY" | grep -Ev "$SKIP")
        [[ ${#roots[@]} -gt 3 ]] || die "no mysql-server-core in $SUITE"
        roots+=(libc6 libstdc++6 libgcc-s1)
        [[ $CLIENT == yes ]] && roots+=(mysql-client-core)
        mapfile -t pkgs < <(closure "${roots[@]}")
        pkgs+=(mysql-server-core)
        t2=$SECONDS
        say "packages (${#pkgs[@]}): ${pkgs[*]}"
        (cd "$DEBS" && apt-get "${APT_OPTS[@]}" -qq download "${pkgs[@]}" >&2) || die "apt-get download failed"
        t3=$SECONDS
    fi
    rm -rf "$PREFIX.new"; mkdir -p "$PREFIX.new"
    local p f
    for p in "${pkgs[@]}"; do
        f=$(ls -t "$DEBS/${p}"_*.deb 2>/dev/null | head -1)
        [[ $p == mysql-server-core && $VERSION != any ]] && f=$DEBS/mysql-server-core_${VERSION//:/%3a}_amd64.deb
        [[ -n $f && -f $f ]] || die "no .deb for $p in $DEBS"
        dpkg-deb -x "$f" "$PREFIX.new"
        basename "$f" >> "$PREFIX.new/.mysql-server-sh"
    done
    # not needed to run a server (about 75 MB): the server's other tools (mysqlbinlog and
    # mysql_tzinfo_to_sql stay), translations, docs, iconv modules
    ( cd "$PREFIX.new/usr" && rm -rf share/doc share/man share/lintian share/locale \
        lib/x86_64-linux-gnu/gconv bin/innochecksum bin/ibd2sdi bin/myisam* bin/perror \
        bin/mysql_secure_installation bin/mysql_migrate_keyring bin/my_print_defaults \
        bin/mysqld_multi bin/mysqld_safe bin/mysqldumpslow &&
        find share/mysql -mindepth 1 -maxdepth 1 -type d ! -name english ! -name charsets \
            -exec rm -rf {} + )
    # every library mysqld loads must come from the prefix
    local list
    list=$("$PREFIX.new/usr/lib64/ld-linux-x86-64.so.2" --inhibit-cache --library-path \
        "$PREFIX.new/usr/lib/x86_64-linux-gnu" --list "$PREFIX.new/usr/sbin/mysqld" 2>&1) ||
        die "mysqld does not load: $list"
    if grep '=>' <<<"$list" | grep -v "=> $PREFIX.new/" | grep -q .; then
        die "libraries from outside the prefix (add their packages): $(grep '=>' <<<"$list" | grep -v "=> $PREFIX.new/")"
    fi
    rm -rf "$PREFIX"; mv "$PREFIX.new" "$PREFIX"
    rm -rf "$TEMPLATE"  # initialized by another build
    [[ $VERSION == any ]] || printf '%s\n' "${pkgs[@]}" > "$manifest"
    say "lists $((t1 - t0)) s, resolve $((t2 - t1)) s, download $((t3 - t2)) s, unpack+check $((SECONDS - t3)) s"
    say "prefix $(du -sh "$PREFIX" | cut -f1): $("$LOADER" --inhibit-cache --library-path "$LIBPATH" "$PREFIX/usr/sbin/mysqld" --version)"
}

all_cached() {  # MANIFEST: a .deb for each package it lists is in DEBS
    local p
    while read -r p; do
        compgen -G "$DEBS/${p}_*.deb" >/dev/null || return 1
    done < "$1"
}

# ---------------------------------------------------------------- server
running() {  # the PID file names a live mysqld of this data dir (never another program)
    local pid
    pid=$(cat "$PIDFILE" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
    tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--datadir=$DATA"
}

mysqld_args() {
    local a=(--no-defaults)
    [[ $(id -u) -eq 0 ]] && a+=(--user=root)
    a+=(--basedir="$PREFIX/usr" --datadir="$DATA" --lc-messages-dir="$PREFIX/usr/share/mysql"
        --character-sets-dir="$PREFIX/usr/share/mysql/charsets"
        --plugin-dir="$PREFIX/usr/lib/mysql/plugin" --log-error="$LOG" --tmpdir="$TMPD"
        # small and fast, for tests: no fsync, no doublewrite, 32 MB buffer pool, no P_S
        --innodb-buffer-pool-size=32M --innodb-redo-log-capacity=32M --innodb-log-buffer-size=4M
        --innodb-doublewrite=OFF --innodb-flush-method=nosync --innodb-flush-log-at-trx-commit=2
        --performance-schema=OFF --key-buffer-size=1M --table-open-cache=400)
    printf '%s\n' "${a[@]}"
}

initialize() {  # a copy of the template (initialized once per prefix, under the lock)
    local t0=$SECONDS
    ( flock 9; [[ -d $TEMPLATE/mysql ]] || make_template ) 9>"$WORK/.lock"
    rm -rf "$DATA"; mkdir -p "$(dirname "$DATA")"
    cp -a "$TEMPLATE" "$DATA"
    say "data dir $DATA from the template in $((SECONDS - t0)) s"
}

make_template() {
    local t0=$SECONDS init=$WORK/init.sql args
    cat > "$init" <<'SQL'
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
SQL
    local data=$DATA log=$LOG
    DATA=$TEMPLATE.new LOG=$TEMPLATE.err
    mapfile -t args < <(mysqld_args)
    rm -rf "$DATA"
    "$LOADER" --inhibit-cache --library-path "$LIBPATH" "$PREFIX/usr/sbin/mysqld" "${args[@]}" \
        --initialize-insecure --init-file="$init" || { tail -20 "$LOG" >&2; die "initialize failed (log: $LOG)"; }
    rm -f "$init" "$DATA/auto.cnf"  # auto.cnf (the server UUID) is written at each copy's first start
    rm -rf "$TEMPLATE"; mv "$DATA" "$TEMPLATE"
    DATA=$data LOG=$log
    say "initialized the template $TEMPLATE in $((SECONDS - t0)) s"
}

start() {
    if running; then
        say "already running (pid $(cat "$PIDFILE"), data $DATA)"
        echo "$URL"; return 0
    fi
    port_busy && die "port $PORT is taken by another program"
    fetch
    mkdir -p "$TMPD"
    [[ $FRESH == yes ]] && rm -rf "$DATA"
    [[ -d $DATA/mysql ]] || initialize
    # a server of this data dir killed (-9) leaves its socket's lock file, naming its pid: once
    # another process has that pid (pids wrap at 32768), mysqld refuses to start ("Another
    # process with pid N is using unix socket file"); ours is not running, so both are stale
    rm -f "$SOCK" "$SOCK.lock"
    local args
    mapfile -t args < <(mysqld_args)
    args+=(--port="$PORT" --bind-address=127.0.0.1 --socket="$SOCK" --pid-file="$PIDFILE"
        --mysqlx=OFF --skip-name-resolve --secure-file-priv=NULL --character-set-server=utf8mb4
        --server-id="$SERVER_ID" --log-bin=binlog --binlog-format=ROW --binlog-row-image=FULL
        --binlog-row-metadata=FULL --gtid-mode=ON --enforce-gtid-consistency=ON --sync-binlog=0
        ${EXTRA[@]+"${EXTRA[@]}"})
    : > "$LOG"
    local t0=$SECONDS
    # setsid: the server outlives this script and its terminal; it writes PIDFILE itself too
    setsid "$LOADER" --inhibit-cache --library-path "$LIBPATH" "$PREFIX/usr/sbin/mysqld" "${args[@]}" \
        </dev/null >>"$LOG" 2>&1 &
    echo $! > "$PIDFILE"
    local pid=$! i
    for ((i = 0; i < 1200; i++)); do  # up to 60 s
        if ! alive "$pid"; then tail -20 "$LOG" >&2; die "mysqld exited (log: $LOG)"; fi
        port_busy && grep -q 'ready for connections' "$LOG" && break
        sleep 0.05
    done
    port_busy || die "mysqld did not answer on $PORT within 60 s (log: $LOG)"
    say "mysqld $pid up in $((SECONDS - t0)) s on 127.0.0.1:$PORT (socket $SOCK, data $DATA, log $LOG)"
    echo "$URL"
}

stop() {
    if ! running; then say "not running (data $DATA)"; rm -f "$PIDFILE"; return 0; fi
    local pid i
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid"
    for ((i = 0; i < 1200; i++)); do running || break; sleep 0.05; done
    if running; then say "pid $pid still runs after 60 s; kill -9 $pid"; kill -KILL "$pid"; fi
    rm -f "$PIDFILE"
    say "stopped pid $pid"
}

case $CMD in
    fetch) fetch; echo "$PREFIX" ;;
    start) start ;;
    stop) stop ;;
    kill)
        if running; then kill -KILL "$(cat "$PIDFILE")"; for ((i = 0; i < 200; i++)); do running || break; sleep 0.05; done; fi
        rm -f "$PIDFILE"; say "killed (data $DATA)" ;;
    url) echo "$URL" ;;
    status)
        if running; then echo "running pid $(cat "$PIDFILE") $URL data $DATA"; else echo "stopped (data $DATA)"; exit 3; fi ;;
    run)
        [[ ${#EXTRA[@]} -gt 0 ]] || die "run wants a program: run mysqlbinlog ..."
        fetch
        prog=${EXTRA[0]}
        for d in bin sbin; do [[ -x $PREFIX/usr/$d/$prog ]] && in_prefix "$PREFIX/usr/$d/$prog" "${EXTRA[@]:1}"; done
        die "no $prog in $PREFIX/usr/bin or sbin " ;;
    clean)
        [[ -n $DATA && $DATA != / ]] || die "refusing to remove '$DATA'"
        stop
        rm -rf "$DATA" "$DATA.err" "$SOCK" "$SOCK.lock" "$TMPD"
        if [[ $ALL == yes ]]; then rm -rf "$WORK"; say "removed $WORK"; else say "removed $DATA"; fi ;;
esac
