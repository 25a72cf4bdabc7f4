#!/bin/sh
# c_src/build.sh: the C half of the tracekit package, built with the
# Erlang/OTP that runs the build. rebar3's pre-compile hook runs it, so a
# project that depends on tracekit (through rebar3 or mix) gets the NIFs and
# tracekit-cat; the development Makefile runs it for the same pieces.
#
# Usage: sh c_src/build.sh [--obj DIR] [--priv DIR] [--cat FILE] [TARGET...]
#   nifs        PRIV/<m>.so for every c_src/nif/<m>/ (with c_src/nif/common
#               and c_src/lib)
#   cat         CAT (default PRIV/bin/tracekit-cat): c_src/cat/ with the
#               c_src/lib pieces it uses and OTP's ei
#   test-nifs   OBJ/test_nif/<m>.so for every c_src/test_nif/<m>/ (with
#               c_src/model): the development tree only
#   bench-nifs  OBJ/bench_nif/<m>.so for every c_src/bench_nif/<m>/: the
#               development tree only
#   facts       print "<OTP release> <erts version> <OTP root> <ei dir>",
#               asked of the erl on PATH; builds nothing
#   cflags      print the language and warning flags of every C file
# Without a target: nifs and cat. OBJ defaults to build/erts-<erts version>,
# PRIV to priv (both in the package directory).
#
# The OTP: the one rebar3 runs on, from the variables it gives its hooks
# (ERLANG_ROOT_DIR, ERLANG_ERTS_VER, ERLANG_LIB_DIR_erl_interface,
# ERLANG_TARGET); without them, the erl on PATH. Nothing is provisioned or
# fetched; nothing is written outside OBJ, PRIV and CAT.
#
# Each OTP has its own OBJ (named after the erts version, which fixes the NIF
# API), and OBJ/config records the compiler and flags its objects were made
# with (another set empties OBJ first). Libraries and programs are linked in
# OBJ/out and copied to PRIV when they differ from what is there: switching
# between OTPs never mixes their objects and costs a copy. A file is rebuilt
# when it is missing or older than one of its sources, the headers the
# compiler said it included, or this script.
#
# Environment: CC (cc), CFLAGS (-O2 -g), LDFLAGS, AR (ar); TK_EXTRA_CFLAGS,
# added to CFLAGS (the development Makefile's sanitizer builds); TK_WERROR=1
# adds -Werror (the development Makefile sets it; a dependent's compiler may
# warn where ours does not, and that must not stop its build).
set -eu

prog=c_src/build.sh
die() { echo "$prog: $*" >&2; exit 1; }

# The language and warning flags every C file of tracekit is built with.
base_cflags() {
    printf '%s' "-std=c11 -D_GNU_SOURCE -Wall -Wextra"
    [ "${TK_WERROR:-}" = 1 ] && printf ' %s' -Werror
    echo
}

# ---- arguments ---------------------------------------------------------------

obj='' priv='' cat=''
while [ $# -gt 0 ]; do
    case "$1" in
        --obj) [ $# -ge 2 ] || die "--obj needs a directory"; obj=$2; shift 2 ;;
        --priv) [ $# -ge 2 ] || die "--priv needs a directory"; priv=$2; shift 2 ;;
        --cat) [ $# -ge 2 ] || die "--cat needs a file name"; cat=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see $prog --help)" ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || set -- nifs cat
for t in "$@"; do
    case "$t" in
        nifs|cat|test-nifs|bench-nifs|facts|cflags) ;;
        *) die "unknown target '$t' (see $prog --help)" ;;
    esac
done

# The package directory (relative paths below are relative to it).
script_dir=$(dirname "$0")
cd "$script_dir/.."
[ -d c_src/lib ] && [ -d c_src/nif ] || die "run me as c_src/build.sh of a tracekit tree"

if [ "$1" = cflags ]; then base_cflags; exit 0; fi

# ---- the system and the OTP --------------------------------------------------

system=$(uname -s)
case "$system" in
    Linux|FreeBSD) ;;
    Darwin) die "macOS is not supported: c_src/lib/tk_tfile.c calls fdatasync, which macOS does not declare" ;;
    *) die "$system is not supported: tracekit's C parts build on Linux and FreeBSD" ;;
