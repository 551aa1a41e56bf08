#!/bin/sh
# install_pkgconfig.sh CMAKE BUILD_DIR SOURCE_DIR CC [EXTRA_CFLAGS ...]
#
# Installs the build into a fresh prefix (what `make install PREFIX=...`
# does: cmake --install BUILD_DIR --prefix PREFIX) and checks the tree:
#  - libibverbs.so.1.* with SONAME libibverbs.so.1, the libibverbs.so.1
#    and libibverbs.so namelinks;
#  - every header of include/, every man page of man/, every tool of tools/;
#  - libibverbs.pc, found through PKG_CONFIG_LIBDIR alone (so never the
#    system's), points into the prefix;
#  - a small program built only from `pkg-config --cflags --libs libibverbs`
#    plus -Wl,-rpath compiles warning-free, loads the installed library
#    without LD_LIBRARY_PATH, and lists, opens and queries the device and
#    registers memory; the installed sv_devinfo (RPATH $ORIGIN/../lib) runs;
#  - the installed softverbs-run runs on the installed library whatever
#    LD_LIBRARY_PATH says (DT_RPATH) and writes its tree (--tree).
# EXTRA_CFLAGS are the build's sanitizer flags, if any. Exit 77 (skipped)
# without pkg-config.
set -u
. "$(dirname "$0")/tap.sh"

