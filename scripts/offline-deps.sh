#!/bin/bash
# Building adapt-sim on a machine without network access (a GPU server, say),
# from Debian packages fetched on a machine that has the Debian 12 archive.
#
#   scripts/offline-deps.sh download DIR [--with-data]
#       On a Debian 12 machine with the build dependencies installed
#       (scripts/setup-deps.sh): saves into DIR, as .deb files, every package
#       that holds a header, pkg-config file or shared library the build links
#       against, following pkg-config's Requires and the libraries' own
#       dependencies; plus pkg-config itself and, with --with-data, the
#       Fashion-MNIST dataset package (then data.dir =
#       PREFIX/usr/share/datasets/fashion-mnist). The C compiler, make, libc, libstdc++
#       and libgomp are not included: the offline machine must have them.
#   scripts/offline-deps.sh unpack DIR PREFIX
#       On the offline machine: unpacks every DIR/*.deb into PREFIX (dpkg -x,
#       nothing is installed system-wide) and points the pkg-config files at
#       PREFIX.
#   scripts/offline-deps.sh list [--with-data]
#       Prints the names of the packages download would fetch, one per line.
#   scripts/offline-deps.sh relocate PREFIX
#       Points the pkg-config files and absolute symbolic links of files
#       unpacked into PREFIX at PREFIX (unpack does this itself).
#   scripts/offline-deps.sh env PREFIX
#       Prints the shell assignments (PATH, PKG_CONFIG_PATH, CPPFLAGS, LDFLAGS,
#       LD_LIBRARY_PATH) that build against PREFIX; use: eval "$(... env PREFIX)".
#   scripts/offline-deps.sh build PREFIX SRCDIR [CONFIGURE-ARGS...]
#       Configures and builds SRCDIR (a release tarball's tree, or a checkout
#       with ./configure already generated) against PREFIX.
#
# The .deb folder is not part of the project (it is tens of megabytes): make it
# anew where you need it. doc/install.md, "Building on a machine without network".
set -euo pipefail

die() { echo "offline-deps: $*" >&2; exit 1; }

# pkg-config modules configure.ac checks for
MODULES="gsl openblas check inih jansson zlib libarchive cairo cairo-png cairo-svg cairo-pdf"
# provided by the offline machine's own toolchain: never packed
EXCLUDE_RE='^(libc6|libc6-dev|libc-dev-bin|linux-libc-dev|libgcc-s1|libstdc\+\+6|libgomp1|libcrypt1|libcrypt-dev|gcc-.*-base)$'

