# SPDX-License-Identifier: MIT
# stacks: the software stacks people run, each under r2cc across a pull of
# rail 0's cable on node b mid-run, with every byte or element checked:
# r2cc-gen polling through the extended CQ API (ibv_create_cq_ex,
# ibv_start_poll/ibv_next_poll/ibv_end_poll, ibv_wc_read_*); NCCL's verbs
# pattern (r2cc-nccl); Open MPI over UCX rc_verbs (its QPs on an SRQ, UD
# beside them for wire-up) with rendezvous by RDMA WRITE (put_zcopy) and
# by RDMA READ (get_zcopy), eager sizes too, point to point and allreduce; Open MPI over libfabric's
# verbs;ofi_rxm with rxm's own rendezvous (RDMA READ); rdma_cm programs:
# rping, and rstream over rsockets. For each r2cc-ctl shows every
# connected RC QP protected before the fault and moved after it; without
# r2cc the same fault kills NCCL's pattern and the MPI jobs (bounded).
# UCX asserts before each post that its QP's state field says RTS, so
# r2cc's fence must not show there; the kernel's rdma_cm reports a dead
# rail on the connection, so r2cc must keep that from the program. Prints
# per case the bytes verified, RC QPs protected/total and WRs replayed.
# lab-timeout: 1800

. "$REPO/tests/lab/lib/fo.sh"

# The generator's completions retire the logs, and the fenced primary's
# are hidden and the backup's merged in, through the extended CQ API as
# through ibv_poll_cq.
GEN_X=--cq-ex gen_fo stacks.cqex b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier stacks.cqex.cleared 60

# NCCL's verbs pattern (tools/nccl, r2cc-nccl: libibverbs by dlvsym, CTS
# FIFO written inline, WRITE_WITH_IMM chunks over 2 QPs per connection, 2
# connections each way, a flush READ on a QP connected to itself, NCCL's
# fatal async events): every byte checked, no fatal event, every RC QP
# protected before the fault and moved after it; without r2cc the same
# fault stalls it past its bound (10 s).
NC="$BUILD/tools/r2cc-nccl -d $(rail_ibdev 0) -g 1 -c 2 -q 2 -p 18700"
# nccl_case NAME EXPECT PREFIX: the pair run with PREFIX (r2cc's
# environment, or none), rail 0's cable pulled on b 3 s after its first
# progress line (under r2cc: 1 s after both nodes' r2cc-ctl view, cov_fault).
nccl_case() {
	local name=$1 expect=$2 pre=$3 line
	rm -f "$LAB/$name.fault"
	barrier "$name.start" 120
	if [ "$expect" = ok ]; then
		cov_watch "$name" "$LAB/$NODE.$name.out" '^r2cc-nccl: progress'
		[ "$NODE" = b ] && cov_fault "$name" fault_carrier 0 down
	elif [ "$NODE" = b ]; then
		fault_after "$LAB/b.$name.out" '^r2cc-nccl: progress' 120 3 \
			"$name" fault_carrier 0 down
	fi
	pair "$name" "$expect" 150 18700 "$pre$NC" "$pre$NC -t 20 \$SERVER"
	[ "$NODE" = b ] && rail0_back
	line=$(grep '^r2cc-nccl: role=' "$LAB/$NODE.$name.out")
	if [ "$expect" = fail ]; then
		[ "$NODE" = b ] && { [[ $line == *FAILED* ]] || [ -z "$line" ]; } &&
			check pass "$name.line" "${line:-no summary: killed at its bound}"
		[ "$NODE" = b ] && [[ $line != *FAILED* ]] && [ -n "$line" ] &&
			check fail "$name.line" "finished without r2cc: $line"
	elif [[ $line == *" errors=0 fatal_events=0" ]]; then
		check pass "$name.line" "$line"
		metric "$name.$NODE.bytes_verified" "$(field "$line" bytes_verified)"
	else
		check fail "$name.line" "${line:-no summary} $(grep -m2 'FAIL\|fatal' "$LAB/$NODE.$name.out" | tr '\n' ' ')"
	fi
	if [ "$expect" = ok ]; then
		cov_check "$name"
		moved_check "$name" "$LAB/$NODE.$name.log"
	fi
	barrier "$name.cleared" 120
}
# R2CC_DETECT_MS=2000 (ACK timeout 16, 268 ms, as fo.sh's cases): at
# r2cc's default 67 ms a loaded guest retransmits hundreds of times a
# run, and rxe 6.1's responder now and then fails a retransmitted
# WRITE_WITH_IMM stream (remote invalid request, or its QP flushed):
# natively too, at r2cc-nccl --timeout 14 with a busy loop beside it.
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.stacks.nccl.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
R2CC="$R2CC R2CC_DETECT_MS=2000"
nccl_case stacks.nccl ok "$R2CC "
baselines && nccl_case stacks.nccl.base fail ""

