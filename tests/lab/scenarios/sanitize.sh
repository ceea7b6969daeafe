# SPDX-License-Identifier: MIT
# sanitize: the shim built with AddressSanitizer and UBSan (the test
# command's ASan build, build-asan beside the build, or R2CC_SAN_BUILD)
# inside the unmodified r2cc-gen, preloaded after the ASan runtime, with
# every report fatal and leaks checked at exit: failover's moves under
# it on rails 0 and 1 (R2CC_RAILS) — carrier down on b, a black hole on
# a's egress, a flap on b, and QPs on an SRQ with carrier down on b —
# then multirail's cases on four rails (a standby's rail dies, then the
# QPs' own; every rail dies). Each case judged as in its own scenario,
# and no sanitizer report on either node.
# lab-rails: 4
# lab-timeout: 1200

SAN=${R2CC_SAN_BUILD:-$BUILD-asan}
if [ ! -e "$SAN/shim/libr2cc-shim.so" ]; then
	check fail san.build "no $SAN/shim/libr2cc-shim.so: build it with meson setup $SAN -Db_sanitize=address,undefined -Db_lundef=false (tests/check does)"
	return 0
fi
# the ASan runtime the sanitized shim was linked against comes first
ASAN_RT=$(ldd "$SAN/shim/libr2cc-shim.so" | awk '/libasan/ { print $3 }')
if [ ! -e "$ASAN_RT" ]; then
	check fail san.runtime "the shim in $SAN names no ASan runtime"
	return 0
fi
SAN_SHIM="$ASAN_RT:$SAN/shim/libr2cc-shim.so"
REP=$LAB/$NODE.san
# every program of the scenario gets them; only the sanitized ones read
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:log_path=$REP.asan"
export LSAN_OPTIONS="suppressions=$REPO/tests/lab/lsan.supp"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$REP.ubsan"

. "$REPO/tests/lab/lib/fo.sh"

FO_ENV="R2CC_RAILS=$(rail_ibdev 0),$(rail_ibdev 1)"

gen_fo san.carrier b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier san.carrier.cleared 60

gen_fo san.blackhole a fault_blackhole 0
[ "$NODE" = a ] && fault_clear 0
barrier san.blackhole.cleared 60

gen_fo san.flap b fault_flap 0 "down 1 up 1 down 0"
[ "$NODE" = b ] && { sleep 3; fault_clear 0; wait_port_active 0 30; }
barrier san.flap.cleared 60

GEN_X=--srq gen_fo san.srq b fault_carrier 0 down
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30; }
barrier san.srq.cleared 60

FO_ENV=
. "$REPO/tests/lab/scenarios/multirail.sh"

# ASan and UBSan write one file a process that reported (log_path.PID)
reports=$(ls "$REP".asan.* "$REP".ubsan.* 2> /dev/null)
if [ -z "$reports" ]; then
	check pass san.reports "no ASan, LSan or UBSan report in 6 cases"
else
	check fail san.reports "$(for f in $reports; do basename "$f"; grep -m3 -E 'ERROR|runtime error|#[0-9] ' "$f"; done | cut -c1-160 | head -12 | tr '\n' ' ')"
fi