esac

# ask_erl: the facts of the erl on PATH, one a line: OTP release, erts
# version, root directory, erl_interface directory (empty when it has none).
ask_erl() {
    command -v erl >/dev/null 2>&1 ||
        die "no erl on PATH: tracekit builds its NIFs with the Erlang/OTP (27 or newer) whose erl is on PATH"
    erl -noshell -noinput -boot no_dot_erlang -eval '
        Ei = case code:lib_dir(erl_interface) of
                 Dir when is_list(Dir) -> Dir;
                 _ -> ""
             end,
        io:format("~s~n~s~n~s~n~s~n",
                  [erlang:system_info(otp_release), erlang:system_info(version),
                   code:root_dir(), Ei]),
        halt().' ||
        die "the erl on PATH ($(command -v erl)) did not answer"
}

if [ "$1" = facts ] || [ -z "${ERLANG_ROOT_DIR:-}" ] || [ -z "${ERLANG_ERTS_VER:-}" ] ||
   [ -z "${ERLANG_LIB_DIR_erl_interface:-}" ] || [ -z "${ERLANG_TARGET:-}" ]; then
    facts=$(ask_erl)
    otp_rel=$(echo "$facts" | sed -n 1p)
    erts_vsn=$(echo "$facts" | sed -n 2p)
    otp_root=$(echo "$facts" | sed -n 3p)
    ei_dir=$(echo "$facts" | sed -n 4p)
else
    # ERLANG_TARGET is "<OTP version>-<architecture>-<word size>".
    otp_rel=${ERLANG_TARGET%%[.-]*}
    erts_vsn=$ERLANG_ERTS_VER
    otp_root=$ERLANG_ROOT_DIR
    ei_dir=$ERLANG_LIB_DIR_erl_interface
fi
case "$otp_rel" in
    ''|*[!0-9]*) die "cannot tell the OTP release of ${otp_root:-the erl on PATH, $(command -v erl)} (got '$otp_rel')" ;;
esac
[ "$otp_rel" -ge 27 ] ||
    die "tracekit needs Erlang/OTP 27 or newer; the OTP at $otp_root is release $otp_rel"

[ -n "$erts_vsn" ] && [ -n "$otp_root" ] ||
    die "the erl on PATH ($(command -v erl)) did not say its erts version and root"
[ -n "$ei_dir" ] ||
    die "the OTP at $otp_root has no erl_interface, which tracekit-cat links (Debian: erlang-dev)"
if [ "$1" = facts ]; then echo "$otp_rel $erts_vsn $otp_root $ei_dir"; exit 0; fi

erts_inc=$otp_root/erts-$erts_vsn/include
ei_inc=$ei_dir/include
ei_lib=$ei_dir/lib
[ -f "$erts_inc/erl_nif.h" ] ||
    die "no $erts_inc/erl_nif.h: the OTP at $otp_root lacks its C headers (Debian: erlang-dev)"
[ -f "$ei_inc/ei.h" ] && [ -f "$ei_lib/libei.a" ] ||
    die "no ei.h and libei.a under $ei_dir: the OTP at $otp_root lacks erl_interface's development files (Debian: erlang-dev)"

: "${obj:=build/erts-$erts_vsn}"
: "${priv:=priv}"
: "${cat:=$priv/bin/tracekit-cat}"

# ---- the compiler --------------------------------------------------------------

nl='
'

CC=${CC:-cc}
CFLAGS="${CFLAGS:--O2 -g}${TK_EXTRA_CFLAGS:+ $TK_EXTRA_CFLAGS}"
LDFLAGS=${LDFLAGS:-}
AR=${AR:-ar}
set -f
# shellcheck disable=SC2086
command -v $CC >/dev/null 2>&1 || die "no C compiler: '$CC' is not found (set CC)"
set +f

