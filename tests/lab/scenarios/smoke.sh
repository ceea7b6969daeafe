# SPDX-License-Identifier: MIT
# smoke: unmodified ibv_rc_pingpong across the nodes on every rail, then
# unmodified perftest (write, read, send bandwidth) on rail 0. perftest
# runs with -F: under TCG its clock calibration fails now and then, and
# only -F makes that a report of 0 rather than an exit of one end (the
# other then waits for an exchange that never comes).
# lab-timeout: 400

for ((r = 0; r < RAILS; r++)); do
	pair "rc_pingpong.rail$r" ok 120 18515 \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 200 -s 4096" \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 200 -s 4096 \$SERVER"
done

for t in write read send; do
	pair "ib_${t}_bw.rail0" ok 180 18515 \
		"ib_${t}_bw -F -d rxe0 -x 1 -n 200 -s 65536" \
		"ib_${t}_bw -F -d rxe0 -x 1 -n 200 -s 65536 \$SERVER"
done
