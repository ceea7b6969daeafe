# SPDX-License-Identifier: MIT
# demo: what tools/demo shows. Unmodified RDMA programs run across the two
# lab nodes over real kernel soft-RoCE: ibv_rc_pingpong on every rail, then
# ib_write_bw on rail 0. (Not part of the test suite: smoke covers this.)
# lab-timeout: 400

for ((r = 0; r < RAILS; r++)); do
	pair "rc_pingpong.rail$r" ok 120 18515 \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 500 -s 4096" \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 500 -s 4096 \$SERVER"
done
pair ib_write_bw.rail0 ok 180 18515 "$REPO/tests/lab/lib/perftest-retry ib_write_bw -d rxe0 -x 1 -n 1000" \
	"$REPO/tests/lab/lib/perftest-retry ib_write_bw -d rxe0 -x 1 -n 1000 \$SERVER"
