# SPDX-License-Identifier: MIT
# gen.sh: what the scenarios that run r2cc-gen (tools/gen) share: its
# summary line, its figures as metrics, and a fault applied mid-run.

# gen_line NAME: the client's summary line (empty if it printed none).
gen_line() { grep '^r2cc-gen: role=client' "$LAB/b.$1.out" | tail -1; }
# field LINE KEY: one key=value of a summary line.
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# record NAME: the client's figures as metrics; prints the summary line.
record() {
	local line k
	line=$(gen_line "$1")
	for k in ops bytes_verified mismatches duplicates losses order_errors \
		longest_stall_ms errors; do
		metric "gen.$1.$k" "$(field "$line" $k | grep . || echo none)"
	done
	echo "$line"
}

# fault_midrun NAME CMD...: once this node's side of NAME has printed
# progress (traffic flows), wait 3 s more and apply the fault; the time it
# hit goes to $LAB/NAME.fault. Runs in the background (FAULT_PID).
fault_midrun() {
	local name=$1; shift
	(
		for i in $(seq 600); do
			grep -q '^r2cc-gen: progress' "$LAB/$NODE.$name.out" \
				2>/dev/null && break
			sleep 0.1
		done
		sleep 3
		"$@"
		date +%s.%N > "$LAB/$name.fault"
		log "$name: fault applied: $*"
	) &
	FAULT_PID=$!
}

