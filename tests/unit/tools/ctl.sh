#!/bin/bash
# SPDX-License-Identifier: MIT
# ctl.sh R2CC_CTL FIXTURES STATUS_WRITER [bpf|nobpf]: r2cc-ctl's grammar,
# text and JSON output (JSON checked by jq, Prometheus text by its
# grammar), exit codes, config check against the sysfs fixtures, conn
# show / metrics / stats against a live stand-in process and a stale
# record, and
# the fault injector's arguments (no privilege, nothing attached).
set -u
ctl=$1 fx=$2 writer=$3 bpf=${4:-bpf}
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
t text 3 $mlx && { has "$out" "mlx5_1/1 *state DOWN"; has "$out" "mlx5_3/1 .*netdev ens8f0np0";
	has "$out" "mlx5_0/1 .* lid 16 sm_lid 1$"; ! grep -q "mlx5_3/1 .*lid" "$out" ||
	{ echo "FAIL text: a RoCE rail shows a LID"; fail=1; }; }
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
key=r2cc-unit-job-secret-0123456789abcdef # never printed
printf '%s' "$key" > "$tmp/key" && chmod 600 "$tmp/key"
printf 'log = debug\nrails = mlx5_0,mlx5_1/1\nsecret_file = %s\n' "$tmp/key" > "$tmp/good.conf"
printf 'log = loud\ndetect_ms = 5ms\nsecret_file = %s\n' "$tmp/key" > "$tmp/bad.conf"
cfg="env -u R2CC_CONFIG -u R2CC_SECRET_FILE $ctl config check"
kcfg() { # kcfg SECRET [VAR=VALUE...]: check nokey.conf with R2CC_SECRET_FILE=SECRET
	local f=$1
	shift
	env -u R2CC_CONFIG R2CC_SECRET_FILE="$f" "$@" "$ctl" config check "$tmp/nokey.conf"
}
quiet() { ! cat "$out" "$err" | grep -q "$key" || { echo "FAIL $1: the secret printed"; fail=1; }; }
t cfg-good 0 $cfg "$tmp/good.conf" &&
	{ has "$out" "^log = debug .*# file:1"; has "$out" "^rails = mlx5_0,mlx5_1/1";
	  has "$out" "^# secret: $tmp/key ok (37 bytes, mode 0600)$"; quiet cfg-good; }
t cfg-bad 3 $cfg "$tmp/bad.conf" &&
	{ has "$err" "log"; has "$err" "detect_ms"; has "$err" "2 problems"; }
t cfg-env 0 env R2CC_LOG=info "$ctl" config check "$tmp/good.conf" &&
	has "$out" "^log = info .*# env"
# ... and the job secret it names, by the shim's rules: none, missing,
# group-readable, too short, a symbolic link, a directory (exit 3 each,
# one problem naming the file); from the environment too.
printf 'log = debug\n' > "$tmp/nokey.conf"
t cfg-nokey 3 $cfg "$tmp/nokey.conf" &&
	{ has "$err" "no job secret (R2CC_SECRET_FILE): every connection runs unprotected; make one with r2cc-ctl secret new FILE";
	  has "$err" "1 problem$"; has "$out" "^#secret_file = "; }
