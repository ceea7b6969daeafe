# SPDX-License-Identifier: MIT
# bench-overhead: what r2cc adds to the data path, in user-space
# instructions per work request. bench_wr posts 1-SGE 64-byte RDMA WRITEs
# (every 16th signaled) on rxe0 and polls them; callgrind counts the
# instructions of the thread inside bench_loop (provider and shim included)
# for N=2000 and N=4000, without and with the shim, in this one run. Per WR
# is (I(4000) - I(2000)) / 2000, so set-up costs cancel out.
# The figure that counts is taken with bench_wr -T (an idle thread in both
# runs): r2cc runs a rail-monitor thread, and in any multi-threaded process
# glibc's system-call wrappers take their cancellable path, which on rxe
# costs instructions around the doorbell write() of every post. NCCL, UCX
# and MPI processes are multi-threaded anyway; the single-threaded figure is
# printed beside it (single_threaded_added).
# lab-timeout: 1500

[ "$NODE" = a ] || return 0
SHIM=$BUILD/shim/libr2cc-shim.so
BW="$BUILD/tests/progs/bench_wr -d rxe0 -g 1"
# --separate-threads: count the thread that runs bench_loop (part 1) only,
# not r2cc's rail monitor or any other thread.
CG="valgrind --tool=callgrind --toggle-collect=bench_loop --separate-threads=yes"
for f in "$SHIM" "$BUILD/tests/progs/bench_wr"; do
	[ -e "$f" ] || { check fail built "no $f: build first"; return 0; }
done
command -v valgrind > /dev/null ||
	{ check fail valgrind "not installed: run tools/install-deps"; return 0; }

# cg NAME N [ENV...]: bench_wr under callgrind; prints the instruction total.
cg() {
	local name=$1 n=$2 out=$LAB/a.$1.out
	shift 2
	bounded 900 env "$@" $CG --callgrind-out-file="$LAB/a.$name.cg" \
		$BW -n "$n" > "$out" 2>&1 ||
		{ check fail "$name" "exit $? (see a.$name.out)"; return 1; }
	grep -q "^bench_wr: wrs=$n " "$out" ||
		{ check fail "$name" "no summary (see a.$name.out)"; return 1; }
	# The main thread's file: a.NAME.cg-01.
	mv "$LAB/a.$name.cg-01" "$LAB/a.$name.cg" 2>/dev/null ||
		{ check fail "$name" "no callgrind output for thread 1"; return 1; }
	awk '$1 == "totals:" { print $2; exit }' "$LAB/a.$name.cg"
}

# calls FILE: the functions run inside bench_loop, "file:fn [object]".
calls() {
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		sed -n 's/^ *[0-9,]\+ ([^)]*)  *\([^ ].*\)$/\1/p' | sort -u
}

BW="$BW -T"
n2=$(cg native2000 2000) && n4=$(cg native4000 4000) &&
s2=$(cg shim2000 2000 LD_PRELOAD=$SHIM) &&
s4=$(cg shim4000 4000 LD_PRELOAD=$SHIM) || return 0
BW=${BW% -T}
o2=$(cg st.native2000 2000) && o4=$(cg st.native4000 4000) &&
t2=$(cg st.shim2000 2000 LD_PRELOAD=$SHIM) &&
t4=$(cg st.shim4000 4000 LD_PRELOAD=$SHIM) || return 0

native=$(( (n4 - n2) / 2000 ))
shimmed=$(( (s4 - s2) / 2000 ))
added=$(( shimmed - native ))
st_added=$(( (t4 - t2 - o4 + o2) / 2000 ))
line="shim_added_instructions_per_wr=$added native=$native shimmed=$shimmed single_threaded_added=$st_added"
echo "$line" > "$LAB/a.bench-overhead.txt"
metric shim_added_instructions_per_wr "$added"
metric native_instructions_per_wr "$native"
metric shimmed_instructions_per_wr "$shimmed"
metric single_threaded_added_per_wr "$st_added"
if [ "$added" -le 100 ] && [ "$added" -ge 0 ]; then
	check pass overhead.instructions "$line (target <= 100)"
else
	check fail overhead.instructions "$line (target <= 100)"
fi

# Nothing the shim does on the data path calls into libc: no allocation,
# no lock, no system call wrapper beyond what the provider itself calls.
calls "$LAB/a.native4000.cg" > "$LAB/a.calls.native"
calls "$LAB/a.shim4000.cg" > "$LAB/a.calls.shim"
extra=$(comm -13 "$LAB/a.calls.native" "$LAB/a.calls.shim" |
	grep -v 'libr2cc-shim\.so\]')
bad=$(grep -E 'libc\.so|ld-linux|libpthread' <<< "$extra" | tr '\n' ' ')
if [ ! -s "$LAB/a.calls.native" ]; then
	check fail overhead.no-libc "callgrind_annotate listed nothing"
elif [ -n "$bad" ]; then
	check fail overhead.no-libc "the shim's data path calls into libc: $bad"
else
	check pass overhead.no-libc "no libc call (allocation, lock, system call) added; $(grep -c 'libr2cc-shim' "$LAB/a.calls.shim") shim functions on the path"
fi

# The same number of system calls per WR with and without the shim.
sc() { # sc N [ENV...]: system calls bench_wr makes in total, the fewer
	# of two runs (a lock the monitor thread holds at that moment, or its
	# join at exit, costs the main thread a futex now and then: not a
	# call per WR, which every run makes)
	local n=$1 i c min=
	shift
	for i in 1 2; do
		# Without -f: the thread that posts and polls, not r2cc's
		# monitor.
		bounded 300 env "$@" strace -c -o "$LAB/a.strace.$n.$#.$i" \
			$BW -n "$n" > /dev/null 2>&1
		c=$(awk '$NF == "total" { print $4 }' "$LAB/a.strace.$n.$#.$i")
		[ -z "$min" ] || [ "${c:-0}" -lt "$min" ] && min=${c:-0}
	done
	echo "$min"
}
if command -v strace > /dev/null; then
	d_native=$(( $(sc 4000) - $(sc 2000) ))
	d_shim=$(( $(sc 4000 LD_PRELOAD=$SHIM) - $(sc 2000 LD_PRELOAD=$SHIM) ))
	metric syscalls_per_2000_wr.native "$d_native"
	metric syscalls_per_2000_wr.shim "$d_shim"
	[ "$d_native" = "$d_shim" ] &&
		check pass overhead.syscalls "$d_native system calls per 2000 WRs either way" ||
		check fail overhead.syscalls "native $d_native, shim $d_shim per 2000 WRs"
fi