# owners FILE...: the package owning each file's target, else the file (a link); /lib and /usr/lib
# are one folder under merged /usr), one per line, from one pass over dpkg's file lists
owners() {
    local f c
    local -a cands=()
    for f in "$@"; do
        for c in "$(readlink -f "$f")" "$f"; do
            cands+=("$c")
            case $c in /usr/lib/*) cands+=("${c#/usr}") ;; /lib/*) cands+=("/usr$c") ;; esac
        done
    done
    local -A owner=()
    local line path pkg
    while IFS= read -r line; do
        pkg=${line%%.list:*}; pkg=${pkg##*/}; pkg=${pkg%%:*}
        path=${line#*.list:}
        [ -n "${owner[$path]:-}" ] || owner[$path]=$pkg
    done < <(printf '%s\n' "${cands[@]}" | sort -u |
             grep -H -F -x -f - /var/lib/dpkg/info/*.list 2>/dev/null)
    for f in "$@"; do
        pkg=""
        c=$(readlink -f "$f")
        for path in "$c" "$f" "${f#/usr}" "/usr$f" "${c#/usr}" "/usr$c"; do
            [ -n "${owner[$path]:-}" ] && { pkg=${owner[$path]}; break; }
        done
        echo "$pkg"
    done
}

# select_packages [--with-data]: sets the array LIST to the packages the build needs (sorted)
select_packages() {
    local with_data=${1:-}
    command -v pkg-config > /dev/null || die "pkg-config is not installed (run scripts/setup-deps.sh)"
    local -A mods=() pkgs=() seen_lib=()
    local queue=($MODULES) m r
    local -a files=()
    add() { files+=("$1"); }
    # 1. pkg-config modules, with everything they require (private too: --cflags walks those)
    while [ ${#queue[@]} -gt 0 ]; do
        m=${queue[0]}; queue=("${queue[@]:1}")
        [ -n "${mods[$m]:-}" ] && continue
        pkg-config --exists "$m" || die "pkg-config module '$m' not found (run scripts/setup-deps.sh)"
        mods[$m]=1
        for r in $(pkg-config --print-requires --print-requires-private "$m" |
                   awk '{print $1}'); do
            queue+=("$r")
        done
    done
    # 2. the package of each module's .pc file, and of each library it links with
    local pc libdir libs lib so
    for m in "${!mods[@]}"; do
        pc=$(pkg-config --variable=pcfiledir "$m")/$m.pc
        [ -f "$pc" ] || pc=$(find /usr/lib /usr/share -name "$m.pc" 2>/dev/null | head -n 1)
        add "$pc"
        libdir=$(pkg-config --variable=libdir "$m")
        for lib in $(pkg-config --libs-only-l --static "$m" | tr ' ' '\n' | sed -n 's/^-l//p'); do
            for so in "$libdir/lib$lib.so" /usr/lib/x86_64-linux-gnu/lib"$lib".so \
                      /lib/x86_64-linux-gnu/lib"$lib".so; do
                [ -e "$so" ] || continue
                add "$so"                       # the -dev package's symlink
                seen_lib[$(readlink -f "$so")]=1   # the runtime library
                break
            done
        done
    done
    # 3. the runtime libraries those libraries load, transitively (ldd resolves the closure)
    local f dep
    for f in "${!seen_lib[@]}"; do
        add "$f"
        for dep in $(ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'); do
            add "$dep"
        done
    done
    local o
    while IFS= read -r o; do [ -n "$o" ] && pkgs[$o]=1; done < <(owners "${files[@]}")
    # 4. tools
    for p in pkg-config pkgconf pkgconf-bin libpkgconf3; do
        dpkg-query -W "$p" > /dev/null 2>&1 && pkgs[$p]=1
    done
    [ "$with_data" = --with-data ] && pkgs[dataset-fashion-mnist]=1
    local list=() p
    for p in "${!pkgs[@]}"; do
        [ -n "$p" ] || continue
        [[ $p =~ $EXCLUDE_RE ]] && continue
        list+=("$p")
    done
    IFS=$'\n' LIST=($(sort <<< "${list[*]}")); unset IFS
}

download() {
    local dir=$1 with_data=${2:-} list p
    select_packages "$with_data"
    list=("${LIST[@]}")
    mkdir -p "$dir"
    echo "offline-deps: ${#list[@]} packages: ${list[*]}"
    # the installed version of each, so the headers match the libraries this machine built with
    local spec=()
    for p in "${list[@]}"; do
        spec+=("$p=$(dpkg-query -W -f='${Version}' "$p")")
    done
    if ! (cd "$dir" && apt-get download -q "${spec[@]}"); then
        # a version the archive no longer serves: take its current one (the build checks
        # versions through pkg-config, so headers and libraries still come as one)
        echo "offline-deps: retrying one by one" >&2
        for p in "${list[@]}"; do
            (cd "$dir" && { apt-get download -q "$p=$(dpkg-query -W -f='${Version}' "$p")" ||
                            apt-get download -q "$p"; }) ||
                die "apt-get download $p failed (run apt-get update?)"
        done
    fi
    du -sh "$dir"
}

unpack() {
    local dir=$1 prefix=$2 deb n=0
    ls "$dir"/*.deb > /dev/null 2>&1 || die "no .deb files in $dir"
    mkdir -p "$prefix"
    prefix=$(cd "$prefix" && pwd)
    for deb in "$dir"/*.deb; do
        dpkg-deb -x "$deb" "$prefix" || die "cannot unpack $deb"
        n=$((n + 1))
    done
    relocate "$prefix"
    echo "offline-deps: unpacked $n packages into $prefix"
}

# relocate PREFIX: points the pkg-config files and absolute symbolic links of files unpacked
# from packages into PREFIX at PREFIX
relocate() {
    local prefix
    prefix=$(cd "$1" && pwd) || die "no such prefix: $1"
    # pkg-config files: /usr -> PREFIX/usr
    local pc
    while IFS= read -r -d '' pc; do
        sed -i -e "s|^prefix=/usr|prefix=$prefix/usr|" \
               -e "s|=/usr/|=$prefix/usr/|" \
               -e "s|-I/usr/|-I$prefix/usr/|g" -e "s|-L/usr/|-L$prefix/usr/|g" "$pc"
    done < <(find "$prefix" -name '*.pc' -print0)
    # absolute symbolic links (rare in -dev packages) -> into PREFIX
    local l t
    while IFS= read -r -d '' l; do
        t=$(readlink "$l")
        case $t in /*) ln -sfn "$prefix$t" "$l" ;; esac
    done < <(find "$prefix" -type l -print0)
}

print_env() {
    local prefix
    prefix=$(cd "$1" && pwd) || die "no such prefix: $1"
    local lib=$prefix/usr/lib/x86_64-linux-gnu
    # every pkgconfig folder and every folder of shared libraries the packages brought
    # (BLAS variants keep theirs in a subfolder: openblas-openmp/)
    local pcpath libpath
    pcpath=$(find "$prefix" -type d -name pkgconfig | sort | paste -sd:)
    libpath=$(find "$prefix" \( -name 'lib*.so' -o -name 'lib*.so.*' \) -printf '%h\n' |
              grep -v '/share/' | sort -u | paste -sd:)
    echo "export PATH=\"$prefix/usr/bin:\$PATH\""
    echo "export PKG_CONFIG_PATH=\"$pcpath\""
    # pkg-config from the prefix searches its own default path last; make it use ours alone
    echo "export PKG_CONFIG_LIBDIR=\"$pcpath\""
    echo "export CPPFLAGS=\"-I$prefix/usr/include -I$prefix/usr/include/x86_64-linux-gnu\""
    local rl="" d
    for d in ${libpath//:/ }; do rl="$rl -L$d -Wl,-rpath,$d -Wl,-rpath-link,$d"; done
    echo "export LDFLAGS=\"${rl# }\""
    echo "export LD_LIBRARY_PATH=\"$libpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
    return 0
}

build() {
    local prefix=$1 src=$2; shift 2
    [ -x "$src/configure" ] || die "$src/configure missing: unpack a release tarball (make dist) or run ./autogen.sh on a machine with autotools"
    eval "$(print_env "$prefix")"
    cd "$src"
    ./configure "$@" || die "configure failed in $src (see $src/config.log)"
    make -j"$(nproc 2>/dev/null || echo 2)"
}

case ${1:-} in
    list) select_packages "${2:-}"; printf '%s\n' "${LIST[@]}" ;;
    relocate) [ $# -eq 2 ] || die "usage: $0 relocate PREFIX"; relocate "$2" ;;
    download) [ $# -ge 2 ] || die "usage: $0 download DIR [--with-data]"; download "$2" "${3:-}" ;;
    unpack) [ $# -eq 3 ] || die "usage: $0 unpack DIR PREFIX"; unpack "$2" "$3" ;;
    env) [ $# -eq 2 ] || die "usage: $0 env PREFIX"; print_env "$2" ;;
    build) [ $# -ge 3 ] || die "usage: $0 build PREFIX SRCDIR [CONFIGURE-ARGS...]"; build "${@:2}" ;;
    *) die "usage: $0 download DIR [--with-data] | list [--with-data] | relocate PREFIX | unpack DIR PREFIX | env PREFIX | build PREFIX SRCDIR [ARGS...]" ;;
esac