t cfg-key-env 0 kcfg "$tmp/key" && has "$out" "^# secret: $tmp/key ok"
keyok() { # keyok NAME PATH SAYS: config check names PATH, says SAYS, exit 3
	t "$1" 3 kcfg "$2" &&
		{ has "$err" "secret file $2: $3"; has "$err" "1 problem$"; quiet "$1";
		  grep -q "# secret:" "$out" && { echo "FAIL $1: said ok"; fail=1; }; }
}
keyok cfg-key-missing "$tmp/nokey" "No such file or directory; must exist"
printf '%s' "$key" > "$tmp/key644" && chmod 644 "$tmp/key644"
keyok cfg-key-0644 "$tmp/key644" "mode 0644 (group or others have access); must be 0600 or stricter"
printf '%s' "$key" > "$tmp/key640" && chmod 640 "$tmp/key640"
keyok cfg-key-0640 "$tmp/key640" "mode 0640"
printf '%031d' 0 > "$tmp/key31" && chmod 600 "$tmp/key31"
keyok cfg-key-short "$tmp/key31" "31 bytes; must hold 32..1024 bytes"
ln -s "$tmp/key" "$tmp/keylink"
keyok cfg-key-link "$tmp/keylink" "a symbolic link; must be the file itself"
keyok cfg-key-dir "$tmp" "not a regular file (a directory)"
t cfg-key-two 3 kcfg "$tmp/key31" R2CC_LOG=loud &&
	has "$err" "2 problems"
# config list: every setting with its default; a bad format is refused.
t cfg-list 0 $ctl config list &&
	{ has "$out" "^R2CC_SECRET_FILE (file: secret_file)$";
	  has "$out" "^R2CC_CONFIG (environment only)$";
	  has "$out" "^    default: 5000; values: a decimal integer 0..3600000$"; }
t cfg-list-names 0 $ctl config list --names &&
	{ [ "$(grep -c '^R2CC_[A-Z_]*$' "$out")" -ge 15 ] || { echo "FAIL cfg-list-names"; cat "$out"; fail=1; }; }
t cfg-list-bad 1 $ctl config list --html && has "$err" "usage: r2cc-ctl config list"
# conn show / metrics: nobody running r2cc, then a live stand-in.
export R2CC_STATUS_DIR=$tmp
t conn-none 4 $ctl -j conn show &&
	{ [ -s "$out" ] && { echo "FAIL conn-none: stdout not empty"; fail=1; }; has "$err" "no process"; }
t metrics-none 4 $ctl metrics
t stats-none 4 $ctl -j stats &&
	{ [ -s "$out" ] && { echo "FAIL stats-none: stdout not empty"; fail=1; }; has "$err" "no process"; }
coproc W { "$writer"; }
wproc=$W_PID # bash unsets W_PID once it has reaped the coprocess
read -r _ wpid <&"${W[0]}"
t conn 0 $ctl -j conn show &&
	jq -e --argjson p "$wpid" 'length == 3 and all(.[]; .pid == $p)
		and .[0].qpn == 257 and .[0].posted == 1000
		and .[1].dev == "we\"ird\\dev" and .[1].polled_err == 2
		and .[1].peer_qpn == 770 and .[0].peer_qpn == 0
		and .[0].on_rail == 0 and .[0].moves == 0
		and .[1].rail == 1 and .[1].on_rail == 0 and .[1].moves == 1
		and (.[0] | has("unprotected") | not)
		and .[2].type == "UD" and .[2].protection == "none"
		and .[2].unprotected == "not_rc"' \
		"$out" > /dev/null || { echo "FAIL conn: $(cat "$out")"; fail=1; }
t conn-pid 0 $ctl conn show pid "$wpid" && has "$out" "qpn 257"
t conn-otherpid 4 $ctl conn show pid 1
t conn-badpid 1 $ctl conn show pid x
# stats: the stand-in's three QPs summed (one ready, one migrated, one
# unprotected: UD).
t stats 0 $ctl -j stats &&
	jq -e --argjson p "$wpid" 'length == 1 and .[0].pid == $p
		and .[0].qps == 3 and .[0].qps_ready == 1
		and .[0].qps_migrated == 1 and .[0].qps_none == 1
		and .[0].protected == 2 and .[0].unprotected_not_rc == 1
		and .[0].unprotected_no_peer == 0
		and .[0].unprotected_pending == 0
		and .[0].qps_binding == 0 and .[0].qps_failed == 0
		and .[0].posted == 1007 and .[0].posted_recv == 11
		and .[0].polled == 72 and .[0].polled_err == 2
		and .[0].bytes_posted == 65536700 and .[0].bytes_polled == 300
		and .[0].failovers == 1 and .[0].replayed_wrs == 5
		and .[0].replayed_bytes == 4096 and .[0].qp_overflow == 0
		and .[0].refused_peer_keys == 2 and .[0].refused_resolves == 1
		and .[0].refused_early_binds == 0 and .[0].refused_ctrl_conns == 0
		and .[0].refused_ctrl_peers == 0
		and .[0].ctrl_frames_out == 2 and .[0].ctrl_messages_out == 700
		and .[0].ctrl_messages_in == 701' \
		"$out" > /dev/null || { echo "FAIL stats: $(cat "$out")"; fail=1; }
