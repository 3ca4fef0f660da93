#!/usr/bin/env bash
# A private Redis 8 or Valkey 8 server on a Debian 12 (bookworm) machine, without changing the
# system: the targets the tests run beside the system's Redis 7 (README.md, "Tests").
#
#   --flavor redis8   Debian trixie's redis-server (pinned 5:8.0.2-3+deb13u3); it needs a newer
#                     glibc than Debian 12's, so its libraries come from trixie too
#   --flavor valkey8  bookworm-backports' valkey-server (pinned 8.0.1+dfsg1-1~bpo12+1), a native
#                     Debian 12 build (installing it would start a service on 6379: never done)
#
# How (the method of scripts/mysql-server.sh): apt-get downloads the server and the libraries
# it links through a private apt state in the cache dir (the system's /etc/apt, its lists and
# its installed packages are never touched; no dpkg -i; root is not needed); dpkg-deb -x unpacks
# them into one prefix; the server runs through the prefix's own dynamic loader
# (ld-linux-x86-64.so.2 --inhibit-cache --library-path PREFIX/...), so no system library is used.
# The .debs and the prefix stay in the cache dir: later runs download nothing.
#
#   redis-server.sh --flavor F [options] start   fetch (once), start on --port, print the URL
#   redis-server.sh --flavor F [options] stop    stop the server of --port (SIGTERM, by its PID)
#   redis-server.sh --flavor F [options] status  running or not, and the URL
#   redis-server.sh --flavor F [options] url     print the URL (redis://127.0.0.1:PORT)
#   redis-server.sh --flavor F [options] fetch   only download + unpack; print the directory of
#                                      the prefix's `redis-server` and `redis-cli` (wrappers
#                                      that start the flavor's own binaries through the loader)
#   redis-server.sh --flavor F [options] run TOOL [ARGS...]   run redis-server or redis-cli
#   redis-server.sh --flavor F [options] clean   stop, remove the run dir (--all: the cache too)
#
# Options (or the environment variables in brackets):
#   --flavor F        redis8 or valkey8 [REDIS_SH_FLAVOR, default redis8]
#   --port N          TCP port on 127.0.0.1 [REDIS_SH_PORT, default 6480]
#   --version V       the server package's Debian version [REDIS_SH_VERSION, default the pin
#                     above]; "any": whatever the suite has
#   --work DIR        cache: apt state, .debs, prefix
#                     [REDIS_SH_WORK, default ${XDG_CACHE_HOME:-$HOME/.cache}/migrator/redis-server/F]
#   --dir DIR         run dir: pid file, log [REDIS_SH_DIR, default ${TMPDIR:-/tmp}/migrator-F-PORT]
#   --mirror URL      Debian mirror [REDIS_SH_MIRROR, default: the one this machine's apt uses]
#   --keyring FILE    [REDIS_SH_KEYRING, default /usr/share/keyrings/debian-archive-keyring.gpg]
#   --refresh         re-download the package lists and re-unpack the prefix
#   --                everything after it goes to the server as is, e.g. -- --maxmemory 64mb
#
# The server: no persistence (save "", appendonly no), no password, 127.0.0.1 only. stdout
# carries only the URL (fetch: the wrappers' directory), messages go to stderr:
#   URL=$(scripts/redis-server.sh --flavor valkey8 --port 6481 start)   # redis://127.0.0.1:6481
#   scripts/redis-server.sh --flavor valkey8 --port 6481 stop
#
# Pinned: when the suite no longer has the pinned version and the cache lacks its .debs, fetch
# stops and says so (a newer version is a deliberate change: --version, after the tests pass).
set -euo pipefail

