# SPDX-License-Identifier: MIT
# ctl: what r2cc-ctl shows of a failover, against what really happened.
# r2cc-gen runs under r2cc on rail 0 (job secret on both nodes, as in
# failover) and lingers after its summary so that r2cc-ctl reads the final
# counters. Carrier loss on node b's rail 0 for a few seconds mid-run:
# `rail show` on b reports rail 0 DOWN during the fault and ACTIVE after
# it; `conn show`, at the end, lists every QP moved back to rail 0 (rail
# 0 returned mid-run) and protected by rail 1 again, one failover each;
# `metrics` counts exactly the WRs (by opcode), receives and bytes the
# generator says it posted on each QP, and one failover each; `events`
# shows the rail's down and up, one failover per QP, caused locally on b
# and by the peer on a, and one failback per QP, rail 1 to rail 0. Then the eBPF injector on node a (`fault drop rxe0
# --after N --qpn Q --dir ingress`, Q one of a's QPs) black-holes one
# connection after exactly N packets: that QP alone migrates, its failover
# is a completion error (retry exceeded), and the generator verifies
# every byte (0 mismatches, duplicates, losses, errors) in both runs.
# lab-timeout: 600

SHIM=$BUILD/shim/libr2cc-shim.so
CTL=$BUILD/tools/r2cc-ctl
SECRET=/tmp/r2cc.secret
printf 'r2cc-lab-job-secret-%044d' 7 > "$SECRET"
chmod 600 "$SECRET"
QPS=4
LINGER=25
# --timeout 16 (268 ms, 7 tries: about 2 s): a black hole still shows
# within the stall limit, and a guest starved of CPU under TCG for half a
# second does not exhaust the retries before the fault.
GEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 -q $QPS --timeout 16 --stall-limit 10 --linger $LINGER"

. "$REPO/tests/lab/lib/gen.sh"

if [ "$RAILS" -lt 2 ]; then
	check fail rails "the ctl scenario needs 2 rails or more"
	return 0
fi
command -v jq > /dev/null || { check fail jq "jq is missing (tools/install-deps)"; return 0; }

# (R2CC_DETECT_MS=2000 keeps the generator's --timeout 16: 268 ms x 7)
r2cc_env() { # r2cc_env NAME: the environment of a program under r2cc
	echo "LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.$1.log" \
		"R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)" \
		"R2CC_DETECT_MS=2000"
}

# ctl_final NAME [UNTIL]: in the background, once this node's generator
# has printed its per-QP lines (its run is over, its QPs linger), what
# r2cc-ctl shows: $LAB/$NODE.NAME.{conn.json,metrics,events.json,events}.
# UNTIL, a jq filter on `conn show`: wait for it to hold first, for most
# of the linger at most (a move back after the run: under TCG a guest's
# "5 s" of carrier loss has lasted 13 s).
ctl_final() {
	local name=$1 until=${2:-true}
	(
		out=$LAB/$NODE.$name.out
		for i in $(seq 1800); do
			[ "$(grep -c '^r2cc-gen: qp=' "$out" 2>/dev/null)" -ge $QPS ] && break
			sleep 0.1
		done
		local end=$((SECONDS + LINGER - 6))
		while [ $SECONDS -lt $end ]; do
			"$CTL" -j conn show 2>/dev/null | jq -e --argjson n $QPS \
				"[.[] | select(.comm == \"r2cc-gen\")] | $until" \
				> /dev/null 2>&1 && break
			nap 1
		done
		"$CTL" -j conn show > "$LAB/$NODE.$name.conn.json" 2>&1
		"$CTL" metrics > "$LAB/$NODE.$name.metrics" 2>&1
		"$CTL" -j events > "$LAB/$NODE.$name.events.json" 2>&1
		"$CTL" events > "$LAB/$NODE.$name.events" 2>&1
	) &
	FINAL_PID=$!
}

# jqcheck NAME FILE [JQ_OPTIONS...] FILTER: a check that FILTER holds on
# FILE.
jqcheck() {
	local name=$1 file=$2
	shift 2
	if jq -e "$@" "$file" > /dev/null 2>&1; then
		check pass "$name"
	else
		check fail "$name" "$(head -c 600 "$file" 2>/dev/null)"
	fi
}

