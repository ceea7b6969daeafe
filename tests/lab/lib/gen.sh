# SPDX-License-Identifier: MIT
# gen.sh: what the scenarios that run r2cc-gen (tools/gen) share: its
# summary line, its figures as metrics, and a fault applied mid-run.

# gen_line NAME: the client's summary line (empty if it printed none).
gen_line() { grep '^r2cc-gen: role=client' "$LAB/b.$1.out" | tail -1; }
# field LINE KEY: one key=value of a summary line (no fork: under TCG each
# one costs a fraction of a second, and a case reads dozens).
field() {
	local w ws
	read -ra ws <<< "$1"
	for w in "${ws[@]}"; do
		[ "${w%%=*}" = "$2" ] && echo "${w#*=}"
	done
	return 0
}

# gen_clean LINE: the summary LINE exists and counts no mismatch,
# duplicate, loss, order error or error.
gen_clean() {
	local k
	[ -n "$1" ] || return 1
	for k in mismatches duplicates losses order_errors errors; do
		[ "$(field "$1" $k)" = 0 ] || return 1
	done
}

# record NAME: the client's figures as metrics; prints the summary line.
record() {
	local line k v
	line=$(gen_line "$1")
	for k in ops bytes_verified mismatches duplicates losses order_errors \
		longest_stall_ms errors; do
		v=$(field "$line" $k)
		metric "gen.$1.$k" "${v:-none}"
	done
	echo "$line"
}

# fault_now NAME CMD...: apply the fault now; the time it hit goes to
# $LAB/NAME.fault: the time just before it, what a failover is timed from
# (a carrier change's own, FAULT_T, when it gives one).
fault_now() {
	local name=$1 t=$EPOCHREALTIME
	shift
	FAULT_T=
	"$@"
	echo "${FAULT_T:-$t}" > "$LAB/$name.fault"
	log "$name: fault applied: $*"
}

# fault_after FILE PATTERN WAIT DELAY NAME CMD...: once FILE has a line
# matching PATTERN (at most WAIT seconds), wait DELAY s more and apply the
# fault; the time it hit goes to $LAB/NAME.fault. Runs in the background
# (FAULT_PID).
fault_after() {
	local file=$1 pat=$2 wait=$3 delay=$4 name=$5
	shift 5
	(
		for i in $(seq $((wait * 10))); do
			grep -q "$pat" "$file" 2>/dev/null && break
			nap 0.1
		done
		nap "$delay"
		fault_now "$name" "$@"
	) &
	FAULT_PID=$!
}

# fault_midrun NAME CMD...: once this node's side of NAME has printed
# progress (traffic flows), wait 3 s more and apply the fault. FAULT_AT
# and FAULT_DELAY change the line waited for and the wait after it.
fault_midrun() {
	local name=$1; shift
	fault_after "$LAB/$NODE.$name.out" "${FAULT_AT:-^r2cc-gen: progress}" \
		60 "${FAULT_DELAY:-3}" "$name" "$@"
}


# judge_fail NAME END SEEN: the client ended itself (summary line, non-zero
# exit) with an error or a loss, after the fault (SEEN: its marker existed
# when the client had ended) and within STALL + 30 s (STALL: the
# generator's --stall-limit, set by the scenario) of it (END: date +%s.%N
# then; the fault time is the faulting node's clock).
judge_fail() {
	local name=$1 end=$2 seen=$3 line dt why
	line=$(record "$name")
	why=$(sed -n 's/.*FAILED: //p' "$LAB/b.$name.out" | head -1)
	dt=$(awk -v a="$(cat "$LAB/$name.fault" 2>/dev/null || echo 0)" \
		-v b="$end" 'BEGIN { if (a > 0) printf "%.1f", b - a; else print "none" }')
	metric "gen.$name.fault_to_exit_s" "$dt"
	if [ -z "$line" ]; then
		check fail "$name.line" "no summary line: the generator hung or crashed"
	elif [ "$(field "$line" errors)" -gt 0 ] ||
		[ "$(field "$line" losses)" -gt 0 ]; then
		check pass "$name.line" "errors=$(field "$line" errors) losses=$(field "$line" losses): $why"
	else
		check fail "$name.line" "failed without counting an error: $line"
	fi
	if [ -z "$seen" ]; then
		check fail "$name.bounded" "the client failed before the fault: $why"
	elif awk -v d="$dt" -v l=$((STALL + 30)) 'BEGIN { exit !(d <= l) }'; then
		check pass "$name.bounded" "failed ${dt}s after the fault"
	else
		check fail "$name.bounded" "${dt}s after the fault (limit $((STALL + 30))s)"
	fi
}

