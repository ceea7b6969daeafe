# SPDX-License-Identifier: MIT
# faults: each fault primitive does what it claims. A transfer on rail 0
# fails (bounded) under carrier loss, a black hole and a one-sided QEMU cut,
# while rail 1 keeps working, and works again once the fault is cleared;
# partial loss still lets RC complete by retransmission; a flap schedule
# takes the link down and up as written.
# lab-timeout: 900

PP="ibv_rc_pingpong -g 1 -n 100 -s 4096"
transfer() { # transfer NAME RAIL ok|fail
	pair "$1" "$3" "$([ "$3" = ok ] && echo 120 || echo 20)" 18515 \
		"$PP -d $(rail_ibdev $2)" "$PP -d $(rail_ibdev $2) \$SERVER"
}
expect_eq() { # expect_eq NAME GOT WANT
	[ "$2" = "$3" ] && check pass "$1" "$2" || check fail "$1" "got $2, want $3"
}

if [ "$RAILS" -lt 2 ]; then
	check fail rails "the faults scenario needs 2 rails or more"
	return 0
fi

transfer base.rail0 0 ok
transfer base.rail1 1 ok

# Carrier down inside node b (a port event on b; a sees silence).
[ "$NODE" = b ] && fault_carrier 0 down
barrier carrier.applied
[ "$NODE" = b ] && expect_eq carrier.operstate "$(operstate 0)" down
transfer carrier.rail0 0 fail
transfer carrier.rail1 1 ok
[ "$NODE" = b ] && { fault_clear 0; wait_port_active 0 30 ||
	check fail carrier.port-back "rxe0 not ACTIVE 30s after link up"; }
transfer carrier.restored 0 ok

# Black hole on node a's egress: link and port stay up, no event.
[ "$NODE" = a ] && fault_blackhole 0
barrier blackhole.applied
expect_eq blackhole.operstate.$NODE "$(operstate 0)" up
transfer blackhole.rail0 0 fail
if [ "$NODE" = a ]; then
	d=$(qdisc_drops 0)
	[ "${d:-0}" -gt 0 ] && check pass blackhole.dropped "$d packets" ||
		check fail blackhole.dropped "netem dropped nothing"
fi
transfer blackhole.rail1 1 ok
[ "$NODE" = a ] && fault_clear 0
transfer blackhole.restored 0 ok

# One-sided cut: the host turns off b's rail-0 NIC in QEMU (b sees its link
# go down, a sees a black hole).
if [ "$NODE" = a ]; then
	host_link b 0 off && check pass cut.requested ||
		check fail cut.requested "host did not set_link"
fi
barrier cut.applied
if [ "$NODE" = b ]; then
	for i in $(seq 50); do [ "$(operstate 0)" = down ] && break; sleep 0.1; done
	expect_eq cut.operstate.b "$(operstate 0)" down
else
	expect_eq cut.operstate.a "$(operstate 0)" up
fi
transfer cut.rail0 0 fail
transfer cut.rail1 1 ok
[ "$NODE" = a ] && host_link b 0 on
barrier cut.cleared
[ "$NODE" = b ] && { wait_port_active 0 30 ||
	check fail cut.port-back "rxe0 not ACTIVE 30s after set_link on"; }
transfer cut.restored 0 ok

# Partial loss (20%, 2 ms delay) in both directions: RC retransmits and the
# transfer completes on both sides. perftest ends with a TCP handshake, so
# neither QP goes away while the other still waits for an ACK.
retries0=$(rxe_counter 0 completer_retry_err)
fault_loss 0 20 2
barrier loss.applied
pair loss.rail0 ok 240 18515 "ib_write_bw -F -d rxe0 -x 1 -n 200 -s 4096" \
	"ib_write_bw -F -d rxe0 -x 1 -n 200 -s 4096 \$SERVER"
d=$(qdisc_drops 0)
[ "${d:-0}" -gt 0 ] && check pass loss.dropped "$d packets" ||
	check fail loss.dropped "netem dropped nothing"
metric "loss.$NODE.completer_retry" $(( $(rxe_counter 0 completer_retry_err) - retries0 ))
fault_clear 0
barrier loss.cleared

# Flap schedule on node b: down 2 s, up 2 s, down 2 s, then up.
if [ "$NODE" = b ]; then
	fault_flap 0 "down 2 up 2 down 2 up 0"
	seen=""
	for i in $(seq 120); do
		s=$(operstate 0)
		[ "${seen##* }" = "$s" ] || seen="$seen $s"
		kill -0 "$FLAP_PID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$FLAP_PID"
	seen="$seen $(operstate 0)"
	seen=$(echo $seen | tr ' ' '\n' | uniq | tr '\n' ' ')
	expect_eq flap.sequence "$(echo $seen)" "down up down up"
	FLAP_PID=
	wait_port_active 0 30 || check fail flap.port-back "rxe0 not ACTIVE after the flap"
fi
barrier flap.done 60
transfer flap.restored 0 ok
