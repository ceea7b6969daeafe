# SPDX-License-Identifier: MIT
# smoke: unmodified ibv_rc_pingpong across the nodes on every rail, then
# unmodified perftest (write, read, send bandwidth) on rail 0.
# lab-timeout: 400

for ((r = 0; r < RAILS; r++)); do
	pair "rc_pingpong.rail$r" ok 120 18515 \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 200 -s 4096" \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 200 -s 4096 \$SERVER"
done

for t in write read send; do
	pair "ib_${t}_bw.rail0" ok 180 18515 \
		"$REPO/tests/lab/lib/perftest-retry ib_${t}_bw -d rxe0 -x 1 -n 200 -s 65536" \
		"$REPO/tests/lab/lib/perftest-retry ib_${t}_bw -d rxe0 -x 1 -n 200 -s 65536 \$SERVER"
done
