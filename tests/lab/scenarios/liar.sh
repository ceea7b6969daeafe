# SPDX-License-Identifier: MIT
# liar: a process that holds the job key and lies on the control channel
# (tests/progs/ctrl_liar.c), against a protected r2cc-gen pair. Once the
# pair's 4 QPs are protected, node a's liar finds the owner of b's QPs
# through b's rendezvous and plays every case: lookups of QPs nobody
# owns, connections that never say HELLO, a bad MAC, bytes that are no
# frame, a frame replayed, every message about b's QP as a process that
# is not its peer, a flood of BATCHes at line rate, and 500 sender ids.
# Then rail 0 goes down on b. Judged: each case's outcome as the liar
# saw it (answers, connections closed within their bound); on b, the
# QPs untouched by the lies (still protected, none moved), the refusals
# counted (r2cc-ctl stats) and their log lines bounded, the generator's
# memory growth, and the failover after the lies exact: every QP moved,
# every byte verified, no error, loss or duplicate.
# lab-timeout: 600

. "$REPO/tests/lab/lib/fo.sh"

LIAR=$BUILD/tests/progs/ctrl_liar
LOGF=$LAB/$NODE.liar.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOGF"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev) R2CC_DETECT_MS=2000"
CASES="lookup silent badmac garbage replay qp flood peers"
# b's r2cc-gen may grow by the liar's messages queued at once (the
# inbox's bound, migrate/inbox.h, is 64 MiB) and no more
RSS_MAX_KB=$((80 * 1024))

if [ "$RAILS" -lt 2 ]; then
	check fail rails "the liar scenario needs 2 rails or more"
	return 0
fi

# ready_view FILE: r2cc-ctl's view of this node's QPs once all 4 are
# protected (or after 2 minutes): 0 when they were.
ready_view() {
	local i
	for i in $(seq 240); do
		"$CTL" -j conn show > "$1" 2> /dev/null
		# (jq 1.6 -e passes an empty input)
		[ -s "$1" ] && jq -e 'length == 4 and all(.[]; .protection == "ready")' \
			"$1" > /dev/null 2>&1 && return 0
		nap 0.5
	done
	return 1
}
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2> /dev/null; }

if [ "$NODE" = a ]; then
	(
		ready_view "$LAB/a.liar.conn.json" ||
			log "liar: a's QPs not all protected"
		barrier liar.measured 180
		q=$(jq -r '.[0].peer_qpn' "$LAB/a.liar.conn.json")
		c=$(jq -r '.[0].qpn' "$LAB/a.liar.conn.json")
		bounded 240 "$LIAR" -k "$SECRET" -r "$(mgmt_ip b)" -q "$q" \
			-g "$(rail_ip b 0)" -c "$c" -G "$(rail_ip a 0)" $CASES \
			> "$LAB/a.liar.lies" 2>&1
		echo $? > "$LAB/a.liar.rc"
		: > "$LAB/liar.lied"
	) &
	BG_PID=$!
else
	(
		ready_view "$LAB/b.liar.before.json" ||
			log "liar: b's QPs not all protected"
		gpid=$(pgrep -x r2cc-gen | head -1)
		rss_kb "$gpid" > "$LAB/b.liar.rss0"
		barrier liar.measured 180
		for i in $(seq 3000); do
			[ -e "$LAB/liar.lied" ] && break
			nap 0.1
		done
		nap 2
		rss_kb "$gpid" > "$LAB/b.liar.rss1"
		"$CTL" -j conn show > "$LAB/b.liar.after.json" 2>&1
		"$CTL" -j stats > "$LAB/b.liar.stats.json" 2>&1
		fault_now liar fault_carrier 0 down
		nap 15
		pkill -INT -x r2cc-gen
	) &
	BG_PID=$!
fi
pair liar ok 500 18600 "$R2CC $GEN -q 4 -i 1" \
	"$R2CC $GEN -q 4 -t 400 -i 1 \$SERVER"
wait "$BG_PID"

