#!/bin/sh
# abi_private_load.sh CC LIBDIR NODES [sanitized]
#
# For each private node of NODES (tests/abi_private_nodes.txt), builds a
# small program that references every name of that node at that version
# (NAME@IBVERBS_PRIVATE_N, as a binary built against that rdma-core
# release does), links it against LIBDIR's libibverbs.so.1 with immediate
# binding, checks that the program records the node as needed, and runs
# it: the loader must find every name, the registration entry point must
# return, execute_ioctl must fail with EOPNOTSUPP and ibv_wr_opcode_str
# (nodes 57 on) must name IBV_WR_SEND. Sanitized libraries are skipped
# (a plain program cannot load them).
set -eu

if [ $# -lt 3 ]; then
	echo "usage: abi_private_load.sh CC LIBDIR NODES [sanitized]" >&2
	exit 2
fi
cc=$1 libdir=$2 nodes=$3 mode=${4:-}
if [ "$mode" = sanitized ]; then
	echo "1..0 # SKIP sanitized build: a plain program cannot load the library"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One C file per node: declarations, .symver bindings, a table of addresses.
gen() {
	node=$1
	grep -v '^#' "$nodes" | awk -v node="$node" '$1 == node { print $2 }' >"$tmp/names"
	{
		echo '#include <errno.h>'
		echo '#include <stdio.h>'
		echo '#include <string.h>'
		while read -r n; do
			case $n in
			verbs_allow_disassociate_destroy) echo "extern _Bool $n;" ;;
			execute_ioctl) echo "int $n(void *, void *);" ;;
			ibv_wr_opcode_str) echo "const char *$n(int);" ;;
			verbs_register_driver_*) echo "void $n(const void *);" ;;
			*) echo "void $n(void);" ;;
			esac
			echo "__asm__(\".symver $n, $n@$node\");"
		done <"$tmp/names"
		echo 'static const void *const names[] = {'
		sed 's/.*/\t(const void *)\&&,/' "$tmp/names"
		echo '};'
		echo 'int main(void)'
		echo '{'
		echo '	size_t i;'
		echo '	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)'
		echo '		if (!names[i])'
		echo '			return 10;'
		echo "	verbs_register_driver_${node#IBVERBS_PRIVATE_}((const void *)1);"
		echo '	if (execute_ioctl(NULL, NULL) != EOPNOTSUPP || errno != EOPNOTSUPP)'
		echo '		return 11;'
		if grep -qx ibv_wr_opcode_str "$tmp/names"; then
			echo '	if (strcmp(ibv_wr_opcode_str(2), "SEND"))'
			echo '		return 12;'
		fi
		printf '\tprintf("%%zu names\\n", i);\n\treturn 0;\n}\n'
	} >"$tmp/$node.c"
}

fail=0 count=0
for node in $(grep -v '^#' "$nodes" | awk 'NF == 2 { print $1 }' | sort -u); do
	count=$((count + 1))
	gen "$node"
	want=$(wc -l <"$tmp/names")
	if ! "$cc" -o "$tmp/$node" "$tmp/$node.c" -L"$libdir" -libverbs -Wl,-z,now \
		-Wl,-rpath,"$libdir" 2>"$tmp/err"; then
		echo "not ok - $node: the program does not link"
		head -n 5 "$tmp/err" | sed "s/^/#   /"
		fail=1
		continue
	fi
	if ! readelf -W -V "$tmp/$node" | grep -q "Name: $node "; then
		echo "not ok - $node: the program does not need the node"
		fail=1
		continue
	fi
	if out=$(LD_BIND_NOW=1 LD_LIBRARY_PATH="$libdir" "$tmp/$node" 2>&1) &&
		[ "$out" = "$want names" ]; then
		echo "ok - $node: $want names resolved and called"
	else
		echo "not ok - $node: exit $?, output: $out"
		fail=1
	fi
done
[ "$count" -eq 5 ] || { echo "not ok - $count private nodes in $nodes, want 5"; fail=1; }
exit "$fail"
