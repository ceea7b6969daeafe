# SPDX-License-Identifier: MIT
# fault-inject: r2cc-ctl's fault injector (a tc eBPF program) does what it
# says on rail 0 of node a, while rail 1 keeps working: --after 200 lets
# exactly 200 RoCEv2 packets through and then black-holes the rail (the
# transfer stalls); --qpn of a QP nobody uses matches nothing; --qpn of the
# running server's QP drops only its packets; clear restores the rail. The
# counters are read back by later invocations (maps pinned in bpffs).
# lab-timeout: 900

CTL=$BUILD/tools/r2cc-ctl
PP="ibv_rc_pingpong -g 1 -n 1000"
transfer() { # transfer NAME RAIL ok|fail [PINGPONG]
	local pp=${4:-$PP}
	pair "$1" "$3" "$([ "$3" = ok ] && echo 180 || echo 30)" 18515 \
		"$pp -d $(rail_ibdev $2)" "$pp -d $(rail_ibdev $2) \$SERVER"
}
expect_eq() { # expect_eq NAME GOT WANT
	[ "$2" = "$3" ] && check pass "$1" "$2" || check fail "$1" "got $2, want $3"
}
expect_gt0() { # expect_gt0 NAME GOT
	[ "${2:-0}" -gt 0 ] 2>/dev/null && check pass "$1" "$2" ||
		check fail "$1" "got \`$2', want > 0"
}
# ctl NAME WANT_RC ARGS...: run r2cc-ctl on this node, expect its exit code;
# what it printed is in $LAB/$NODE.NAME.ctl.
ctl() {
	local name=$1 want=$2 rc
	shift 2
	bounded 60 "$CTL" "$@" > "$LAB/$NODE.$name.ctl" 2>&1; rc=$?
	[ $rc -eq "$want" ] && check pass "$name" "r2cc-ctl $*: exit $rc" ||
		check fail "$name" "r2cc-ctl $*: exit $rc, want $want: $(head -c 300 "$LAB/$NODE.$name.ctl")"
}
# counter KEY: one field of `r2cc-ctl -j fault show rxe0`.
counter() { bounded 60 "$CTL" -j fault show rxe0 | jq -r ".[0].$1"; }

if [ "$RAILS" -lt 2 ]; then
	check fail rails "the fault-inject scenario needs 2 rails or more"
	return 0
fi
command -v jq > /dev/null || { check fail jq "jq is missing (tools/install-deps)"; return 0; }

transfer base.rail0 0 ok

# --after 200 on node a (both hooks): exactly 200 packets, then nothing.
if [ "$NODE" = a ]; then
	ctl after.install 0 fault drop rxe0 --after 200
	grep -q ' /sys/fs/bpf bpf ' /proc/mounts && check pass after.bpffs ||
		check fail after.bpffs "bpffs not mounted on /sys/fs/bpf"
	n=$(tc filter show dev "$(rail_dev 0)" ingress | grep -c 'r2cc_fault')
	expect_eq after.tc-ingress "$n" 1
	n=$(tc filter show dev "$(rail_dev 0)" egress | grep -c 'r2cc_fault')
	expect_eq after.tc-egress "$n" 1
fi
barrier after.applied
transfer after.rail0 0 fail
transfer after.rail1 1 ok
if [ "$NODE" = a ]; then
	seen=$(counter seen) passed=$(counter passed) dropped=$(counter dropped)
	expect_eq after.passed "$passed" 200
	expect_gt0 after.dropped "$dropped"
	expect_eq after.seen "$seen" "$((passed + dropped))"
	expect_eq after.state "$(counter state)" dropping
	expect_eq after.rail "$(counter rail)" rxe0/1
	metric after.dropped "$dropped"
	ctl after.refused 1 fault drop rxe0 --percent 5
	grep -q 'already has a fault' "$LAB/a.after.refused.ctl" &&
		check pass after.refused.msg ||
		check fail after.refused.msg "$(cat "$LAB/a.after.refused.ctl")"
	ctl after.clear 0 fault clear rxe0
	n=$(tc filter show dev "$(rail_dev 0)" ingress | grep -c 'r2cc_fault')
	expect_eq after.cleared-tc "$n" 0
	[ -e /sys/fs/bpf/r2cc/"$(rail_dev 0)" ] &&
		check fail after.cleared-pins "pins left" || check pass after.cleared-pins
	ctl after.show-none 1 fault show rxe0
fi
barrier after.cleared
transfer after.restored 0 ok

# --qpn of a QP that does not exist here (rxe numbers QPs from 17 up): the
# transfer completes and the program counts nothing.
[ "$NODE" = a ] && ctl other-qpn.install 0 fault drop rxe0 --qpn 0xfffffe
barrier other-qpn.applied
transfer other-qpn.rail0 0 ok
if [ "$NODE" = a ]; then
	expect_eq other-qpn.seen "$(counter seen)" 0
	expect_eq other-qpn.dropped "$(counter dropped)" 0
	ctl other-qpn.clear 0 fault clear rxe0
fi
barrier other-qpn.cleared

# --qpn of the running server's own QP: node a reads its QPN from the
# server's first lines and installs the fault mid-transfer; then only the
# packets to that QP (ingress) are seen, and all of them are dropped.
if [ "$NODE" = a ]; then
	(
		out=$LAB/a.qpn-match.rail0.out q=
		for i in $(seq 600); do
			q=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-fA-F]*\).*/\1/p' \
				"$out" 2>/dev/null | head -1)
			[ -n "$q" ] && break
			sleep 0.1
		done
		echo "${q:-none}" > "$LAB/a.qpn-match.qpn"
		[ -n "$q" ] && bounded 60 "$CTL" fault drop rxe0 --qpn "$q" \
			> "$LAB/a.qpn-match.install.ctl" 2>&1
	) &
	QPN_PID=$!
fi
transfer qpn-match.rail0 0 fail "ibv_rc_pingpong -g 1 -n 100000"
if [ "$NODE" = a ]; then
	wait "$QPN_PID"
	q=$(cat "$LAB/a.qpn-match.qpn")
	seen=$(counter seen) passed=$(counter passed) dropped=$(counter dropped)
	expect_eq qpn-match.qpn "$(counter qpn)" "$(printf %d "$q" 2>/dev/null || echo "$q")"
	expect_gt0 qpn-match.dropped "$dropped"
	expect_eq qpn-match.passed "$passed" 0
	expect_eq qpn-match.seen "$seen" "$dropped"
	ctl qpn-match.clear 0 fault clear rxe0
fi
barrier qpn-match.cleared
transfer qpn-match.restored 0 ok
