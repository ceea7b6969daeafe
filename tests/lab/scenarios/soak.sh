# SPDX-License-Identifier: MIT
# soak: a long run (tests/lab/soak MINUTES; not part of the test command).
# r2cc-gen with 8 QPs runs under r2cc across four rails for the whole
# time, every byte verified, while node b meets one fault after another:
# a random kind (carrier down, black hole on b's egress, a flap, 30 %
# loss), on a random rail, for 5-15 s, every 20-40 s, each cleared
# before the next. Ends with the totals: faults by kind, QPs moved and
# moved back, bytes verified, and no mismatch, duplicate, loss, order
# error or error, no stall past the generator's bound; and the
# generator's memory each minute on both nodes, which must not grow
# past a bound from the first minute to the last.
# lab-rails: 4
# lab-timeout: 1500

. "$REPO/tests/lab/lib/fo.sh"

MIN=$(cat "$BUILD/lab/soak.minutes" 2> /dev/null || echo 20)
SECS=$((MIN * 60))
QPS=8
STALL=20
# growth of r2cc-gen's resident memory from the first minute's sample to
# the last's that still passes (logs grow to the queues' depth early)
RSS_GROWTH_KB=$((16 * 1024))
LOGF=$LAB/$NODE.soak.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOGF"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev) R2CC_DETECT_MS=2000"
SGEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 -q $QPS --timeout 16 --stall-limit $STALL"

# the generator's VmRSS (kB) every minute while it runs
(
	for i in $(seq $((MIN + 5))); do
		nap 60
		pid=$(pgrep -x r2cc-gen | head -1)
		[ -n "$pid" ] || continue
		awk -v t="$i" '/^VmRSS/ { print t, $2 }' "/proc/$pid/status" \
			>> "$LAB/$NODE.soak.rss" 2> /dev/null
	done
) &
RSS_PID=$!

if [ "$NODE" = b ]; then
	(
		nap 30 # the QPs protected and running
		end=$((SECONDS + SECS - 90))
		while [ $SECONDS -lt $end ]; do
			rail=$((RANDOM % RAILS))
			hold=$((5 + RANDOM % 11))
			case $((RANDOM % 4)) in
			0) kind=carrier; fault_carrier "$rail" down ;;
			1) kind=blackhole; fault_blackhole "$rail" ;;
			2) kind=flap; fault_flap "$rail" "down 1 up 1 down 1 up 0" ;;
			3) kind=loss; fault_loss "$rail" 30 ;;
			esac
			echo "$(date +%s) $kind $rail $hold" >> "$LAB/b.soak.faults"
			log "soak: $kind on rail $rail for ${hold}s"
			nap "$hold"
			fault_clear "$rail"
			wait_port_active "$rail" 30 || log "soak: rail $rail not ACTIVE again"
			nap $((20 + RANDOM % 21))
		done
	) &
	FAULT_PID=$!
fi
pair soak ok $((SECS + 300)) 18600 "$R2CC $SGEN -i 1" \
	"$R2CC $SGEN -t $SECS -i 1 \$SERVER"
[ "$NODE" = b ] && wait "$FAULT_PID"
kill "$RSS_PID" 2> /dev/null

life_check soak "$LOGF"
moved=$(grep -c 'moved to backup QP' "$LOGF")
back=$(grep -c 'moved back to' "$LOGF")
metric "soak.$NODE.moves" "$moved"
metric "soak.$NODE.moves_back" "$back"
rss=$(awk 'NR == 1 { f = $2 } { l = $2 } END { if (NR) print f, l }' "$LAB/$NODE.soak.rss" 2> /dev/null)
if [ -n "$rss" ]; then
	set -- $rss
	metric "soak.$NODE.rss_first_kb" "$1"
	metric "soak.$NODE.rss_last_kb" "$2"
	[ $(($2 - $1)) -le $RSS_GROWTH_KB ] &&
		check pass "soak.$NODE.memory" "r2cc-gen ${1} kB at the first minute, ${2} kB at the last ($(wc -l < "$LAB/$NODE.soak.rss") samples)" ||
		check fail "soak.$NODE.memory" "r2cc-gen ${1} kB at the first minute, ${2} kB at the last (bound +${RSS_GROWTH_KB} kB)"
else
	check fail "soak.$NODE.memory" "no sample"
fi
if [ "$NODE" = b ]; then
	for k in carrier blackhole flap loss; do
		metric "soak.faults.$k" "$(grep -c " $k " "$LAB/b.soak.faults" 2> /dev/null)"
	done
	metric soak.faults "$(wc -l < "$LAB/b.soak.faults" 2> /dev/null)"
	line=$(record soak)
	if gen_clean "$line" && [ "$(field "$line" longest_stall_ms)" -le $((STALL * 1000)) ]; then
		check pass soak.gen "$(wc -l < "$LAB/b.soak.faults") faults in ${MIN} min; $moved moves, $back moves back here; ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified) longest_stall_ms=$(field "$line" longest_stall_ms)"
	else
		check fail soak.gen "${line:-no summary line}"
	fi
fi
barrier soak.end 120