# rdma_cm programs (the kernel's rdma_cm connects them, on rail 0's
# addresses): rping (-V: every ping's data checked; each one printed, and
# counted), and rstream over rsockets (-T v: every byte checked; its own
# rdma_cm ids, synchronous, the channel read by rsockets' own thread).
# Rail 0's cable on b is pulled 1 s after both nodes' r2cc-ctl have
# seen the QP protected (cov_fault) and put back 20 s later; b pings a's rail-0 address once it is down, as anything on
# the node may, so its neighbour entry fails and the kernel's rdma_cm
# reports the connection UNREACHABLE: r2cc must keep that from the
# program, whose QP it moved. The pair ends normally, every RC QP
# protected before the fault and moved after it.
# cm_case NAME SERVER CLIENT
cm_case() {
	local name=$1 srv=$2 cli=$3 log=$LAB/$NODE.$1.log n
	R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$log"
	R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
	rm -f "$LAB/$name.fault"
	barrier "$name.start" 120
	cov_watch "$name" "$log" 'protected: backup QP'
	if [ "$NODE" = b ]; then
		cov_fault "$name" fault_flap 0 "down 20 up 0"
		(
			for i in $(seq 1800); do
				[ -e "$LAB/$name.fault" ] && break
				sleep 0.1
			done
			busybox ping -c 6 -W 1 "$(rail_ip a 0)" > /dev/null 2>&1
		) &
	fi
	pair "$name" ok 300 - "$R2CC $srv" "$R2CC $cli"
	[ "$NODE" = b ] && rail0_back
	cov_check "$name"
	moved_check "$name" "$log"
	# what the program checked: rping's pings (64 bytes each), rstream's
	# total (both ways)
	metric "$name.$NODE.verified" "$(sed -n 's/^pings=\([0-9]*\)/\1 pings of 64 bytes/p; s/^custom *[^ ]* *[^ ]* *[^ ]* *\([^ ]*\).*/\1 bytes/p' "$LAB/$NODE.$name.out")"
	metric "$name.$NODE.cm_events_hidden" "$(grep -c 'UNREACHABLE.*not shown' "$log")"
	metric "$name.$NODE.wrs_replayed" "$(wrs_replayed "$log")"
	if [ "$NODE" = b ]; then
		n=$(grep -c 'UNREACHABLE.*not shown' "$log")
		[ "$n" -gt 0 ] &&
			check pass "$name.cm_event" "$(grep -m1 'UNREACHABLE' "$log" | cut -d: -f4-)" ||
			check fail "$name.cm_event" "the kernel's rdma_cm reported nothing r2cc hid"
	fi
	barrier "$name.cleared" 120
}
A0=$(rail_ip a 0)
# rping returns 0 on a disconnect too: every ping must have been made.
cm_case stacks.rping "rping -s -a $A0 -C 5000 -V" \
	"rping -c -a $A0 -C 5000 -V -v > /tmp/rping.out &&
	n=\$(grep -c '^ping data' /tmp/rping.out) && echo pings=\$n &&
	[ \$n = 5000 ]"