if [ "$NODE" = a ]; then
	for c in $CASES; do
		line=$(grep -m1 "^ctrl_liar: $c " "$LAB/a.liar.lies")
		case $line in
		*" PASS "*) check pass "liar.$c" "${line#*PASS }" ;;
		*) check fail "liar.$c" "${line:-no line: $(tail -2 "$LAB/a.liar.lies" | tr '\n' ' ')}" ;;
		esac
	done
	[ "$(cat "$LAB/a.liar.rc" 2> /dev/null)" = 0 ] ||
		check fail liar.exit "exit $(cat "$LAB/a.liar.rc" 2> /dev/null)"
	moved_check liar.a "$LOGF"
	barrier liar.cleared 120
	return 0
fi

fault_clear 0
wait_port_active 0 30
# the lies moved nothing and unprotected nothing
if jq -e 'length == 4 and all(.[]; .protection == "ready" and .moves == 0)' \
	"$LAB/b.liar.after.json" > /dev/null 2>&1; then
	check pass liar.untouched "4 QPs still protected on their rail, none moved"
else
	check fail liar.untouched "$(jq -c '[.[] | {qpn, protection, moves, unprotected}]' "$LAB/b.liar.after.json" 2>&1 | head -c 400)"
fi
# the refusals counted
refused=$(jq '.[0].ctrl_frames_refused' "$LAB/b.liar.stats.json" 2> /dev/null)
dropped=$(jq '.[0].ctrl_messages_dropped' "$LAB/b.liar.stats.json" 2> /dev/null)
metric liar.frames_refused "${refused:-none}"
metric liar.messages_dropped "${dropped:-none}"
flooded=$(sed -n 's/^ctrl_liar: flood .* messages=\([0-9]*\) .*/\1/p' "$LAB/a.liar.lies")
metric liar.messages_flooded "${flooded:-none}"
# (the badmac and garbage frames; the flood's messages and those of the
# qp case that r2cc does not take from a process not the QP's peer)
if [ "${refused:-0}" -ge 2 ] && [ "${dropped:-0}" -ge $((${flooded:-0} + 5)) ] &&
	[ "${flooded:-0}" -gt 0 ]; then
	check pass liar.counted "frames refused $refused, messages dropped $dropped (flooded $flooded)"
else
	check fail liar.counted "frames refused ${refused:-none}, messages dropped ${dropped:-none} (flooded ${flooded:-none})"
fi
# their log lines bounded: R2CC_LOG_BURST (10) a kind in 10 s, the
# burst's last saying that more are held back (the count of those comes
# with the next window's first line, if any comes)
lines=$(grep -c 'for an unknown QP\|control frame dropped' "$LOGF")
metric liar.log_lines "$lines"
if [ "$lines" -ge 1 ] && [ "$lines" -le 60 ] &&
	grep -q 'more of these held back for up to' "$LOGF"; then
	check pass liar.logged "$lines lines, the rest held back and counted"
else
	check fail liar.logged "$lines lines of refusals in b's log"
fi
rss0=$(cat "$LAB/b.liar.rss0" 2> /dev/null)
rss1=$(cat "$LAB/b.liar.rss1" 2> /dev/null)
if [ -n "$rss0" ] && [ -n "$rss1" ]; then
	metric liar.rss_growth_kb $((rss1 - rss0))
	[ $((rss1 - rss0)) -le $RSS_MAX_KB ] &&
		check pass liar.memory "r2cc-gen ${rss0} kB before the lies, ${rss1} kB after" ||
		check fail liar.memory "r2cc-gen ${rss0} kB before, ${rss1} kB after (bound +${RSS_MAX_KB} kB)"
else
	check fail liar.memory "no RSS read (${rss0:-none}, ${rss1:-none})"
fi
line=$(record liar)
if gen_clean "$line"; then
	check pass liar.gen "ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified) longest_stall_ms=$(field "$line" longest_stall_ms)"
else
	check fail liar.gen "${line:-no summary line}"
fi
moved_check liar.b "$LOGF"
barrier liar.cleared 120
