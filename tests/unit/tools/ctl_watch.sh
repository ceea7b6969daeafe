#!/bin/bash
# SPDX-License-Identifier: MIT
# ctl_watch.sh R2CC_CTL FIXTURES STATUS_WRITER: r2cc-ctl watch against a
# copy of the rxe sysfs fixture whose counters the test rewrites between
# two samples: the rates (JSON Lines checked by jq, the text timeline by
# its grammar), QPs per rail from a stand-in process, SIGINT, arguments.
set -u
ctl=$1 fx=$2 writer=$3
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
sys=$tmp/sys
cp -a "$fx/sysfs-rxe" "$sys"
mkdir "$tmp/status"
export R2CC_SYSFS_ROOT=$sys R2CC_STATUS_DIR=$tmp/status
st=$sys/devices/virtual/net/eth0/statistics
hw=$sys/devices/virtual/infiniband/rxe0/ports/1/hw_counters

# bump: after watch's first interval, add to rxe0's counters: 1 MB
# sent, 800 packets (200 of them RoCE, rxe's hw_counters), 50 received.
bump() {
	echo $(($(cat "$st/tx_bytes") + 1000000)) > "$st/tx_bytes"
	echo $(($(cat "$st/tx_packets") + 800)) > "$st/tx_packets"
	echo $(($(cat "$st/rx_packets") + 50)) > "$st/rx_packets"
	echo $(($(cat "$hw/sent_pkts") + 200)) > "$hw/sent_pkts"
}
# sampled FILE ARGS...: run watch ARGS into FILE, bump after its first
# line (JSON) or its first two (text, one per rail); returns watch's exit.
sampled() {
	local file=$1 lines=1 l
	shift
	[ "$1" = -j ] || lines=2
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	"$ctl" "$@" > "$tmp/fifo" 2> "$err" &
	exec {rd}< "$tmp/fifo"
	: > "$file"
	for ((l = 0; l < lines; l++)); do
		IFS= read -r -u "$rd" line && printf '%s\n' "$line" >> "$file"
	done
	bump
	cat <&"$rd" >> "$file"
	exec {rd}<&-
	n=$((n + 1))
	wait $!
}

# JSON Lines: one object per interval, two rails each. The counter
# change shows up once, whole, and every rate is that change over dt
# (dt as measured: a late sample on a loaded machine makes the next
# interval shorter, the schedule holds).
sampled "$tmp/j" -j watch -i 0.5 -n 3 || { echo "FAIL json: exit $?"; cat "$err"; fail=1; }
jq -e -s 'length == 3 and all(.[]; (.rails | length) == 2 and .dt > 0
	and .rails[0].rail == "rxe0" and .rails[0].state == "up"
	and .rails[0].netdev == "eth0" and .rails[0].source == "netdev"
	and .rails[1].rail == "rxe1" and .rails[1].roce_tx_pkts == null
	and .rails[1].roce_tx_pkts_per_s == null and .rails[1].tx_bytes == 0
	and .rails[1].tx_MB_per_s == 0 and .rails[1].rx_MB_per_s == 0)
	and ([.[].t] | . == sort) and .[0].rails[0].tx_bytes == 0
	and ([.[].rails[0].tx_bytes] | add) == 1000000
	and ([.[].rails[0].tx_pkts] | add) == 800
	and ([.[].rails[0].rx_pkts] | add) == 50
	and ([.[].rails[0].roce_tx_pkts] | add) == 200
	and ([.[].rails[0].rx_bytes] | add) == 0
	and all(.[].rails[0]; .qps == 0 and .qps_backup == 0)
	and all(.[]; .rails[0] as $r | .dt as $dt
		| ($r.tx_MB_per_s - $r.tx_bytes / $dt / 1e6 | fabs) < 0.02 * ($r.tx_MB_per_s + 0.001)
		and ($r.tx_pkts_per_s - $r.tx_pkts / $dt | fabs) < 0.02 * ($r.tx_pkts_per_s + 1))' "$tmp/j" > /dev/null ||
	{ echo "FAIL json rates:"; cat "$tmp/j"; fail=1; }

# The text timeline: one line per rail per interval, key=value, stable.
num='([0-9]+\.[0-9]{2}MB/s|-)' pps='([0-9]+|-)'
sampled "$tmp/x" watch -i 0.5 -n 2 rxe0 rxe1/1 || { echo "FAIL text: exit $?"; cat "$err"; fail=1; }
bad=$(grep -vE "^t=[0-9]+\.[0-9]s rxe[01] (up|down|gone) tx=$num rx=$num txpps=$pps rxpps=$pps roce_txpps=$pps roce_rxpps=$pps qps=[0-9]+ backups=[0-9]+\$" "$tmp/x")
[ -z "$bad" ] || { echo "FAIL text grammar: $bad"; fail=1; }
# Lines 1-2: the first interval (nothing changed), 3-4: the second.
sed -n 1p "$tmp/x" | grep -qE '^t=0\.[5-9]s rxe0 up tx=0\.00MB/s rx=0\.00MB/s txpps=0 rxpps=0 roce_txpps=0 roce_rxpps=0 qps=0 backups=0$' &&
	sed -n 2p "$tmp/x" | grep -qE '^t=0\.[5-9]s rxe1 up .* roce_txpps=- roce_rxpps=- ' &&
	sed -n 3p "$tmp/x" | grep -qE '^t=1\.[0-9]s rxe0 up tx=(1\.[0-9][0-9]|2\.[01][0-9])MB/s rx=0\.00MB/s txpps=1[0-9]{3} rxpps=[0-9]{2,3} roce_txpps=[0-9]{3} ' &&
	sed -n 4p "$tmp/x" | grep -qE '^t=1\.[0-9]s rxe1 up tx=0\.00MB/s ' &&
	[ "$(wc -l < "$tmp/x")" = 4 ] || { echo "FAIL text rates:"; cat "$tmp/x"; fail=1; }

