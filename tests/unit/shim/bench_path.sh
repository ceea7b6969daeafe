#!/bin/bash
# SPDX-License-Identifier: MIT
# bench_path.sh BENCH [SANITIZE]: the instructions the protected data path
# adds per WR (shim/datapath.c and migrate/, over bench_path.c's provider
# that costs next to nothing), counted by callgrind, each case beside the
# same loop on the provider alone and (but after a move) through the shim
# with the QP unprotected; and what an empty poll of a CQ with 64 more
# protected QPs on it adds, before and after they moved. Per WR: (I(2N) - I(N)) / N of the
# loops bench_large and bench_small, so set-up cancels out. Without
# valgrind, or in a sanitizer build (SANITIZE not "none"), each case runs
# once natively: every completion checked, nothing counted.
set -u
bench=$1 san=${2:-none}
N=2000 # bench_path.c's N
cases=(write sigall send moved poll pollmoved)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

if [ "$san" != none ] || ! command -v valgrind > /dev/null ||
	! command -v callgrind_annotate > /dev/null; then
	for c in "${cases[@]}"; do
		"$bench" "$c" || exit 1
		[ "$c" = moved ] || [ "$c" = pollmoved ] && continue
		"$bench" "$c" native && "$bench" "$c" shim || exit 1
	done
	echo "bench_path: completions checked; not counted (no valgrind, or sanitizer $san)"
	exit 0
fi

# per_wr CASE [native]: instructions per WR of the measured loop
per_wr() {
	local f=$tmp/cg.$1${2:+.$2} s l
	valgrind --tool=callgrind --separate-threads=yes \
		--callgrind-out-file="$f" "$bench" "$@" > "$f.log" 2>&1 ||
		{ cat "$f.log" >&2; echo "bench_path: $* failed" >&2; return 1; }
	read -r s l < <(callgrind_annotate --inclusive=yes --threshold=100 \
		"$f-01" 2>/dev/null | awk '
		function n(x) { gsub(",", "", x); return x }
		/:bench_small / { s = n($1) } /:bench_large / { l = n($1) }
		END { print s + 0, l + 0 }')
	[ "$s" -gt 0 ] && [ "$l" -gt "$s" ] ||
		{ echo "bench_path: $*: no count of bench_small/large" >&2; return 1; }
	echo $(( (l - s) / N ))
}

declare -A native shim prot
for c in write sigall send poll; do
	native[$c]=$(per_wr "$c" native) && shim[$c]=$(per_wr "$c" shim) ||
		exit 1
	echo "metric bench_path.$c.native_per_wr ${native[$c]}"
	echo "metric bench_path.$c.shim_added_per_wr $(( shim[$c] - native[$c] ))"
done
native[moved]=${native[write]}
native[pollmoved]=${native[poll]}
for c in "${cases[@]}"; do
	prot[$c]=$(per_wr "$c") || exit 1
	echo "metric bench_path.$c.protected_added_per_wr $(( prot[$c] - native[$c] ))"
done
echo "protected_added_instructions_per_wr=$(( prot[write] - native[write] ))" \
	"sigall=$(( prot[sigall] - native[sigall] ))" \
	"send=$(( prot[send] - native[send] ))" \
	"moved=$(( prot[moved] - native[moved] ))" \
	"empty_poll_64qps=$(( prot[poll] - native[poll] ))" \
	"empty_poll_64qps_moved=$(( prot[pollmoved] - native[pollmoved] ))" \
	"shim_added_instructions_per_wr=$(( shim[write] - native[write] ))" \
	"(shim and migrate/ only; provider excluded)"
