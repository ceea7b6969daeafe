# SPDX-License-Identifier: MIT
# failover: r2cc protects the program's RC connections and moves them to a
# backup rail when their rail dies (DESIGN §4-6). So far: binding — under
# the shim, with a job secret on both nodes, every RC QP an unmodified
# program connects on rail 0 gets a backup QP on rail 1 bound to the peer's
# over the control channel (r2cc-ctl shows it "ready"); without a secret
# the same program runs unprotected and unharmed.
# lab-timeout: 400

SHIM=$BUILD/shim/libr2cc-shim.so
CTL=$BUILD/tools/r2cc-ctl
SECRET=/tmp/r2cc.secret
# Every node holds the same job secret, readable by its owner only.
printf 'r2cc-lab-job-secret-%044d' 7 > "$SECRET"
chmod 600 "$SECRET"
PP="ibv_rc_pingpong -d $(rail_ibdev 0) -g 1 -n 4000 -s 1024"
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.fo.bind.log"
R2CC="$R2CC R2CC_SECRET_FILE=$SECRET R2CC_CTRL_IF=$(mgmt_dev)"

# ctl_midrun NAME: once the program runs, r2cc-ctl's view of it, in JSON.
ctl_midrun() {
	(
		for i in $(seq 300); do
			pgrep -x ibv_rc_pingpong > /dev/null && break
			sleep 0.1
		done
		sleep 4
		"$CTL" -j conn show > "$LAB/$NODE.$1.conn.json" 2>&1
		"$CTL" metrics > "$LAB/$NODE.$1.metrics" 2>&1
	) &
	CTL_PID=$!
}

ctl_midrun fo.bind
pair fo.bind ok 200 18515 "$R2CC $PP" "$R2CC $PP \$SERVER"
wait "$CTL_PID"
if jq -e 'any(.[]; .dev == "rxe0" and .protection == "ready" and
	.backup_rail == 1 and .backup_qpn > 0)' "$LAB/$NODE.fo.bind.conn.json" \
	> /dev/null; then
	check pass fo.bind.ctl "$(jq -c '[.[] | {qpn, dev, protection, backup_rail, backup_qpn}]' "$LAB/$NODE.fo.bind.conn.json")"
else
	check fail fo.bind.ctl "$(head -c 600 "$LAB/$NODE.fo.bind.conn.json")"
fi
grep -q '^r2cc_qp_protected{.*dev="rxe0".*} 1$' "$LAB/$NODE.fo.bind.metrics" &&
	check pass fo.bind.metrics "r2cc_qp_protected 1" ||
	check fail fo.bind.metrics "see $NODE.fo.bind.metrics"
grep -q 'protected: backup QP' "$LAB/$NODE.fo.bind.log" &&
	check pass fo.bind.log "$(grep -m1 'protected: backup QP' "$LAB/$NODE.fo.bind.log" | cut -c1-160)" ||
	check fail fo.bind.log "$(grep -E 'unprotected|control|secret' "$LAB/$NODE.fo.bind.log" | head -3)"

# No secret: no control channel; the program is unaffected.
R2CC="LD_PRELOAD=$SHIM R2CC_LOG=info R2CC_LOG_FILE=$LAB/$NODE.fo.nokey.log"
pair fo.nokey ok 200 18516 "$R2CC ${PP/-n 4000/-n 200 -p 18516}" \
	"$R2CC ${PP/-n 4000/-n 200 -p 18516} \$SERVER"
grep -q 'no R2CC_SECRET_FILE' "$LAB/$NODE.fo.nokey.log" &&
	check pass fo.nokey.log "unprotected, said once" ||
	check fail fo.nokey.log "$(head -5 "$LAB/$NODE.fo.nokey.log")"
