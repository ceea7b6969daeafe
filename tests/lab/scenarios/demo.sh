# SPDX-License-Identifier: MIT
# demo: what tools/demo shows. Unmodified RDMA programs run across the two
# lab nodes over real kernel soft-RoCE: ibv_rc_pingpong on every rail, then
# ib_write_bw on rail 0 with libr2cc-shim.so preloaded on both sides, and
# what the shim saw. (Not part of the test suite: smoke and compat cover it.)
# lab-timeout: 400

for ((r = 0; r < RAILS; r++)); do
	pair "rc_pingpong.rail$r" ok 120 18515 \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 500 -s 4096" \
		"ibv_rc_pingpong -d $(rail_ibdev $r) -g 1 -n 500 -s 4096 \$SERVER"
done
SHIM=$BUILD/shim/libr2cc-shim.so
BW="$REPO/tests/lab/lib/perftest-retry ib_write_bw -d rxe0 -x 1 -n 1000"
ST=/tmp/r2cc.stats
pair ib_write_bw.rail0.with-r2cc ok 180 18515 \
	"LD_PRELOAD=$SHIM R2CC_STATS=$ST $BW" \
	"LD_PRELOAD=$SHIM R2CC_STATS=$ST $BW \$SERVER; rc=\$?; echo; echo '== what r2cc saw (R2CC_STATS):'; cat $ST; exit \$rc"