FLAVOR=${REDIS_SH_FLAVOR:-redis8}
PORT=${REDIS_SH_PORT:-6480}
VERSION=${REDIS_SH_VERSION:-}
WORK=${REDIS_SH_WORK:-}
RUN=${REDIS_SH_DIR:-}
MIRROR=${REDIS_SH_MIRROR:-}
KEYRING=${REDIS_SH_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
REFRESH=no ALL=no
EXTRA=()

say() { printf 'redis-server.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

CMD=
while [[ $# -gt 0 ]]; do
    case $1 in
        --flavor) FLAVOR=$2; shift 2 ;;
        --port) PORT=$2; shift 2 ;;
        --version) VERSION=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --dir) RUN=$2; shift 2 ;;
        --mirror) MIRROR=$2; shift 2 ;;
        --keyring) KEYRING=$2; shift 2 ;;
        --refresh) REFRESH=yes; shift ;;
        --all) ALL=yes; shift ;;
        -h|--help) usage ;;
        --) shift; EXTRA=("$@"); break ;;
        start|stop|status|url|fetch|clean) CMD=$1; shift ;;
        run) CMD=run; shift; EXTRA=("$@"); break ;;
        *) say "unknown argument: $1"; usage 2 ;;
    esac
done
[[ -n $CMD ]] || usage 2
[[ $PORT =~ ^[0-9]+$ ]] || die "--port wants a number, not '$PORT'"

# flavor: its suites (the first one's packages are pinned), packages, pinned version, programs
case $FLAVOR in
    redis8)
        SUITES=(trixie)
        PACKAGES=(redis-tools redis-server) PIN=5:8.0.2-3+deb13u3
        SERVER_BIN=redis-server CLI_BIN=redis-cli ;;
    valkey8)
        SUITES=(bookworm-backports bookworm)
        PACKAGES=(valkey-tools valkey-server) PIN=8.0.1+dfsg1-1~bpo12+1
        SERVER_BIN=valkey-server CLI_BIN=valkey-cli ;;
    *) die "--flavor wants redis8 or valkey8, not '$FLAVOR'" ;;
esac
VERSION=${VERSION:-$PIN}
WORK=${WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/migrator/redis-server/$FLAVOR}
WORK=$(mkdir -p "$WORK" && cd "$WORK" && pwd)
RUN=${RUN:-${TMPDIR:-/tmp}/migrator-$FLAVOR-$PORT}
APT=$WORK/apt               # private apt state: sources.list, lists, cache
DEBS=$WORK/debs             # the downloaded .debs (kept: later fetches download nothing)
PREFIX=$WORK/prefix         # everything unpacked here
WRAP=$PREFIX/wrap           # redis-server and redis-cli of the flavor, through the loader
STAMP=$PREFIX/.redis-server-sh
PIDFILE=$RUN/server.pid
LOG=$RUN/server.log
URL="redis://127.0.0.1:$PORT"

# ---------------------------------------------------------------- packages
# shellcheck source=scripts/debian-prefix.sh
source "$(dirname "${BASH_SOURCE[0]}")/debian-prefix.sh"
apt_options

# what the resolver brings that holds no library the server loads (adduser's and the init
# scripts' dependencies, glibc's extra modules, perl for valkey-tools' scripts); what is kept is checked below (ld.so --list)
DROP='^(libc-gconv-modules-extra|libpam.*|libsemanage.*|libsepol.*|libaudit.*|libdebconfclient.*|libdb5.*|libcrypt1|libselinux1|libpcre2.*|libacl1|libbsd0|libmd0|libbz2.*|libcap-ng0|openssl-provider-legacy|lib.*-perl|libperl.*|libgdbm.*)$'

deb_name() {  # PACKAGE VERSION: the file name apt-get download gives it
    echo "${1}_${2//:/%3a}_amd64.deb"
}

all_cached() {  # LIST: every .deb the list names is in DEBS
    local f
    while read -r f; do [[ -f $DEBS/$f ]] || return 1; done < "$1"
}

fetch() {  # one at a time per cache dir
    ( flock 9; fetch_locked ) 9>"$WORK/.lock"
}