t stats-text 0 $ctl stats pid "$wpid" &&
	has "$out" "qps 3 (none 1 binding 0 ready 1 migrated 1 failed 0) protected 2 (unprotected_not_rc 1) overflow 0 refused 3 (peer_keys 2) (resolves 1) posted 1007 recv 11 completions 72 errors 2 bytes 65536700 bytes_recv 300 failovers 1 replayed 5 replayed_bytes 4096 ctrl_frames_out 2 ctrl_messages_out 700 ctrl_bytes_out 22500 ctrl_frames_in 3 ctrl_messages_in 701 ctrl_bytes_in 22600 ctrl_frames_refused 0 ctrl_messages_dropped 0$"
t stats-show 0 $ctl stats show pid "$wpid" && has "$out" "^pid $wpid "
t stats-otherpid 4 $ctl stats pid 1
t stats-badpid 1 $ctl stats pid x && has "$err" "usage: r2cc-ctl stats"
t stats-extra 1 $ctl stats show pid 1 2
t stats-help 0 $ctl stats help && has "$err" "show"
t metrics 0 $ctl metrics
# Prometheus text: comments, or name{labels} value; families grouped.
name='[a-zA-Z_:][a-zA-Z0-9_:]*'
bad=$(grep -vE "^# (HELP|TYPE) $name .+\$|^$name\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\",?)+\\} [0-9]+\$" "$out")
[ -z "$bad" ] || { echo "FAIL metrics grammar: $bad"; fail=1; }
[ "$(grep -v '^#' "$out" | cut -d'{' -f1 | uniq | wc -l)" = \
	"$(grep -c '^# TYPE' "$out")" ] ||
	{ echo "FAIL metrics: families not grouped"; fail=1; }
has "$out" 'r2cc_rail_up{pid="'"$wpid"'",dev="mlx5_1"} 0'
has "$out" 'r2cc_rail_down_events_total{pid="'"$wpid"'",dev="mlx5_1"} 3'
has "$out" 'dev="we\\"ird\\\\dev",qpn="258",status="error"} 2'
has "$out" 'op="write"} 1000'
has "$out" '^r2cc_wr_bytes_posted_total{pid="'"$wpid"'",comm="[^"]*",dev="mlx5_0",qpn="257"} 65536000$'
has "$out" '^r2cc_recv_posted_total{.*qpn="258"} 11$'
has "$out" '^r2cc_refused_total{pid="'"$wpid"'",comm="[^"]*",reason="peer_keys"} 2$'
has "$out" '^r2cc_refused_total{.*reason="early_binds"} 0$'
has "$out" '^r2cc_qps_unprotected{pid="'"$wpid"'",comm="[^"]*",reason="not_rc"} 1$'
has "$out" '^r2cc_qps_unprotected{.*reason="no_peer"} 0$'
has "$out" '^r2cc_ctrl_frames_total{pid="'"$wpid"'",comm="[^"]*",dir="out"} 2$'
has "$out" '^r2cc_ctrl_messages_total{.*dir="in"} 701$'
# events: rail changes, QP failovers and standbys in one list, oldest first.
t events 0 $ctl -j events &&
	jq -e 'length == 5 and all(.[]; .pid > 0 and .comm != null)
		and ([.[].time] == ([.[].time] | sort))
		and .[0].event == "rail" and .[0].rail == 1
		and .[0].dev == "mlx5_1" and .[0].state == "down"
		and .[0].cause == "carrier" and .[1].state == "up"
		and .[1].cause == "port event" and (.[0] | has("qpn") | not)
		and .[2] == (.[2] + {event: "failover", qpn: 258, rail: 1,
			dev: "mlx5_1", to_rail: 0, to_dev: "mlx5_0",
			cause: "cq error", replayed_wrs: 5,
			replayed_bytes: 4096})
		and (.[2] | has("state") | not)
		and .[3].event == "failover_failed" and .[3].qpn == 259
		and .[3].to_dev == "mlx5_1" and .[3].cause == "peer"
		and (.[3] | has("replayed_wrs") | not)
		and .[4] == (.[4] + {event: "standby", qpn: 257, rail: 1,
			to_rail: 0, cause: "carrier"})
		and (.[4] | has("replayed_wrs") | not)' "$out" > /dev/null ||
	{ echo "FAIL events: $(cat "$out")"; fail=1; }