# has_line NAME FILE PATTERN: a check that FILE has a line with PATTERN.
has_line() {
	grep -q -- "$3" "$2" 2>/dev/null &&
		check pass "$1" "$(grep -m1 -- "$3" "$2" | cut -c1-200)" ||
		check fail "$1" "no \`$3' in $(basename "$2")"
}

# gen_ok NAME: the client's summary line shows a clean, verified run.
gen_ok() {
	local line
	[ "$NODE" = b ] || return 0
	line=$(record "$1")
	gen_clean "$line" &&
		check pass "$1.gen" "ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified)" ||
		check fail "$1.gen" "${line:-no summary line}"
}

# sel FAMILY [LABELS]: the value of FAMILY for r2cc-gen's QP $qpn in $m.
sel() { grep "^$1{.*comm=\"r2cc-gen\".*qpn=\"$qpn\"$2} " "$m" | awk '{ print $2 }'; }

# metrics_match NAME: per QP, the generator's own counts (its qp= lines)
# equal r2cc-ctl metrics' series for that QP, and its failovers are as
# FAILOVERS says ("QPN=COUNT ...", 0 for a QP not named).
metrics_match() { # metrics_match NAME FAILOVERS
	local name=$1 want_fo=$2 m=$LAB/$NODE.$1.metrics line qpn k v got
	local bad= n=0
	while read -r line; do
		qpn=$(field "$line" qpn)
		n=$((n + 1))
		for k in send send_imm write write_imm read; do
			got=$(sel r2cc_wr_posted_total ",op=\"$k\"")
			[ "$got" = "$(field "$line" $k)" ] ||
				bad="$bad qpn $qpn $k: gen $(field "$line" $k), ctl ${got:-none};"
		done
		got=$(sel r2cc_recv_posted_total)
		[ "$got" = "$(field "$line" recv)" ] ||
			bad="$bad qpn $qpn recv: gen $(field "$line" recv), ctl ${got:-none};"
		got=$(sel r2cc_wr_bytes_posted_total)
		[ "$got" = "$(field "$line" bytes)" ] ||
			bad="$bad qpn $qpn bytes: gen $(field "$line" bytes), ctl ${got:-none};"
		if [ -n "$want_fo" ]; then
			got=$(sel r2cc_failovers_total "")
			v=$(echo "$want_fo" | tr ' ' '\n' | sed -n "s/^$qpn=//p")
			[ "$got" = "${v:-0}" ] ||
				bad="$bad qpn $qpn failovers: ctl ${got:-none}, want ${v:-0};"
		fi
	done <<< "$(grep '^r2cc-gen: qp=' "$LAB/$NODE.$name.out")"
	if [ "$n" -eq $QPS ] && [ -z "$bad" ]; then
		check pass "$name.metrics" "$n QPs: WRs by opcode, receives, bytes, failovers equal"
	else
		check fail "$name.metrics" "$n QPs;$bad"
	fi
}