fetch_locked() {
    if [[ $REFRESH == no && -f $STAMP && -x $WRAP/redis-server ]] &&
        { [[ $VERSION == any ]] || grep -qxF "$(deb_name "${PACKAGES[0]}" "$VERSION")" "$STAMP"; }; then
        return 0  # unpacked before: reuse
    fi
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "needs apt-get and dpkg-deb (Debian)"
    local t0=$SECONDS want=() p pkgs=() files=() f line
    local cached=$DEBS/$FLAVOR-$VERSION.list  # the .debs of a version fetched before
    if [[ $VERSION != any && $REFRESH == no && -f $cached ]] && all_cached "$cached"; then
        mapfile -t files < "$cached"
        say "using the cached .debs of $FLAVOR $VERSION"
    else
        apt_lists "${SUITES[@]}"
        for p in "${PACKAGES[@]}"; do
            if [[ $VERSION == any ]]; then want+=("$p/${SUITES[0]}"); else want+=("$p=$VERSION"); fi
        done
        # the resolver's list, as if nothing were installed (the private status is empty)
        local sim name v
        sim=$(apt-get "${APT_OPTS[@]}" -s -qq install --no-install-recommends "${want[@]}" 2>&1) || {
            if [[ $VERSION != any ]]; then
                die "the suite ${SUITES[0]} has no ${PACKAGES[0]} $VERSION any more and the cache" \
                    "($DEBS) lacks it; take the suite's with --version any, run the tests, then pin it" \
                    "(apt said: $(grep -m1 -E '^E:' <<<"$sim"))"
            fi
            die "apt-get cannot resolve ${want[*]}: $sim"
        }
        while read -r line; do  # Inst NAME (VERSION ...
            [[ $line =~ ^Inst\ ([^ ]+)\ \(([^ ]+) ]] || continue
            name=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]}
            [[ $name =~ ^(lib|zlib1g|redis-|valkey-) && ! $name =~ $DROP ]] || continue
            pkgs+=("$name=$v")
            files+=("$(deb_name "$name" "$v")")
        done <<<"$sim"
        say "packages (${#pkgs[@]}): ${pkgs[*]}"
        mkdir -p "$DEBS"
        (cd "$DEBS" && apt-get "${APT_OPTS[@]}" -qq download "${pkgs[@]}" >&2) || die "apt-get download failed"
        v=$(sed -n "s/^${PACKAGES[0]}=//p" < <(printf '%s\n' "${pkgs[@]}"))
        printf '%s\n' "${files[@]}" > "$DEBS/$FLAVOR-$v.list"
        [[ $VERSION == any ]] && say "the suite has ${PACKAGES[0]} $v (pin it with --version $v)"
    fi
    rm -rf "$PREFIX.new"; mkdir -p "$PREFIX.new"
    for f in "${files[@]}"; do
        [[ -f $DEBS/$f ]] || die "no $f in $DEBS"
        dpkg-deb -x "$DEBS/$f" "$PREFIX.new"
        echo "$f" >> "$PREFIX.new/.redis-server-sh"
    done
    rm -rf "$PREFIX.new/usr/share/doc" "$PREFIX.new/usr/share/man" "$PREFIX.new/usr/share/lintian" \
        "$PREFIX.new/usr/share/locale" "$PREFIX.new/usr/lib/x86_64-linux-gnu/gconv"
    rm -rf "$PREFIX"; mv "$PREFIX.new" "$PREFIX"
    write_wrappers
    # every library the server loads must come from the prefix
    local list
    list=$("$WRAP/.ldso" --list "$PREFIX/usr/bin/$SERVER_BIN" 2>&1) || die "$SERVER_BIN does not load: $list"
    if grep '=>' <<<"$list" | grep -v "=> $PREFIX/" | grep -q .; then
        die "libraries from outside the prefix (add their packages): $(grep '=>' <<<"$list" | grep -v "=> $PREFIX/")"
    fi
    say "fetched in $((SECONDS - t0)) s; prefix $(du -sh "$PREFIX" | cut -f1): $("$WRAP/redis-server" --version)"
}

