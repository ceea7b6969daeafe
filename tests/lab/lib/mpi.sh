# SPDX-License-Identifier: MIT
# Open MPI across the lab nodes, sourced by scenarios: one rank per node,
# launched over ssh on the management network, traffic over verbs on rxe0
# through UCX (pml ucx, UCX_TLS=rc_verbs,ud_verbs,self; no TCP or shared
# memory BTL). tests/progs/mpi_allreduce checks every element it receives.
# UCX_UD_VERBS_ETH_DGID_CHECK=n is what makes UCX's UD wire-up work on rxe;
# without it the job dies with "UD endpoint ... unhandled timeout error".
# UCX_RNDV_SCHEME=put_zcopy: large messages by RDMA WRITE. The default here
# (RDMA READ) also works but is 4x slower in the lab: about a third of the
# read response packets are lost on the emulated wire and each loss costs the
# reader a retry timeout.

MPI_DEV=rxe0:1                 # the rail UCX may use
MPI_ARGS="-n 32 -s 1048576 -p 4 -m 4194304"
MPI_BOUND=400

mpi_counters() { # mpi_counters TAG: rxe counters of every rail, one per line
	local r c
	for ((r = 0; r < RAILS; r++)); do
		for c in sent_pkts rcvd_pkts rdma_sends rdma_recvs \
			out_of_seq_request duplicate_request; do
			echo "$1 rxe$r.$c $(rxe_counter "$r" "$c")"
		done
	done
}

# mpi_delta BEFORE AFTER NAME: the growth of counter NAME between two tags.
mpi_delta() {
	awk -v b="$1" -v a="$2" -v k="$3" '
		$1 == b && $2 == k { x = $3 }
		$1 == a && $2 == k { y = $3 }
		END { print y - x }' "$LAB/$NODE.mpi.counters"
}

# mpi_report TAG COUNTER...: metrics for what the job TAG moved over rxe on
# this node (COUNTER: rxe0.sent_pkts, ...).
mpi_report() {
	local tag=$1 c
	shift
	for c in "$@"; do
		metric "$NODE.$tag.$c" "$(mpi_delta "$tag.before" "$tag.after" "$c")"
	done
}

# mpi_setup [PROG]: sshd and keys on both nodes, the path of the program
# (tests/progs/PROG, default mpi_allreduce) on node a in $LAB/mpi.prog.
mpi_setup() {
	local name=${1:-mpi_allreduce}
	if ! command -v mpirun > /dev/null; then
		check fail mpi.installed "openmpi-bin is not installed"
		return 1
	fi
	export PMIX_MCA_gds=hash
	ssh_setup || { check fail ssh.setup "see $NODE.sshd.log"; return 1; }
	# What UCX sees, for the record (ucx_info is in ucx-utils).
	command -v ucx_info > /dev/null && ucx_info -d > "$LAB/$NODE.ucx_info.out" 2>&1

	if [ "$NODE" = a ]; then
		ssh_peer_ok 60 && check pass ssh.peer ||
			check fail ssh.peer "ssh node-b does not work"
		PROG=$BUILD/tests/progs/$name
		if [ ! -x "$PROG" ]; then
			# Not built here (no meson build tree): build it into the run
			# folder, which both nodes see at the same path.
			PROG=$LAB/$name
			bounded 180 mpicc -O2 -o "$PROG" \
				"$REPO/tests/progs/$name.c" > "$LAB/a.mpicc.out" 2>&1 ||
				check fail mpicc "see a.mpicc.out (libopenmpi-dev?)"
		fi
		echo "$PROG" > "$LAB/mpi.prog"
	fi
}