t events-pretty 0 $ctl -j -p events && jq -e 'length == 5' "$out" > /dev/null ||
	{ echo "FAIL events-pretty: $(cat "$out")"; fail=1; }
t events-pid 0 $ctl events pid "$wpid" && {
	has "$out" "rail 1 mlx5_1 down (carrier)$"
	has "$out" " failover qpn 258 rail 1 mlx5_1 -> rail 0 mlx5_0 (cq error) replayed 5 WRs 4096 bytes$"
	has "$out" " failover_failed qpn 259 rail 0 mlx5_0 -> rail 1 mlx5_1 (peer)$"
	has "$out" " standby qpn 257 rail 1 mlx5_1 -> rail 0 mlx5_0 (carrier)$"
	[ "$(grep -c . "$out")" = 5 ] || { echo "FAIL events-pid: not 5 lines"; fail=1; }
}
t events-badpid 1 $ctl events pid x && has "$err" "usage: r2cc-ctl events"
t events-help 0 $ctl events help && has "$err" "failovers"
t events-show 0 $ctl events show
# The stand-in ends: its record goes with it.
exec {W[1]}>&-
wait "$wproc"
t conn-after 4 $ctl conn show
# A record whose process is gone (kill -9: no cleanup) is not shown and
# is removed.
coproc W2 { "$writer"; }
w2proc=$W2_PID
read -r _ w2pid <&"${W2[0]}"
kill -9 "$w2pid"; wait "$w2proc" 2>/dev/null || true
[ -e "$tmp/r2cc.$(id -u).$w2pid" ] || { echo "FAIL: no record left by kill -9"; fail=1; }
t conn-stale 4 $ctl conn show
[ -e "$tmp/r2cc.$(id -u).$w2pid" ] && { echo "FAIL: stale record kept"; fail=1; }

# fault: arguments are checked before anything touches the kernel. The
# mlx fixture's RoCE rail mlx5_3 has netdev ens8f0np0, which no test
# machine has, so a command that parses stops at "No such device" and a
# parser that let a bad value through would be caught by that message.
fd() { t "$1" "$2" env R2CC_SYSFS_ROOT="$fx/sysfs-mlx" "$ctl" fault drop "${@:3}"; }
for v in 101 0 -5 abc 50x nan inf 1e3 '' 0.00001; do
	fd "fault-percent[$v]" 1 mlx5_3 --percent "$v" && has "$err" "bad --percent"
done
for v in 0x1000000 16777216 -1 zz 0x 1.5; do
	fd "fault-qpn[$v]" 1 mlx5_3 --qpn "$v" && has "$err" "bad --qpn"
done
for v in -1 1.5 x; do
	fd "fault-after[$v]" 1 mlx5_3 --after "$v" && has "$err" "bad --after"