cm_case stacks.rsockets "rstream -b $A0 -T v -S 65536 -C 2500 -I 1" \
	"rstream -s $A0 -T v -S 65536 -C 2500 -I 1"

# Memory windows (tests/progs/mw_probe, on a's rail 0 alone: two QPs on
# two PDs connected to each other): a window bound, written through and
# invalidated by the peer's SEND_WITH_INV, then a write through it
# refused. r2cc cannot move windows and refuses them before any is
# bound: the QPs of the window's PD once it is allocated, the sender's
# when it posts the invalidation. The program's every step must come out
# as without r2cc, and r2cc must never lose a QP's protection half-way:
# one refused after RTS gets the program's ACK timeout back.
if [ "$NODE" = a ]; then
	m="$BUILD/tests/progs/mw_probe $(rail_ibdev 0) 1"
	log=$LAB/a.stacks.mw.log
	bounded 60 $m > "$LAB/a.stacks.mw.native.out" 2>&1
	rc1=$?
	LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$log \
		R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev) \
		bounded 60 $m > "$LAB/a.stacks.mw.r2cc.out" 2>&1
	rc2=$?
	if [ $rc1 = 0 ] && [ $rc2 = 0 ] &&
		cmp -s "$LAB/a.stacks.mw.native.out" "$LAB/a.stacks.mw.r2cc.out"; then
		check pass stacks.mw.same "$(grep -c . "$LAB/a.stacks.mw.r2cc.out") steps, as without r2cc"
	else
		check fail stacks.mw.same "exit $rc1/$rc2: $(tr '\n' ' ' < "$LAB/a.stacks.mw.r2cc.out" | cut -c1-300)"
	fi
	if grep -q 'protected: backup QP' "$log" &&
		grep -q 'memory windows on its PD' "$log" &&
		grep -q 'posts memory-window operations' "$log" &&
		! grep -q 'does not know' "$log"; then
		check pass stacks.mw.refused "$(grep -c 'protected: backup QP' "$log") QPs protected, then refused: $(grep -o 'memory windows on its PD\|posts memory-window operations' "$log" | sort | uniq -c | tr -s ' \n' ' ')"
	else
		check fail stacks.mw.refused "$(grep -E 'protected|memory|does not know' "$log" | head -4 | cut -c1-160 | tr '\n' ' ')"
	fi
	# Refused after RTS, a QP gets the program's ACK timeout and retry
	# counts back (r2cc's were on it), through SQD at its next post.
	if grep -q "are the program's again" "$log"; then
		check pass stacks.mw.untuned "$(grep -m1 -o "QP 0x[0-9a-f]* unprotected: its ACK.*again" "$log")"
	else
		check fail stacks.mw.untuned "$(grep -E 'SQD|unprotected' "$log" | head -4 | cut -c1-160 | tr '\n' ' ')"
	fi
fi
barrier stacks.mw.done 180

. "$REPO/tests/lab/lib/mpi.sh"
# UCX: every size from 8 B (eager) to 4 MiB (rendezvous), point to point
# and MPI_Allreduce, each word checked.
UCX_PP="-a -s 8,64,4096,65536,1048576,4194304"
if mpi_setup mpi_pingpong; then
	MPI_PP_ARGS=$UCX_PP mpi_fo stacks.ucx "${MPI_UCX[@]}"
	mpi_fo stacks.ucx_get \
		"${MPI_UCX[@]/UCX_RNDV_SCHEME=put_zcopy/UCX_RNDV_SCHEME=get_zcopy}"
	mpi_fo stacks.rxm "${MPI_RXM[@]}"
	if baselines; then
		MPI_BASE=1 MPI_PP_ARGS=$UCX_PP mpi_fo stacks.ucx.base "${MPI_UCX[@]}"
		MPI_BASE=1 mpi_fo stacks.rxm.base "${MPI_RXM[@]}"
	fi
fi