if [ $# -lt 4 ]; then
	echo "usage: install_pkgconfig.sh CMAKE BUILD_DIR SOURCE_DIR CC [EXTRA_CFLAGS ...]" >&2
	exit 2
fi
cmake=$1 build=$2 src=$3 cc=$4
shift 4

if ! command -v pkg-config >/dev/null; then
	echo "1..0 # SKIP pkg-config is not installed (apt-get install pkg-config)"
	exit 77
fi
. "$(dirname "$0")/clean_env.sh" # no inherited SOFTVERBS_* but SV_TEST_SHM
unset LD_LIBRARY_PATH PKG_CONFIG_PATH

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/inst

check() { # check DESCRIPTION COMMAND...
	d=$1
	shift
	if "$@"; then ok "$d"; else not_ok "$d"; fi
}

finish() {
	echo "1..$n"
	[ "$failed" -eq 0 ]
	exit
}

if ! "$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
	not_ok "cmake --install $build --prefix $prefix"
	sed 's/^/#   /' "$tmp/install.log"
	finish
fi
ok "cmake --install into a fresh prefix"

pc=$(find "$prefix" -name libibverbs.pc -path '*/pkgconfig/*' | head -n 1)
if [ -z "$pc" ]; then
	not_ok "libibverbs.pc installed"
	finish
fi
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
ok "libibverbs.pc installed (${pc#"$prefix"/})"

# the library and its links
real=$(ls "$libdir"/libibverbs.so.1.* 2>/dev/null | head -n 1)
check "libibverbs.so.1.* is a regular file" test -f "$real" -a ! -L "$real"
check "libibverbs.so.1 -> $(basename "$real")" \
	test "$(readlink "$libdir/libibverbs.so.1")" = "$(basename "$real")"
check "libibverbs.so -> libibverbs.so.1 (namelink)" \
	test "$(readlink "$libdir/libibverbs.so")" = libibverbs.so.1
check "SONAME is libibverbs.so.1" \
	sh -c "readelf -d '$real' | grep -q 'Library soname: \[libibverbs.so.1\]'"

# headers, man pages, tools
missing=
for h in "$src"/include/*/*.h; do
	rel=${h#"$src"/include/}
	[ -f "$prefix/include/$rel" ] || missing="$missing $rel"
done
for m in "$src"/man/*.[0-9]; do
	sec=${m##*.}
	[ -f "$prefix/share/man/man$sec/$(basename "$m")" ] || missing="$missing $(basename "$m")"
done
for t in "$src"/tools/*.c; do
	[ -x "$prefix/bin/$(basename "$t" .c)" ] || missing="$missing bin/$(basename "$t" .c)"
done
[ -x "$prefix/bin/softverbs-run" ] || missing="$missing bin/softverbs-run"
check "every header, man page and tool installed${missing:+ (missing:$missing)}" test -z "$missing"

# pkg-config, with only our .pc in its search path
export PKG_CONFIG_LIBDIR="$pcdir"
cflags=$(pkg-config --cflags libibverbs) && libs=$(pkg-config --libs libibverbs)
if [ $? -ne 0 ]; then
	not_ok "pkg-config --cflags --libs libibverbs"
	finish
fi
echo "# pkg-config: version $(pkg-config --modversion libibverbs), cflags '$cflags', libs '$libs'"
check "cflags name the installed include dir" \
	sh -c "echo '$cflags' | grep -q -- '-I$prefix/include'"
check "libs name the installed lib dir and -libverbs" \
	sh -c "echo '$libs' | grep -q -- '-L$libdir' && echo '$libs' | grep -q -- '-libverbs'"

cat >"$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **list;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	void *buf;
	int n = 0, ret = 1;

	list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return 1;
	ctx = ibv_open_device(list[0]);
	if (ctx && !ibv_query_device(ctx, &attr) && !ibv_query_port(ctx, 1, &port)) {
		pd = ibv_alloc_pd(ctx);
		buf = malloc(4096);
		mr = pd && buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (mr) {
			printf("device %s: %d port(s), port 1 %s, mr lkey %#x\n",
			       ibv_get_device_name(list[0]), attr.phys_port_cnt,
			       ibv_port_state_str(port.state), mr->lkey);
			ret = ibv_dereg_mr(mr);
		}
		if (pd)
			ibv_dealloc_pd(pd);
		free(buf);
	}
	if (ctx)
		ibv_close_device(ctx);
	ibv_free_device_list(list);
	return ret;
}
EOF
# shellcheck disable=SC2086 # word splitting of pkg-config output is intended
if "$cc" -std=gnu11 -Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes -Werror $cflags \
	"$@" -o "$tmp/prog" "$tmp/prog.c" $libs -Wl,-rpath,"$libdir" >"$tmp/cc.log" 2>&1; then
	ok "a program builds with pkg-config's flags and -Wl,-rpath"
else
	not_ok "a program builds with pkg-config's flags and -Wl,-rpath"
	sed 's/^/#   /' "$tmp/cc.log"
	finish
fi

# resolves_to_installed NAME BIN
resolves_to_installed() {
	got=$(LD_TRACE_LOADED_OBJECTS=1 "$2" 2>&1 |
		sed -n 's/^[[:space:]]*libibverbs\.so\.1 => \([^ ]*\) .*/\1/p')
	check "$1 loads $libdir/libibverbs.so.1 (got ${got:-nothing})" \
		test -n "$got" -a "$(readlink -f "$got")" = "$(readlink -f "$libdir/libibverbs.so.1")"
}
resolves_to_installed "the program" "$tmp/prog"
if "$tmp/prog" >"$tmp/out" 2>&1 && grep -q "port 1 PORT_ACTIVE" "$tmp/out"; then
	ok "the program runs: $(cat "$tmp/out")"
else
	not_ok "the program runs"
	sed 's/^/#   /' "$tmp/out"
fi

for t in "$src"/tools/*.c; do
	b=$prefix/bin/$(basename "$t" .c)
	[ -x "$b" ] || continue
	resolves_to_installed "installed $(basename "$b")" "$b"
	check "installed $(basename "$b") runs" sh -c "'$b' >/dev/null 2>&1"
done
# softverbs-run runs on the installed library (its RPATH), whatever
# LD_LIBRARY_PATH says, and writes its tree from it (--tree: no namespace)
b=$prefix/bin/softverbs-run
if [ -x "$b" ]; then
	resolves_to_installed "installed softverbs-run" "$b"
	mkdir "$tmp/tree"
	check "installed softverbs-run --tree writes the device's files" sh -c \
		"LD_LIBRARY_PATH=/nonexistent '$b' --tree '$tmp/tree' && test -s '$tmp/tree/class/infiniband/softverbs0/node_guid'"
fi
finish
