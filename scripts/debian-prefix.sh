# Sourced by scripts/mysql-server.sh and scripts/redis-server.sh: what both need to download
# Debian packages through a private apt state (the system's /etc/apt, its lists and its
# installed packages are never touched) and to look after the server they start.
#
# The sourcing script defines say and die, and sets APT (the private apt state's directory),
# MIRROR (empty: the one this machine's apt uses), KEYRING, REFRESH (yes|no) and PORT; then
# calls apt_lists SUITE... before apt-get/apt-cache "${APT_OPTS[@]}".

apt_options() {  # APT_OPTS: every apt path inside $APT
    APT_OPTS=(
        -o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
        -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache"
        -o "Dir::State::status=$APT/status"
        -o APT::Get::List-Cleanup=0 -o Acquire::Languages=none
    )
    if [[ $(id -u) -eq 0 ]]; then APT_OPTS+=(-o APT::Sandbox::User=root); fi
}

detect_mirror() {  # the Debian mirror the system's apt uses (its configuration is only read)
    local m sl sp
    m=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' \
        'Component: main' 2>/dev/null | awk '$2 !~ /-security$/ { print $1; exit }')
    if [[ -z $m ]]; then  # no lists yet: read the sources files
        eval "$(apt-config shell sl Dir::Etc::sourcelist/f sp Dir::Etc::sourceparts/d)"
        m=$(cat "$sp"/*.sources 2>/dev/null | awk 'BEGIN { RS = "" }
            /(^|\n)Types:[^\n]*deb([ \n]|$)/ && !/(^|\n)Suites:[^\n]*-security/ &&
            !/(^|\n)Enabled: *no/ && match($0, /(^|\n)URIs: *[^ \n]+/) {
                u = substr($0, RSTART, RLENGTH); sub(/.*URIs: */, "", u); print u; exit }')
        [[ -n $m ]] || m=$(cat "$sl" "$sp"/*.list 2>/dev/null | awk '$1 == "deb" {
            for (i = 2; i < NF; i++) if ($i ~ /:\/\// && $(i + 1) !~ /-security/) { print $i; exit } }')
    fi
    [[ $m =~ ^https?:// ]] || die "cannot tell which Debian mirror apt uses here; give --mirror URL"
    echo "${m%/}"
}

apt_lists() {  # SUITE...: the private sources.list names them (main); their lists downloaded once
    mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
    [[ -n $MIRROR ]] || MIRROR=$(detect_mirror)
    : > "$APT/status"  # an empty dpkg status: nothing of the system's is looked at
    local want s
    want=$(for s in "$@"; do echo "deb [signed-by=$KEYRING] $MIRROR $s main"; done)
    if [[ ! -f $APT/sources.list || $(cat "$APT/sources.list") != "$want" ]]; then
        echo "$want" > "$APT/sources.list"
        REFRESH=yes
    fi
    if [[ $REFRESH == yes ]] || ! compgen -G "$APT/lists/*_Packages*" >/dev/null; then
        [[ -r $KEYRING ]] || die "no keyring at $KEYRING (package debian-archive-keyring); give --keyring"
        say "apt-get update ($*, private lists in $APT)"
        apt-get "${APT_OPTS[@]}" -qq update >&2 || die "apt-get update failed"
    fi
}

alive() {  # PID: the process exists and is not a zombie (kill -0 says yes to zombies)
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [[ -n $state && $state != Z && $state != X ]]
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }
