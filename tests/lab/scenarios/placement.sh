# SPDX-License-Identifier: MIT
# placement: with three rails, backups spread over the two that are not the
# primary's, and both ends of every connection put its backups on the same
# rail (a rail-optimised fabric joins rail i of one node to rail i of the
# others only). Node b first runs an unrelated protected job on itself (an
# ibv_rc_pingpong pair over rail 0's loopback): placement weighs the node's
# backups, so b's view of the load differs from a's, and where the two
# ends' choices differ the end with the lower (GID, QPN) keeps its rail and
# the other remakes its backup there. Then r2cc-gen with 6 QPs, rail 0
# killed on b mid-run: every QP moves to its own backup rail, every byte
# verified.
# lab-rails: 3
# lab-timeout: 400

SHIM=$BUILD/shim/libr2cc-shim.so
CTL=$BUILD/tools/r2cc-ctl
SECRET=/tmp/r2cc.secret
printf 'r2cc-lab-job-secret-%044d' 7 > "$SECRET"
chmod 600 "$SECRET"
QPS=6
N=place
LOG=$LAB/$NODE.$N.log
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LOG"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"
GEN="$BUILD/tools/r2cc-gen -d $(rail_ibdev 0) -g 1 -p 18600 -s 8192 -q $QPS --stall-limit 10"

. "$REPO/tests/lab/lib/gen.sh"

# The unrelated job on b, running through the whole case.
if [ "$NODE" = b ]; then
	PP="ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -p 18700 -n 100000000 -s 64"
	bash -c "$R2CC R2CC_LOG_FILE=$LAB/b.$N.lo.log $PP" > "$LAB/b.$N.lo-srv.out" 2>&1 &
	LO_SRV=$!
	wait_listen 18700 30
	bash -c "$R2CC R2CC_LOG_FILE=$LAB/b.$N.lo.log $PP localhost" > "$LAB/b.$N.lo-cli.out" 2>&1 &
	LO_CLI=$!
	# both of its QPs protected before the generator starts
	for i in $(seq 100); do
		[ "$(grep -c 'protected: backup QP' "$LAB/b.$N.lo.log" 2>/dev/null)" -ge 2 ] && break
		sleep 0.2
	done
	"$CTL" -j conn show > "$LAB/b.$N.lo.json" 2>&1
	if jq -e '[.[] | select(.comm == "ibv_rc_pingpong")] | length == 2 and
		(map(.backup_rail) | unique | length) == 1' \
		"$LAB/b.$N.lo.json" > /dev/null 2>&1; then
		check pass $N.loopback.agreed "$(jq -c '[.[] | {qpn, peer_qpn, backup_rail}]' "$LAB/b.$N.lo.json")"
	else
		check fail $N.loopback.agreed "$(head -c 400 "$LAB/b.$N.lo.json")"
	fi
fi
barrier $N.lo.up 60

# conn show of the generator once all its QPs are protected, on both nodes
(
	for i in $(seq 240); do
		"$CTL" -j conn show > "$LAB/$NODE.$N.conn.json" 2>&1
		jq -e --argjson n $QPS '[.[] | select(.comm == "r2cc-gen" and
			.protection == "ready")] | length == $n' \
			"$LAB/$NODE.$N.conn.json" > /dev/null 2>&1 && break
		sleep 0.25
	done
) &
CONN_PID=$!
[ "$NODE" = b ] && fault_midrun $N fault_carrier 0 down
pair $N ok 150 18600 "$R2CC $GEN -i 1" "$R2CC $GEN -t 25 -i 1 \$SERVER"
wait "$CONN_PID"
if [ "$NODE" = b ]; then
	wait "$FAULT_PID"
	fault_clear 0
	wait_port_active 0 30
	line=$(record $N)
	gen_clean "$line" &&
		check pass $N.gen "ops=$(field "$line" ops) bytes_verified=$(field "$line" bytes_verified)" ||
		check fail $N.gen "${line:-no summary line}"
	pkill -f "ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -p 18700"
	wait "$LO_CLI" "$LO_SRV" 2> /dev/null
fi
# this node's view: which backup rail each connection got
jq -c '[.[] | select(.comm == "r2cc-gen") | {qpn, peer_qpn, backup_rail}]' \
	"$LAB/$NODE.$N.conn.json" > "$LAB/$NODE.$N.rails.json" 2>/dev/null
barrier $N.views 60
if [ "$NODE" = b ]; then
	# the same rail at both ends (a's QP qpn is b's peer_qpn), and both
	# spare rails in use
	if jq -e -n --slurpfile a "$LAB/a.$N.rails.json" \
		--slurpfile b "$LAB/b.$N.rails.json" --argjson n $QPS '
		($a[0] | length) == $n and ($b[0] | length) == $n and
		all($b[0][]; . as $q | any($a[0][]; .qpn == $q.peer_qpn and
			.backup_rail == $q.backup_rail))' > /dev/null 2>&1; then
		check pass $N.agreed "$(cat "$LAB/b.$N.rails.json")"
	else
		check fail $N.agreed "a: $(cat "$LAB/a.$N.rails.json") b: $(cat "$LAB/b.$N.rails.json")"
	fi
	spread=$(jq -r '[.[].backup_rail] | unique | map(tostring) | join(",")' "$LAB/b.$N.rails.json" 2>/dev/null)
	[ "$spread" = "1,2" ] && check pass $N.spread "backup rails $spread" ||
		check fail $N.spread "backup rails ${spread:-none}"
fi
moved=$(grep -c 'moved to backup QP' "$LOG")
[ "$moved" = $QPS ] && check pass $N.moved "$moved QPs; rails: $(sed -n 's/.*moved to backup QP .* (rail \([0-9]*\)).*/\1/p' "$LOG" | sort | uniq -c | awk '{ printf "%s%d to rail %d", (NR > 1 ? ", " : ""), $1, $2 }')" ||
	check fail $N.moved "$moved QPs moved: $(grep -E 'fenced|abandon|unprotected' "$LOG" | head -3)"
metric $N.$NODE.agreement_moves "$(cat "$LOG" "$LAB/$NODE.$N.lo.log" 2>/dev/null | grep -c 'backup moved from rail')"
barrier $N.cleared 60