done
for v in 0 -3 x 864001; do
	fd "fault-for[$v]" 1 mlx5_3 --for "$v" && has "$err" "bad --for"
done
fd fault-dir 1 mlx5_3 --dir sideways && has "$err" "bad --dir"
fd fault-noval 1 mlx5_3 --percent && has "$err" "needs a value"
fd fault-badopt 1 mlx5_3 --frob && has "$err" "unknown option"
fd fault-norail 1 && has "$err" "usage: r2cc-ctl fault drop RAIL"
# Good values pass the parser: the netdev lookup is what stops them.
fd fault-good 1 mlx5_3 --percent 0.5 --after 200 --qpn 0xffffff --for 1.5 \
	--dir=egress && has "$err" "ens8f0np0: netdev: No such device"
grep -q "bad" "$err" && { echo "FAIL fault-good: $(cat "$err")"; fail=1; }
fd fault-qpn-dec 1 mlx5_3/1 --qpn 16777215 && has "$err" "ens8f0np0: netdev"
# RAIL: unknown, not RoCE (InfiniBand, no netdev), a netdev not in sysfs.
fd fault-unknown 1 mlx5_9 && has "$err" "rail mlx5_9: No such device"
fd fault-ib 1 mlx5_0 && has "$err" "rail mlx5_0: not RoCE (link layer InfiniBand"
has "$err" "ibportstate SWITCH_LID PORT disable"
fd fault-ib-port 1 mlx5_1/1 --percent 5 && has "$err" "not RoCE"
fd fault-nonetdev 1 nosuch0 && has "$err" "rail nosuch0: No such device"
t fault-clear-usage 1 "$ctl" fault clear && has "$err" "usage: r2cc-ctl fault clear RAIL"
t fault-clear-ib 1 env R2CC_SYSFS_ROOT="$fx/sysfs-mlx" "$ctl" fault clear mlx5_0 &&
	has "$err" "not RoCE"
t fault-help 0 "$ctl" fault help && has "$err" "drop"
t fault-drop-help 0 "$ctl" fault drop --help && has "$out" "--percent P"
t fault-unknown-cmd 1 "$ctl" fault frob && has "$err" "unknown word"
if [ "$bpf" = nobpf ]; then
	t fault-nobpf 5 "$ctl" fault show && has "$err" "built without the fault injector"
fi

# secret new: 64 hex characters, mode 0600, never over an existing file
# nor through a symbolic link; two secrets differ.
t secret-new 0 "$ctl" secret new "$tmp/s1" && has "$out" "R2CC_SECRET_FILE"
[ "$(stat -c %a "$tmp/s1")" = 600 ] || { echo "FAIL secret-new: mode $(stat -c %a "$tmp/s1")"; fail=1; }
grep -qxE '[0-9a-f]{64}' "$tmp/s1" && [ "$(stat -c %s "$tmp/s1")" = 64 ] ||
	{ echo "FAIL secret-new: $(head -c 100 "$tmp/s1")"; fail=1; }
cp "$tmp/s1" "$tmp/s1.was"
t secret-exists 1 "$ctl" secret new "$tmp/s1" && has "$err" "not overwritten"
cmp -s "$tmp/s1" "$tmp/s1.was" || { echo "FAIL secret-exists: changed"; fail=1; }
ln -s "$tmp/s3" "$tmp/link"
t secret-symlink 1 "$ctl" secret new "$tmp/link"
[ ! -e "$tmp/s3" ] || { echo "FAIL secret-symlink: followed"; fail=1; }
t secret-new2 0 "$ctl" secret new "$tmp/s2"
cmp -s "$tmp/s1" "$tmp/s2" && { echo "FAIL secret-new2: the same secret twice"; fail=1; }
t secret-usage 1 "$ctl" secret new && has "$err" "usage: r2cc-ctl secret new FILE"
t secret-nodir 1 "$ctl" secret new "$tmp/no/such/dir" && has "$err" "No such file"
echo "ctl: $n cases"
exit $fail