# ---- carrier loss on node b's rail 0, restored mid-run ----------------------
N=ctl.carrier
R2CC=$(r2cc_env $N)
carrier_off_5s() { fault_carrier 0 down; fault_mark; at 5; fault_carrier 0 up; }
if [ "$NODE" = b ]; then
	fault_midrun $N carrier_off_5s
	# rail show, polled once traffic flows (one process per poll: the
	# guest's one CPU is shared with the run): "seconds state" of rxe0/1
	: > "$LAB/b.$N.rails"
	(
		for i in $(seq 600); do
			grep -q '^r2cc-gen: progress' "$LAB/b.$N.out" 2>/dev/null && break
			sleep 0.1
		done
		for i in $(seq 200); do
			[ -e "$LAB/b.$N.rails.stop" ] && break
			j=$("$CTL" -j rail show rxe0/1 2>/dev/null)
			[[ $j =~ \"state\":\"([A-Z_]+)\" ]] && s=${BASH_REMATCH[1]} || s=none
			echo "$(date +%s.%N) $s" >> "$LAB/b.$N.rails"
			sleep 0.5
		done
	) &
	RAILS_PID=$!
fi
ctl_final $N 'length == $n and all(.[]; .protection == "ready")'
pair $N ok 150 18600 "$R2CC $GEN -i 1" "$R2CC $GEN -t 25 -i 1 \$SERVER"
wait "$FINAL_PID"
if [ "$NODE" = b ]; then
	wait "$FAULT_PID"
	wait_port_active 0 30
	sleep 2
	touch "$LAB/b.$N.rails.stop"
	wait "$RAILS_PID"
	# DOWN after the fault's time, then ACTIVE after that
	verdict=$(awk -v f="$(cat "$LAB/$N.fault" 2>/dev/null || echo 0)" '
		f > 0 && $1 >= f && $2 == "DOWN" && !d { d = $1 }
		d && $1 > d && $2 == "ACTIVE" && !u { u = $1 }
		END { if (d && u) printf "down %.1fs after the fault, up %.1fs later", d - f, u - d; else print "no" }' \
		"$LAB/b.$N.rails")
	[ "$verdict" != no ] && check pass $N.rail-show "$verdict" ||
		check fail $N.rail-show "$(uniq -f1 "$LAB/b.$N.rails" | head -8 | tr '\n' ';')"
	fault_clear 0
	wait_port_active 0 30
fi
gen_ok $N
# (rail 0 came back mid-run: after the hold the QPs moved back to it and
# are protected by rail 1 again)
jqcheck $N.conn "$LAB/$NODE.$N.conn.json" --argjson n $QPS \
	'[.[] | select(.comm == "r2cc-gen")] | length == $n and
	all(.[]; .dev == "rxe0" and .protection == "ready" and
		.backup_rail == 1 and .backup_qpn > 0 and .failovers == 1)'
fo=$(jq -r '[.[] | select(.comm == "r2cc-gen") | "\(.qpn)=1"] | join(" ")' \
	"$LAB/$NODE.$N.conn.json" 2>/dev/null)
metrics_match $N "$fo"
# events: sorted by time; one failover per QP, rail 0 -> 1, with replay
# figures; b saw it itself (carrier, port event or an error completion),
# a was told by the peer; b also shows rail 0 going down and up.
ev=$LAB/$NODE.$N.events.json
jqcheck $N.events.sorted "$ev" '[.[].time] == ([.[].time] | sort) and length > 0'
jqcheck $N.events.failover "$ev" --argjson n $QPS \
	'[.[] | select(.comm == "r2cc-gen" and .event == "failover")] |
	length == $n and ([.[].qpn] | unique | length) == $n and
	all(.[]; .rail == 0 and .dev == "rxe0" and .to_rail == 1 and
		.to_dev == "rxe1" and .replayed_wrs >= 0 and .replayed_bytes >= 0)'
jqcheck $N.events.failback "$ev" --argjson n $QPS \
	'[.[] | select(.comm == "r2cc-gen" and .event == "failback")] |
	length == $n and ([.[].qpn] | unique | length) == $n and
	all(.[]; .rail == 1 and .to_rail == 0 and .to_dev == "rxe0")'
if [ "$NODE" = b ]; then
	jqcheck $N.events.cause "$ev" '[.[] | select(.event == "failover")] |
		all(.[]; .cause == "carrier" or .cause == "port event" or
			.cause == "cq error")'
	jqcheck $N.events.rail "$ev" \
		'[.[] | select(.event == "rail" and .dev == "rxe0") | .state] |
		index("down") != null and (.[index("down"):] | index("up")) != null'
else
	jqcheck $N.events.cause "$ev" '[.[] | select(.event == "failover")] |
		all(.[]; .cause == "peer")'
fi
has_line $N.events.text "$LAB/$NODE.$N.events" ' failover '
barrier $N.cleared 60

# ---- the eBPF injector: one QP black-holed after N packets ------------------
N=ctl.drop
AFTER=50
R2CC=$(r2cc_env $N)
if [ "$NODE" = a ]; then
	# Once traffic flows: a's first r2cc-gen QP on rxe0, as conn show
	# lists it, loses every packet sent to it after the next AFTER.
	(
		for i in $(seq 600); do
			grep -q '^r2cc-gen: progress' "$LAB/a.$N.out" 2>/dev/null && break
			sleep 0.1
		done
		for i in $(seq 50); do
			q=$("$CTL" -j conn show 2>/dev/null | jq -r '[.[] |
				select(.comm == "r2cc-gen" and .dev == "rxe0" and
				.protection == "ready") | .qpn] | min // empty')
			[ -n "$q" ] && break
			sleep 0.2
		done
		echo "${q:-none}" > "$LAB/$N.qpn"
		[ -n "$q" ] && bounded 60 "$CTL" fault drop rxe0 --after $AFTER \
			--qpn "$q" --dir ingress > "$LAB/a.$N.install.ctl" 2>&1
		echo "rc=$?" >> "$LAB/a.$N.install.ctl"
	) &
	DROP_PID=$!
fi
ctl_final $N
pair $N ok 150 18600 "$R2CC $GEN -i 1" "$R2CC $GEN -t 20 -i 1 \$SERVER"
wait "$FINAL_PID"
Q=$(cat "$LAB/$N.qpn" 2>/dev/null)
if [ "$NODE" = a ]; then
	wait "$DROP_PID"
	grep -q '^rc=0' "$LAB/a.$N.install.ctl" &&
		check pass $N.install "fault drop rxe0 --after $AFTER --qpn $Q --dir ingress" ||
		check fail $N.install "qpn $Q: $(head -c 300 "$LAB/a.$N.install.ctl")"
	bounded 60 "$CTL" -j fault show rxe0 > "$LAB/a.$N.fault.json" 2>&1
	jqcheck $N.counters "$LAB/a.$N.fault.json" --argjson a $AFTER --argjson q "${Q:-0}" \
		'.[0].qpn == $q and .[0].passed == $a and .[0].dropped > 0 and
		.[0].seen == .[0].passed + .[0].dropped'
	metric $N.dropped "$(jq -r '.[0].dropped' "$LAB/a.$N.fault.json" 2>/dev/null)"
	bounded 60 "$CTL" fault clear rxe0 > /dev/null 2>&1 ||
		check fail $N.clear "fault clear rxe0 failed"
	# Only Q moved, to rail 1.
	jqcheck $N.conn "$LAB/a.$N.conn.json" --argjson q "${Q:-0}" \
		'[.[] | select(.comm == "r2cc-gen")] |
		([.[] | select(.protection == "migrated")] | length == 1) and
		any(.[]; .qpn == $q and .protection == "migrated" and
			.backup_rail == 1 and .failovers == 1)'
	fo="$Q=1"
	want='.qpn == $q'
else
	# b's QP connected to Q moved.
	jqcheck $N.conn "$LAB/b.$N.conn.json" --argjson q "${Q:-0}" \
		'[.[] | select(.comm == "r2cc-gen")] |
		([.[] | select(.protection == "migrated")] | length == 1) and
		any(.[]; .peer_qpn == $q and .protection == "migrated" and
			.backup_rail == 1 and .failovers == 1)'
	fo="$(jq -r --argjson q "${Q:-0}" '.[] | select(.peer_qpn == $q) | .qpn' \
		"$LAB/b.$N.conn.json" 2>/dev/null)=1"
	want=".qpn == ${fo%=1}"
fi
metrics_match $N "$fo"
# One failover, of that QP, rail 0 -> 1: detected by a completion error on
# one side (both sides' requests to the black hole go unanswered; which
# side runs out of retries first is a race), told by the peer on the other.
ev=$LAB/$NODE.$N.events.json
jqcheck $N.events.failover "$ev" --argjson q "${Q:-0}" \
	"[.[] | select(.comm == \"r2cc-gen\" and .event == \"failover\")] |
	length == 1 and all(.[]; $want and .rail == 0 and .to_rail == 1 and
		(.cause == \"cq error\" or .cause == \"peer\"))"
jq -r '[.[] | select(.event == "failover") | .cause] | first // "none"' \
	"$ev" > "$LAB/$NODE.$N.cause" 2>/dev/null
has_line $N.events.text "$LAB/$NODE.$N.events" ' failover '
gen_ok $N
barrier $N.causes 60
if [ "$NODE" = b ]; then
	c="a: $(cat "$LAB/a.$N.cause"), b: $(cat "$LAB/b.$N.cause")"
	case "$c" in
	*"cq error"*peer* | *peer*"cq error"* | *"cq error"*"cq error"*)
		check pass $N.cause "$c" ;;
	*) check fail $N.cause "$c (want a completion error on one side)" ;;
	esac
	grep -h 'retry counter exceeded: failing over' "$LAB/a.$N.log" \
		"$LAB/b.$N.log" 2>/dev/null | grep -q . &&
		check pass $N.retry-exceeded "$(grep -h -m1 'failing over' "$LAB/a.$N.log" "$LAB/b.$N.log" | head -1 | cut -c1-160)" ||
		check fail $N.retry-exceeded "$(grep -h -E 'failing over|fenced' "$LAB/a.$N.log" "$LAB/b.$N.log" | head -3)"
fi
barrier $N.cleared 60