write_wrappers() {  # PREFIX/wrap/{.ldso,redis-server,redis-cli}: the flavor's programs through its loader
    local loader libpath name prog
    loader=$(find "$PREFIX/usr/lib/x86_64-linux-gnu" "$PREFIX/lib/x86_64-linux-gnu" -maxdepth 1 \
        -name "ld-linux-x86-64.so.2" -type f 2>/dev/null | head -1 || true)
    [[ -n $loader ]] || die "no ld-linux-x86-64.so.2 in $PREFIX (libc6 missing from the packages?)"
    libpath=$PREFIX/usr/lib/x86_64-linux-gnu
    [[ -d $PREFIX/lib/x86_64-linux-gnu ]] && libpath=$PREFIX/lib/x86_64-linux-gnu:$libpath
    mkdir -p "$WRAP"
    printf '#!/bin/sh\nexec "%s" --inhibit-cache --library-path "%s" "$@"\n' "$loader" "$libpath" > "$WRAP/.ldso"
    for name in redis-server redis-cli; do
        prog=$SERVER_BIN; [[ $name == redis-cli ]] && prog=$CLI_BIN
        [[ -e $PREFIX/usr/bin/$prog ]] || die "no $prog in $PREFIX/usr/bin"
        # the program's own path as argv[0]: redis-server and redis-check-rdb are one binary,
        # told apart by that name
        printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$WRAP/.ldso" "$PREFIX/usr/bin/$prog" > "$WRAP/$name"
    done
    chmod +x "$WRAP/.ldso" "$WRAP/redis-server" "$WRAP/redis-cli"
}

# ---------------------------------------------------------------- server
running() {  # the PID file names a live server of this prefix and port (never another program)
    local pid
    pid=$(cat "$PIDFILE" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
    # the server rewrites its command line: "LOADER ... PREFIX/usr/bin/redis-server 127.0.0.1:PORT"
    local cmdline
    cmdline=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmdline == *" $PREFIX/usr/bin/$SERVER_BIN "* && $cmdline == *":$PORT "* ]]
}

start() {
    if running; then
        say "already running (pid $(cat "$PIDFILE"), $FLAVOR on $PORT)"
        echo "$URL"; return 0
    fi
    port_busy && die "port $PORT is taken by another program"
    fetch
    mkdir -p "$RUN"
    : > "$LOG"
    # setsid: the server outlives this script and its terminal
    setsid "$WRAP/redis-server" --port "$PORT" --bind 127.0.0.1 --dir "$RUN" --logfile "$LOG" \
        --save "" --appendonly no --daemonize no ${EXTRA[@]+"${EXTRA[@]}"} </dev/null >>"$LOG" 2>&1 &
    local pid=$! i
    echo "$pid" > "$PIDFILE"
    for ((i = 0; i < 400; i++)); do  # up to 20 s
        if ! alive "$pid"; then tail -20 "$LOG" >&2; die "$SERVER_BIN exited (log: $LOG)"; fi
        [[ $("$WRAP/redis-cli" -p "$PORT" ping 2>/dev/null) == PONG ]] && break
        sleep 0.05
    done
    [[ $("$WRAP/redis-cli" -p "$PORT" ping 2>/dev/null) == PONG ]] ||
        die "$SERVER_BIN did not answer on $PORT within 20 s (log: $LOG)"
    say "$SERVER_BIN $pid up on 127.0.0.1:$PORT (run dir $RUN)"
    echo "$URL"
}

stop() {
    if ! running; then say "not running ($FLAVOR on $PORT)"; rm -f "$PIDFILE"; return 0; fi
    local pid i
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid"
    for ((i = 0; i < 400; i++)); do running || break; sleep 0.05; done
    if running; then say "pid $pid still runs after 20 s; kill -9 $pid"; kill -KILL "$pid"; fi
    rm -f "$PIDFILE"
    say "stopped pid $pid"
}

case $CMD in
    fetch) fetch; echo "$WRAP" ;;
    start) start ;;
    stop) stop ;;
    url) echo "$URL" ;;
    status)
        if running; then echo "running pid $(cat "$PIDFILE") $URL ($FLAVOR)"; else echo "stopped ($FLAVOR on $PORT)"; exit 3; fi ;;
    run)
        [[ ${#EXTRA[@]} -gt 0 ]] || die "run wants redis-server or redis-cli"
        fetch
        [[ ${EXTRA[0]} == redis-server || ${EXTRA[0]} == redis-cli ]] ||
            die "run wants redis-server or redis-cli, not ${EXTRA[0]}"
        exec "$WRAP/${EXTRA[0]}" "${EXTRA[@]:1}" ;;
    clean)
        stop
        rm -rf "$RUN"
        if [[ $ALL == yes ]]; then rm -rf "$WORK"; say "removed $RUN and $WORK"; else say "removed $RUN"; fi ;;
esac
