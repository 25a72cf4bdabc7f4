# scripts/debian.sh, read by scripts/otp and scripts/elixir: Debian packages
# fetched with a private apt configuration (nothing is installed on the
# system). The caller defines die().

# The cache root: $TRACEKIT_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/tracekit.
cache=${TRACEKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tracekit}

# apt_private SUITE ARG...: apt-get with the private configuration of
# Debian's SUITE (its lists and cache under the cache root; set up by
# apt_fetch).
apt_private() {
    state=$cache/apt-$1; shift
    apt-get -q -o Dir::Etc::sourcelist="$state/sources.list" \
        -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$state/lists" \
        -o Dir::Cache="$state/cache" -o Debug::NoLocking=1 "$@"
}

# apt_fetch WHAT SUITE DEST PKG...: download the packages PKG... of Debian's
# SUITE into DEST (WHAT names them in the messages).
apt_fetch() {
    what=$1 suite=$2 dest=$3; shift 3
    command -v apt-get >/dev/null 2>&1 ||
        die "cannot provision $what: apt-get is not available on this machine"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -r "$keyring" ] || die "cannot provision $what: $keyring is missing"
    state=$cache/apt-$suite
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$dest"
    echo "deb [signed-by=$keyring] http://deb.debian.org/debian $suite main" \
        > "$state/sources.list"
    pkgs=$*
    apt_private "$suite" update >"$state/update.log" 2>&1 ||
        die "cannot provision $what: apt-get update for suite $suite failed (no network?); see $state/update.log"
    # shellcheck disable=SC2086
    (cd "$dest" && apt_private "$suite" download $pkgs) \
        >"$state/download.log" 2>&1 ||
        die "cannot provision $what: downloading packages from $suite failed; see $state/download.log"
}