# OBJ holds objects of one compiler and set of flags (the erts version is in
# its name); TK_WERROR changes no object and is left out.
config="CC=$CC${nl}CFLAGS=$CFLAGS${nl}LDFLAGS=$LDFLAGS"
mkdir -p "$obj" 2>/dev/null && [ -w "$obj" ] ||
    die "cannot write $obj in $(pwd): the C parts are built in the package's directory"
if [ "$(cat "$obj/config" 2>/dev/null)" != "$config" ]; then
    rm -rf "$obj/obj" "$obj/out" "$obj"/lib*.a
    printf '%s\n' "$config" > "$obj/config"
fi

all_cflags="$(base_cflags) -fPIC -fvisibility=hidden"

# stale OUT INPUT...: true when OUT is missing or an INPUT is newer. (test
# -nt: in POSIX.1-2024, and in every sh of the systems above before that.)
stale() {
    [ -e "$1" ] || return 0
    s_out=$1; shift
    for s_in do
        [ "$s_in" -nt "$s_out" ] && return 0
    done
    return 1
}

# must_make OUT LIST: true when OUT must be made again from the files of LIST
# (one a line): it is missing, older than one of them, or was made from
# another list (a source removed or added). made OUT LIST records the list.
must_make() {
    [ "$(cat "$1.in" 2>/dev/null)" = "$(printf '%s' "$2")" ] || return 0
    with_list "$2" stale "$1"
}
made() { printf '%s' "$2" > "$1.in"; }

