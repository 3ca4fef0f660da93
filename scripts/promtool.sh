#!/usr/bin/env bash
# promtool, Prometheus' own checker of rule files, for the tests of ops/prometheus/ (test-only:
# the tool itself never runs it). It comes from Debian bookworm's `prometheus` package (pinned
# 2.42.0+ds-5+deb12u1), downloaded through a private apt state in the cache dir (the method of
# scripts/redis-server.sh: the system's /etc/apt, its lists and its installed packages are never
# touched; no dpkg -i; root is not needed); dpkg-deb -x unpacks it and only usr/bin/promtool is
# kept (a Go program that needs nothing but libc). The .deb and promtool stay in the cache dir:
# later runs download nothing. .ci/run fetches it; tests/promtool.py finds it.
#
#   promtool.sh [options] fetch          download + unpack (once); print promtool's path
#   promtool.sh [options] path           print promtool's path if fetched (exit 1 if not)
#   promtool.sh [options] run ARGS...    fetch (once), then promtool ARGS...
#
# Options (or the environment variables in brackets):
#   --version V       the prometheus package's Debian version [PROMTOOL_SH_VERSION, default
#                     the pin above]; "any": whatever the suite has
#   --work DIR        cache: apt state, the .deb, promtool
#                     [PROMTOOL_SH_WORK, default ${XDG_CACHE_HOME:-$HOME/.cache}/migrator/promtool]
#   --mirror URL      Debian mirror [PROMTOOL_SH_MIRROR, default: the one this machine's apt uses]
#   --keyring FILE    [PROMTOOL_SH_KEYRING, default /usr/share/keyrings/debian-archive-keyring.gpg]
#   --refresh         re-download the package lists and unpack again
#
# Pinned: when bookworm no longer has the pinned version and the cache lacks its .deb, fetch
# stops and says so (a newer version is a deliberate change: --version, after the tests pass).
set -euo pipefail

PIN=2.42.0+ds-5+deb12u1
SUITE=bookworm
VERSION=${PROMTOOL_SH_VERSION:-$PIN}
WORK=${PROMTOOL_SH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/migrator/promtool}
MIRROR=${PROMTOOL_SH_MIRROR:-}
KEYRING=${PROMTOOL_SH_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
REFRESH=no

say() { printf 'promtool.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

CMD= ARGS=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --version) VERSION=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --mirror) MIRROR=$2; shift 2 ;;
        --keyring) KEYRING=$2; shift 2 ;;
        --refresh) REFRESH=yes; shift ;;
        -h|--help) usage ;;
        fetch|path) CMD=$1; shift ;;
        run) CMD=run; shift; ARGS=("$@"); break ;;
        *) say "unknown argument: $1"; usage 2 ;;
    esac
done
[[ -n $CMD ]] || usage 2
WORK=$(mkdir -p "$WORK" && cd "$WORK" && pwd)
APT=$WORK/apt     # private apt state: sources.list, lists, cache
DEBS=$WORK/debs   # the downloaded .deb (kept: later fetches download nothing)
BIN=$WORK/bin/promtool
STAMP=$WORK/bin/.promtool-sh  # the .deb promtool was unpacked from

# shellcheck source=scripts/debian-prefix.sh
source "$(dirname "${BASH_SOURCE[0]}")/debian-prefix.sh"
apt_options

deb_name() { echo "prometheus_${1//:/%3a}_amd64.deb"; }

fetched() {
    [[ $REFRESH == no && -x $BIN && -f $STAMP ]] &&
        { [[ $VERSION == any ]] || grep -qxF "$(deb_name "$VERSION")" "$STAMP"; }
}

fetch() {  # one at a time per cache dir
    ( flock 9; fetched || fetch_locked ) 9>"$WORK/.lock"
}

fetch_locked() {
    command -v dpkg-deb >/dev/null || die "needs dpkg-deb (Debian)"
    local t0=$SECONDS deb have
    mkdir -p "$DEBS"
    deb=$DEBS/$(deb_name "$VERSION")
    if [[ $VERSION == any || $REFRESH == yes || ! -f $deb ]]; then
        command -v apt-get >/dev/null || die "needs apt-get (Debian)"
        apt_lists "$SUITE"
        have=$(apt-cache "${APT_OPTS[@]}" show --no-all-versions prometheus 2>/dev/null |
            sed -n 's/^Version: //p' | head -1)
        [[ -n $have ]] || die "no prometheus package in $SUITE"
        if [[ $VERSION == any ]]; then
            VERSION=$have
            say "the suite has prometheus $have (pin it with --version $have)"
        elif [[ $have != "$VERSION" ]]; then
            die "$SUITE has prometheus $have, not the pinned $VERSION, and $DEBS lacks the pinned" \
                ".deb: run with --version $have and update the pin in scripts/promtool.sh once" \
                "the tests pass with it"
        fi
        deb=$DEBS/$(deb_name "$VERSION")
        say "downloading prometheus $VERSION (about 19 MB; promtool alone is kept)"
        (cd "$DEBS" && apt-get "${APT_OPTS[@]}" -qq download "prometheus=$VERSION" >&2) ||
            die "apt-get download failed"
    fi
    [[ -f $deb ]] || die "no $deb after the download"
    rm -rf "$WORK/unpack"
    dpkg-deb -x "$deb" "$WORK/unpack"
    mkdir -p "$WORK/bin"
    mv "$WORK/unpack/usr/bin/promtool" "$BIN.new"
    rm -rf "$WORK/unpack"
    "$BIN.new" --version >/dev/null 2>&1 || die "the unpacked promtool does not run: $("$BIN.new" --version 2>&1 | head -3)"
    mv "$BIN.new" "$BIN"
    basename "$deb" > "$STAMP"
    say "fetched in $((SECONDS - t0)) s: $("$BIN" --version 2>&1 | head -1)"
}

case $CMD in
    fetch) fetch; echo "$BIN" ;;
    path) fetched || { say "not fetched: run scripts/promtool.sh fetch"; exit 1; }; echo "$BIN" ;;
    run) fetch; exec "$BIN" "${ARGS[@]}" ;;
esac
