#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs inside each lab guest (chrooted into the overlay of the host's root):
# brings up the management network and one rxe device per rail, meets the
# peer, then runs the scenario script with a bound on its run time.
. "$LAB_repo/tests/lab/lib/guest.sh"

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
ulimit -l unlimited
# A process that crashes leaves its core in the run folder (at most
# 256 MiB), and finish() its backtrace beside it
ulimit -c $((256 * 1024))
echo "$LAB/core.$NODE.%p.%E" > /proc/sys/kernel/core_pattern

# The kernel's side of a failure, for its post-mortem: every rxe QP that
# went to ERR of its own (the responder's or the completer's error; with
# the stack) and every completion in error but a flush, with QP numbers;
# timestamps on CLOCK_TAI (the wall clock here: no NTP sets its offset).
# Offsets from the guest kernel's BTF: struct ib_qp's qp_num (rxe_qp
# begins with it), ib_uverbs_wc's status and qp_num.
TRACE=/sys/kernel/tracing
qp_trace_start() {
	mountpoint -q $TRACE || mount -t tracefs nodev $TRACE || return 0
	echo 'p:r2cc/qp_err rxe_qp_error qpn=+176(%di):u32' \
		>> $TRACE/kprobe_events || return 0
	echo 'p:r2cc/cqe_err rxe_cq_post status=+8(%si):u32 qpn=+28(%si):u32' \
		>> $TRACE/kprobe_events || return 0
	echo tai > $TRACE/trace_clock
	echo 8192 > $TRACE/buffer_size_kb
	comp_seq_probe
	echo stacktrace > $TRACE/events/r2cc/qp_err/trigger
	echo 'status != 0 && status != 5' > $TRACE/events/r2cc/cqe_err/filter
	echo 1 > $TRACE/events/r2cc/enable
}

# rxe's completer failing a QP on a response out of sequence with a
# success for its WR (rxe_comp.c's COMPST_ERROR while the WQE's status is
# still IB_WC_SUCCESS; a QP reset in the middle of a READ's response keeps
# its place there): a probe on that branch, at its offset in the lab
# kernel's rdma_rxe only (registers: r12 the QP, r14 the WQE, bp the
# packet; comp.psn +0x42c, comp.opcode +0x430). Counted at the finish.
RXE_BUILD_ID=e50248c29f0bbeda99f38467b5638f7141878947
comp_seq_probe() {
	local id
	id=$(od -An -tx1 -j16 /sys/module/rdma_rxe/notes/.note.gnu.build-id \
		2>/dev/null | tr -d ' \n')
	[ "$id" = $RXE_BUILD_ID ] || return 0
	echo 'p:r2cc/comp_seq rdma_rxe:rxe_completer+0x3a3 qpn=+176(%r12):u32 status=+0x90(%r14):u32 comp_psn=+0x42c(%r12):u32 comp_opcode=+0x430(%r12):s32 wr_opcode=+0xc(%r14):u32 first_psn=+0xa4(%r14):u32 psn=+0x24(%bp):u32 opcode=+0x2d(%bp):u8' \
		>> $TRACE/kprobe_events || return 0
	echo 'status == 0' > $TRACE/events/r2cc/comp_seq/filter
}

# Each core in the run folder: every thread's backtrace, as
# core.NODE.PID.EXE.txt (EXE's path with '!' for '/', as core_pattern's %E).
core_backtraces() {
	local c exe
	for c in "$LAB/core.$NODE".*; do
		[ -f "$c" ] && [[ $c != *.txt ]] || continue
		exe=${c#"$LAB/core.$NODE".*.}
		exe=${exe//!//}
		bounded 120 gdb -batch -nx -ex 'thread apply all bt' "$exe" "$c" \
			> "$c.txt" 2>&1
		log "a core of $exe: backtrace in ${c##*/}.txt"
	done
}

finish() {
	local n
	core_backtraces
	if [ -r $TRACE/trace ]; then
		cat $TRACE/trace > "$LAB/$NODE.kernel-qp.trace"
		n=$(grep -c ' comp_seq: ' "$LAB/$NODE.kernel-qp.trace")
		[ -d $TRACE/events/r2cc/comp_seq ] &&
			metric "rxe.$NODE.completer_seq_errors" "$n"
	fi
	echo "$1" > "$LAB/$NODE.done"
	sync
	exit 0
}

setup() {
	local i dev
	hostname "node-$NODE"
	{
		echo "127.0.0.1 localhost"
		echo "$(mgmt_ip a) node-a"
		echo "$(mgmt_ip b) node-b"
	} > /etc/hosts
	ip link set lo up
	dev=$(mgmt_dev) || { log "no management NIC"; return 1; }
	ip link set dev "$dev" up
	ip addr add "$(mgmt_ip "$NODE")/24" dev "$dev"
	for ((i = 0; i < RAILS; i++)); do
		dev=$(rail_dev "$i") || { log "no NIC for rail $i"; return 1; }
		ip link set dev "$dev" up
		ip addr add "$(rail_ip "$NODE" "$i")/24" dev "$dev"
		rdma link add "$(rail_ibdev "$i")" type rxe netdev "$dev" ||
			{ log "rdma link add for rail $i failed"; return 1; }
	done
	for ((i = 0; i < RAILS; i++)); do
		wait_port_active "$i" 30 ||
			{ log "rail $i never became ACTIVE"; return 1; }
	done
	rdma link show
	qp_trace_start
}

log "booted; scenario ${LAB_scenario}, $RAILS rails"
setup > "$LAB/$NODE.setup.log" 2>&1 || {
	check fail setup "see $NODE.setup.log"
	finish setup-failed
}
barrier up 120 || finish no-peer

script=$REPO/tests/lab/scenarios/$LAB_scenario.sh
bounded "${LAB_timeout:-300}" bash -c ". '$REPO/tests/lab/lib/guest.sh'; . '$script'"
rc=$?
[ $rc -eq 124 ] && check fail timeout "scenario ran past ${LAB_timeout}s"
finish "$rc"