# compile SRC [EXTRA_INCLUDE_DIR]: OBJ/obj/<SRC under c_src>.o, made when it
# is missing or older than SRC, a header SRC included or this script; appends
# the object to $objs (one a line).
compile() {
    c_in=$1 c_inc=${2:-}
    c_o=$obj/obj/${c_in#c_src/}
    c_o=${c_o%.c}.o
    c_make=1
    if [ -f "$c_o" ] && [ -f "$c_o.d" ] && ! [ c_src/build.sh -nt "$c_o" ]; then
        c_make=0
        # The files the compiler said (-MMD) the object was made from; the
        # target, the line ends and the OTP's headers (OBJ is that OTP's own)
        # are skipped.
        set -f
        while IFS= read -r c_line || [ -n "$c_line" ]; do
            for c_dep in $c_line; do
                case "$c_dep" in *:|\\|/*) continue ;; esac
                if ! [ -e "$c_dep" ] || [ "$c_dep" -nt "$c_o" ]; then c_make=1; break 2; fi
            done
        done < "$c_o.d"
        set +f
    fi
    if [ "$c_make" = 1 ]; then
        mkdir -p "$(dirname "$c_o")"
        echo "$prog: cc $c_in"
        # shellcheck disable=SC2086
        $CC $all_cflags $CFLAGS -I"$erts_inc" -I"$ei_inc" -Ic_src/lib \
            -Ic_src/nif/common ${c_inc:+-I"$c_inc"} -MMD -MF "$c_o.d.$$" \
            -c "$c_in" -o "$c_o.$$" ||
            { rm -f "$c_o.$$" "$c_o.d.$$"; die "compiling $c_in failed"; }
        mv -f "$c_o.d.$$" "$c_o.d"
        mv -f "$c_o.$$" "$c_o"
    fi
    objs=$objs$c_o$nl
}

# with_list LIST CMD ARG...: runs CMD ARG... followed by the lines of LIST as
# arguments.
with_list() {
    w_list=$1; shift
    w_n=$#
    set -f; w_ifs=$IFS; IFS=$nl
    # shellcheck disable=SC2086
    set -- "$@" $w_list
    IFS=$w_ifs; set +f
    [ $# -gt "$w_n" ] || die "nothing to build for: $*"
    "$@"
}

# archive NAME DIR [EXTRA_INCLUDE_DIR]: OBJ/NAME.a of every DIR/*.c.
archive() {
    objs=
    for a_src in "$2"/*.c; do
        [ -f "$a_src" ] || continue
        compile "$a_src" "${3:-}"
    done
    [ -n "$objs" ] || die "no C sources in $2"
    a_out=$obj/$1.a
    a_objs=$objs
    if must_make "$a_out" "$a_objs"; then
        rm -f "$a_out.$$"
        with_list "$a_objs" "$AR" rcs "$a_out.$$" || die "$AR failed for $a_out"
        mv -f "$a_out.$$" "$a_out"
        made "$a_out" "$a_objs"
    fi
}

# install_file FROM TO: TO becomes a copy of FROM unless it already is one
# (replaced by rename, never rewritten in place: a VM may have it loaded).
install_file() {
    cmp -s "$1" "$2" 2>/dev/null && return 0
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2.$$" && mv -f "$2.$$" "$2" || { rm -f "$2.$$"; die "cannot write $2"; }
    echo "$prog: $2"
}

# link_nif OUT OBJECT...: a NIF library (the VM gives it the enif_ functions
# when it loads it). link_cat OUT OBJECT...: tracekit-cat, with ei.
# shellcheck disable=SC2086
link_nif() {
    l_out=$1; shift
    $CC -shared $CFLAGS -o "$l_out" "$@" $LDFLAGS -lpthread
}
# shellcheck disable=SC2086
link_cat() {
    l_out=$1; shift
    $CC $CFLAGS -o "$l_out" "$@" -L"$ei_lib" -lei $LDFLAGS -lpthread -lm
}

# nif_room ROOM DEST ARCHIVE... [-I DIR]: DEST/<m>.so for every c_src/ROOM/<m>/
# but common.
nif_room() {
    n_room=$1 n_dest=$2; shift 2
    n_archives=
    n_inc=
    while [ $# -gt 0 ]; do
        case "$1" in
            -I) n_inc=$2; shift 2 ;;
            *) n_archives=$n_archives$obj/$1.a$nl; shift ;;
        esac
    done
    for n_dir in c_src/"$n_room"/*/; do
        n_dir=${n_dir%/}
        n_m=${n_dir##*/}
        [ "$n_m" != common ] && [ -d "$n_dir" ] || continue
        objs=
        for n_src in "$n_dir"/*.c; do
            [ -f "$n_src" ] && compile "$n_src" "$n_inc"
        done
        [ -n "$objs" ] || continue
        n_out=$obj/out/$n_room/$n_m.so
        n_in=$objs$n_archives
        if must_make "$n_out" "$n_in"; then
            mkdir -p "$(dirname "$n_out")"
            echo "$prog: link $n_out"
            with_list "$n_in" link_nif "$n_out.$$" ||
                { rm -f "$n_out.$$"; die "linking $n_out failed"; }
            mv -f "$n_out.$$" "$n_out"
            made "$n_out" "$n_in"
        fi
        install_file "$n_out" "$n_dest/$n_m.so"
    done
}

build_cat() {
    objs=
    for b_src in c_src/cat/*.c; do
        [ -f "$b_src" ] && compile "$b_src"
    done
    b_out=$obj/out/tracekit-cat
    b_in=$objs$obj/libtk.a$nl
    if must_make "$b_out" "$b_in"; then
        mkdir -p "$(dirname "$b_out")"
        echo "$prog: link $b_out"
        with_list "$b_in" link_cat "$b_out.$$" ||
            { rm -f "$b_out.$$"; die "linking $b_out failed"; }
        mv -f "$b_out.$$" "$b_out"
        made "$b_out" "$b_in"
    fi
    install_file "$b_out" "$cat"
}

archive libtk c_src/lib
for t in "$@"; do
    case "$t" in
        nifs)
            archive libtknif c_src/nif/common
            nif_room nif "$priv" libtknif libtk ;;
        cat)
            build_cat ;;
        test-nifs)
            [ -d c_src/test_nif ] || die "test-nifs: no c_src/test_nif (not a development tree)"
            archive libtknif c_src/nif/common
            archive libtkmodel c_src/model
            nif_room test_nif "$obj/test_nif" libtknif libtkmodel libtk -I c_src/model ;;
        bench-nifs)
            [ -d c_src/bench_nif ] || die "bench-nifs: no c_src/bench_nif (not a development tree)"
            archive libtknif c_src/nif/common
            nif_room bench_nif "$obj/bench_nif" libtknif libtk ;;
    esac
done
