#!/bin/bash
# SPDX-License-Identifier: MIT
# ctl.sh R2CC_CTL FIXTURES: r2cc-ctl's grammar, text and JSON output (JSON
# checked by jq), exit codes, and config check, against the sysfs fixtures.
set -u
ctl=$1 fx=$2
fail=0 n=0
t() { # t NAME WANT_RC CMD...: run CMD, expect exit WANT_RC
	local name=$1 want=$2 rc
	shift 2
	n=$((n + 1))
	"$@" > "$out" 2> "$err"
	rc=$?
	[ $rc -eq "$want" ] || { echo "FAIL $name: exit $rc, want $want"; cat "$err"; fail=1; return 1; }
}
has() { grep -q -- "$2" "$1" || { echo "FAIL: $1 lacks \`$2'"; cat "$1"; fail=1; }; }
out=$(mktemp) err=$(mktemp) tmp=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$tmp"' EXIT
mlx="env R2CC_SYSFS_ROOT=$fx/sysfs-mlx $ctl"
rxe="env R2CC_SYSFS_ROOT=$fx/sysfs-rxe $ctl"

# No RDMA devices: said plainly, exit 2, nothing on stdout.
t nodev 2 env R2CC_SYSFS_ROOT="$tmp" "$ctl" -j rail show &&
	{ [ -s "$out" ] && { echo "FAIL nodev: stdout not empty"; fail=1; }; has "$err" "no RDMA devices"; }
# Text, default command; a DOWN rail makes exit 3.
t text 3 $mlx && { has "$out" "mlx5_1/1 *state DOWN"; has "$out" "mlx5_3/1 .*netdev ens8f0np0"; }
[ "$(grep -c . "$out")" = 4 ] || { echo "FAIL text: not 4 rails"; fail=1; }
# JSON parses, and carries the fields.
t json 0 $rxe -j rail show &&
	jq -e 'length == 2 and .[0].rail == "rxe0/1" and .[0].state == "ACTIVE"
		and .[0].pci == null and .[1].netdev == "eth1"
		and .[0].rate_mbps == 2500' "$out" > /dev/null ||
	{ echo "FAIL json: $(cat "$out")"; fail=1; }
t pretty 0 $mlx -j -p rail show mlx5_3/1 &&
	jq -e 'length == 1 and .[0].numa_node == 1' "$out" > /dev/null ||
	{ echo "FAIL pretty"; fail=1; }
# Prefixes: unique ones work, unknown words fail with usage.
t prefix 0 $mlx ra sh mlx5_0
t unknown-dev 1 $mlx rail show mlx5_9 && has "$err" "No such device"
t unknown-cmd 1 $mlx rail frobnicate && has "$err" "unknown word"
t unknown-obj 1 $mlx frob && has "$err" "unknown word"
t bad-opt 1 $ctl -x && has "$err" "unknown option"
t help 0 $ctl help && has "$out" "OBJECT"
t rail-help 0 $ctl rail help
t version 0 $ctl -V && has "$out" "r2cc-ctl "
# config check: a good file, a bad file (exit 3, the key named).
printf 'log = debug\nrails = mlx5_0,mlx5_1/1\n' > "$tmp/good.conf"
printf 'log = loud\ndetect_ms = 5ms\n' > "$tmp/bad.conf"
t cfg-good 0 env -u R2CC_CONFIG "$ctl" config check "$tmp/good.conf" &&
	{ has "$out" "^log = debug .*# file:1"; has "$out" "^rails = mlx5_0,mlx5_1/1"; }
t cfg-bad 3 env -u R2CC_CONFIG "$ctl" config check "$tmp/bad.conf" &&
	{ has "$err" "log"; has "$err" "detect_ms"; has "$err" "2 problems"; }
t cfg-env 0 env R2CC_LOG=info "$ctl" config check "$tmp/good.conf" &&
	has "$out" "^log = info .*# env"
echo "ctl: $n cases"
exit $fail
