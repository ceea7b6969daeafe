# SPDX-License-Identifier: MIT
# stacks: the software stacks people run, each under r2cc across a pull of
# rail 0's cable on node b mid-run, with every byte or element checked:
# r2cc-gen polling through the extended CQ API (ibv_create_cq_ex,
# ibv_start_poll/ibv_next_poll/ibv_end_poll, ibv_wc_read_*); NCCL's verbs
# pattern (r2cc-nccl); Open MPI over UCX rc_verbs (its QPs on an SRQ, UD
# beside them for wire-up) with rendezvous by RDMA WRITE (put_zcopy) and
# by RDMA READ (get_zcopy), eager sizes too; Open MPI over libfabric's
# verbs;ofi_rxm with rxm's own rendezvous (RDMA READ). For r2cc-nccl and
# the MPI jobs r2cc-ctl shows every connected RC QP protected before the
# fault and moved after it; without r2cc the same fault kills them
# (bounded). UCX asserts before each post that its QP's state field says
# RTS, so r2cc's fence must not show there. Prints per case the bytes
# verified, RC QPs protected/total and WRs replayed.
# lab-timeout: 1500

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
# progress line.
nccl_case() {
	local name=$1 expect=$2 pre=$3 line
	rm -f "$LAB/$name.fault"
	barrier "$name.start" 120
	[ "$NODE" = b ] && fault_after "$LAB/b.$name.out" \
		'^r2cc-nccl: progress' 120 3 "$name" fault_carrier 0 down
	[ "$expect" = ok ] && cov_watch "$name" "$LAB/$NODE.$name.out" \
		'^r2cc-nccl: progress'
	pair "$name" "$expect" 150 18700 "$pre$NC" "$pre$NC -t 30 \$SERVER"
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
		grep -q 'moved to backup QP' "$LAB/$NODE.$name.log" &&
			check pass "$name.moved" "$(grep -c 'moved to backup QP' "$LAB/$NODE.$name.log") QPs moved" ||
			check fail "$name.moved" "$(grep -E 'fenced|unprotected|failed' "$LAB/$NODE.$name.log" | head -3)"
	fi
	barrier "$name.cleared" 120
}
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.stacks.nccl.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
nccl_case stacks.nccl ok "$R2CC "
nccl_case stacks.nccl.base fail ""

. "$REPO/tests/lab/lib/mpi.sh"
# libfabric: pml cm, mtl ofi, provider verbs;ofi_rxm, one RC QP per peer
# made through rdma_cm, with its own receive queue (FI_OFI_RXM_USE_SRX=0),
# large messages by rxm's rendezvous (RDMA READ). FI_VERBS_IFACE keeps it
# on rail 0, FI_UNIVERSE_SIZE keeps rxm's CQs within rxe's limit.
RXM=(--mca btl self --mca pml cm --mca mtl ofi
	--mca mtl_ofi_provider_include 'verbs;ofi_rxm'
	-x FI_OFI_RXM_USE_SRX=0 -x FI_UNIVERSE_SIZE=8)
if mpi_setup mpi_pingpong; then
	mpi_fo stacks.ucx "${MPI_UCX[@]}"
	mpi_fo stacks.ucx_get \
		"${MPI_UCX[@]/UCX_RNDV_SCHEME=put_zcopy/UCX_RNDV_SCHEME=get_zcopy}"
	mpi_fo stacks.rxm "${RXM[@]}"
	MPI_BASE=1 mpi_fo stacks.ucx.base "${MPI_UCX[@]}"
	MPI_BASE=1 mpi_fo stacks.rxm.base "${RXM[@]}"
fi