# A rail filter keeps the order of the machine, not of the arguments.
t filter 0 "$ctl" -j watch -i 0.1 -n 1 rxe1 &&
	jq -e '(.rails | length) == 1 and .rails[0].rail == "rxe1"' "$out" > /dev/null ||
	{ echo "FAIL filter: $(cat "$out")"; fail=1; }
# Counters that are missing or garbled are unknown (null, "-"), not 0.
echo garbage > "$st/rx_bytes"
rm "$st/tx_packets"
t unknown 0 "$ctl" -j watch -i 0.1 -n 1 rxe0 &&
	jq -e '.rails[0] | .rx_bytes == null and .rx_MB_per_s == null
		and .tx_pkts == null and .tx_bytes == 0' "$out" > /dev/null ||
	{ echo "FAIL unknown: $(cat "$out")"; fail=1; }
t unknown-text 0 "$ctl" watch -i 0.1 -n 1 rxe0 && has "$out" " rx=- txpps=- "

# QPs per rail from a stand-in's record (rails mlx5_0 and mlx5_1): one QP
# runs on mlx5_0 with its backup on mlx5_1, one migrated to mlx5_0, one
# (UD, unprotected) runs on mlx5_0.
coproc W { "$writer"; }
wproc=$W_PID # bash unsets W_PID once it has reaped the coprocess
read -r _ wpid <&"${W[0]}"
t qps 0 env R2CC_SYSFS_ROOT="$fx/sysfs-mlx" "$ctl" -j watch -i 0.1 -n 1 &&
	jq -e '[.rails[] | {(.rail): [.qps, .qps_backup]}] | add
		| . == {"mlx5_0": [3, 0], "mlx5_1": [0, 1], "mlx5_2": [0, 0],
			"mlx5_3": [0, 0]}' "$out" > /dev/null ||
	{ echo "FAIL qps: $(cat "$out")"; fail=1; }
t qps-text 0 env R2CC_SYSFS_ROOT="$fx/sysfs-mlx" "$ctl" watch -i 0.1 -n 1 mlx5_1 &&
	has "$out" "^t=[0-9.]*s mlx5_1 down tx=- rx=- .* qps=0 backups=1$"
exec {W[1]}>&-
wait "$wproc"

# SIGINT (and SIGTERM) end it cleanly, between intervals or mid-way
# through a long one; bounds are inclusive.
t sigint 0 timeout --preserve-status -k 2 -s INT 0.7 "$ctl" watch -i 0.2 &&
	[ "$(grep -c '^t=' "$out")" -ge 4 ] && [ $(($(wc -l < "$out") % 2)) = 0 ] ||
	{ echo "FAIL sigint: $(cat "$out")"; fail=1; }
t sigint-long 0 timeout --preserve-status -k 2 -s INT 0.3 "$ctl" watch -i 3600 -n 1 &&
	{ [ -s "$out" ] && { echo "FAIL sigint-long: output"; fail=1; }; }
t sigterm 0 timeout --preserve-status -k 2 -s TERM 0.3 "$ctl" watch -i 3600
t min-interval 0 "$ctl" watch -i 0.1 -n 2 && [ "$(wc -l < "$out")" = 4 ] ||
	{ echo "FAIL min-interval: $(cat "$out")"; fail=1; }

# Arguments.
for v in 0.09 0 -1 3600.5 3601 1e9 abc 1x nan inf ''; do
	t "interval[$v]" 1 "$ctl" watch -i "$v" -n 1 && has "$err" "bad -i"
done
for v in 0 -1 x 1.5 ''; do
	t "count[$v]" 1 "$ctl" watch -n "$v" && has "$err" "bad -n"
done
t novalue 1 "$ctl" watch -n 1 -i && has "$err" "-i needs a value"
t badopt 1 "$ctl" watch -x && has "$err" "unknown option"
t nosuchrail 1 "$ctl" watch -n 1 rxe0 rxe7 && has "$err" "rail rxe7: No such device"
[ -s "$out" ] && { echo "FAIL nosuchrail: output"; fail=1; }
t nodev 2 env R2CC_SYSFS_ROOT="$tmp/status" "$ctl" watch -n 1 &&
	has "$err" "no RDMA devices"
t help 0 "$ctl" watch --help && has "$out" "usage: r2cc-ctl watch"
t help-word 0 "$ctl" watch help && has "$out" "-n COUNT"
t prefix 0 "$ctl" wat -i 0.1 -n 1 rxe1 && has "$out" "^t=[0-9.]*s rxe1 "
echo "ctl_watch: $n cases"
exit $fail