# mpi_job TAG MPIRUN_OPTS...: run the program on both nodes from node a, with
# the rxe counters of both nodes taken before and after.
mpi_job() {
	local tag=$1 out=$LAB/a.mpi.$1.out net rc start dt
	shift
	mpi_counters "$tag.before" >> "$LAB/$NODE.mpi.counters"
	barrier "$tag.start" 300 || return 1
	if [ "$NODE" = a ]; then
		log "$tag: mpirun $*"
		net=$(mgmt_ip a)
		net=${net%.*}.0/24
		start=$(date +%s)
		bounded "$MPI_BOUND" mpirun --allow-run-as-root -np 2 \
			--host node-a:1,node-b:1 \
			--mca oob_tcp_if_include "$net" \
			--mca btl_tcp_if_include "$net" \
			-x PMIX_MCA_gds "$@" "$(cat "$LAB/mpi.prog")" $MPI_ARGS \
			> "$out" 2>&1
		rc=$?
		dt=$(($(date +%s) - start))
		if [ $rc -eq 0 ] &&
			grep -q '^mpi_allreduce: ranks=2 .* errors=0$' "$out"; then
			check pass "$tag.run" "$(grep 'ranks=' "$out") ${dt}s"
		else
			check fail "$tag.run" "exit $rc after ${dt}s (see ${out##*/})"
		fi
		metric "$tag.seconds" "$dt"
	fi
	barrier "$tag.end" $((MPI_BOUND + 60)) || return 1
	mpi_counters "$tag.after" >> "$LAB/$NODE.mpi.counters"
}

# The UCX options that keep the job on verbs, rail 0 only.
MPI_UCX=(--mca pml ucx --mca btl self
	-x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=$MPI_DEV
	-x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_RNDV_SCHEME=put_zcopy)

# libfabric: pml cm, mtl ofi, provider verbs;ofi_rxm, one RC QP per peer
# made through rdma_cm, with its own receive queue (FI_OFI_RXM_USE_SRX=0),
# large messages by rxm's rendezvous (RDMA READ). FI_VERBS_IFACE (the
# rank's environment, mpi_rank in fo.sh) keeps it on rail 0,
# FI_UNIVERSE_SIZE keeps rxm's CQs within rxe's limit.
MPI_RXM=(--mca btl self --mca pml cm --mca mtl ofi
	--mca mtl_ofi_provider_include 'verbs;ofi_rxm'
	-x FI_OFI_RXM_USE_SRX=0 -x FI_UNIVERSE_SIZE=8)

# mpi_check_verbs TAG: the job TAG moved its data over rxe0 as RC RDMA, and
# nothing over rxe1 (counters of this node).
mpi_check_verbs() {
	local tag=$1 sent rcvd sends other
	mpi_report "$tag" rxe0.sent_pkts rxe0.rcvd_pkts rxe0.rdma_sends \
		rxe0.rdma_recvs rxe0.out_of_seq_request rxe0.duplicate_request
	sent=$(mpi_delta "$tag.before" "$tag.after" rxe0.sent_pkts)
	rcvd=$(mpi_delta "$tag.before" "$tag.after" rxe0.rcvd_pkts)
	sends=$(mpi_delta "$tag.before" "$tag.after" rxe0.rdma_sends)
	# 48 MiB each way at MTU 1024: well over 20000 data packets each way.
	[ "$sent" -ge 20000 ] && [ "$rcvd" -ge 20000 ] &&
		check pass "$tag.rxe0.$NODE" "sent $sent rcvd $rcvd packets" ||
		check fail "$tag.rxe0.$NODE" "only sent $sent rcvd $rcvd packets on rxe0"
	# rdma_sends counts completed SEND work requests (UD or RC); RC RDMA
	# READ/WRITE packets are not among them.
	[ $((sends * 20)) -lt "$sent" ] &&
		check pass "$tag.rc-rdma.$NODE" "$sends SENDs among $sent packets" ||
		check fail "$tag.rc-rdma.$NODE" "$sends SENDs among $sent packets: not RC RDMA"
	if [ "$RAILS" -gt 1 ]; then
		other=$(mpi_delta "$tag.before" "$tag.after" rxe1.sent_pkts)
		[ "$other" -lt 100 ] && check pass "$tag.rxe1-idle.$NODE" "$other" ||
			check fail "$tag.rxe1-idle.$NODE" "$other packets on rxe1"
	fi
}
