# SPDX-License-Identifier: MIT
# gen-baseline: r2cc-gen (tools/gen) verifies every byte across the nodes on
# rail 0 with no fault, and fails loudly, in bounded time, when rail 0 dies
# under it without r2cc: carrier down on node b, then a black hole on node
# a's egress, each hitting mid-run. That failure is the baseline that the
# failover scenario must turn into a pass.
# lab-timeout: 600
# lab-tier: study

STALL=10 # the generator's --stall-limit
# -s 8192: messages of up to 8 packets; the emulated wire drops more of
# long bursts, and rxe has been seen to fail a QP by itself under them.
GEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 --stall-limit $STALL"

. "$REPO/tests/lab/lib/gen.sh"

# 1. No fault: everything verified, every failure counter zero.
pair base ok 120 18600 "$GEN" "$GEN -q 4 -t 20 -i 5 \$SERVER"
if [ "$NODE" = b ]; then
	line=$(record base)
	if gen_clean "$line" &&
		[ "$(field "$line" bytes_verified)" -gt 0 ]; then
		check pass base.line "ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified)"
	else
		check fail base.line "${line:-no summary line}"
	fi
fi

# 2. Carrier down on node b's rail 0 mid-run: the client must fail.
[ "$NODE" = b ] && fault_midrun carrier fault_carrier 0 down
pair carrier fail $((STALL + 60)) 18600 "$GEN" "$GEN -t 60 -i 1 \$SERVER"
if [ "$NODE" = b ]; then
	end=$(date +%s.%N)
	seen=$([ -e "$LAB/carrier.fault" ] && echo 1)
	wait "$FAULT_PID"
	judge_fail carrier "$end" "$seen"
	fault_clear 0
	wait_port_active 0 30 && check pass carrier.port-back ||
		check fail carrier.port-back "rxe0 not ACTIVE 30s after link up"
fi
barrier carrier.cleared 60

# 3. Black hole on node a's egress mid-run (no event): the client must fail.
[ "$NODE" = a ] && fault_midrun blackhole fault_blackhole 0
pair blackhole fail $((STALL + 60)) 18600 "$GEN -i 1" "$GEN -t 60 -i 1 \$SERVER"
end=$(date +%s.%N)
seen=$([ -e "$LAB/blackhole.fault" ] && echo 1)
if [ "$NODE" = a ]; then
	wait "$FAULT_PID"
	fault_clear 0
fi
barrier blackhole.cleared 60
[ "$NODE" = b ] && judge_fail blackhole "$end" "$seen"
true
