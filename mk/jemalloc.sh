#!/bin/sh
# Make libsalus's private jemalloc: Debian's static PIC archive with its
# public names (malloc, free, mallocx, mallctl, ...) renamed salus_je_*, and
# without its C++ operators.  Linked into libsalus.so with its symbols kept
# out of the export table (--exclude-libs), it is an allocator of libsalus's
# own: the program's malloc stays glibc's (or whatever it preloads), and
# libsalus's own calls to malloc and free still reach that one.
#
#   mk/jemalloc.sh <libjemalloc_pic.a> <output.a>
set -eu
src=$1
out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && ar x "$src")
rm -f "$tmp"/jemalloc_cpp*.o
# Every public name: the defined globals outside jemalloc's own je_ prefix.
nm -g --defined-only "$tmp"/*.o | awk 'NF == 3 && $3 !~ /^(je_|_rjem)/ { print $3, "salus_je_" $3 }' |
    sort -u > "$tmp/rename"
grep -q '^mallocx ' "$tmp/rename" || { echo "jemalloc.sh: no mallocx in $src" >&2; exit 1; }
rm -f "$out.tmp"
ar rcs "$out.tmp" "$tmp"/*.o
objcopy --redefine-syms="$tmp/rename" "$out.tmp"
mv "$out.tmp" "$out"
