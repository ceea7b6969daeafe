#!/bin/bash
# SPDX-License-Identifier: MIT
# symbols.sh SHIM HOOKS_DEF: the shim exports exactly the symbols of
# hooks.def, each at the version hooks.def names, and libibverbs defines
# each of them at that version too (so a versioned reference binds to us),
# and librdmacm's rdma_get_cm_event likewise.
set -u
shim=$1 def=$2
ibv=$(ldconfig -p | awk '/libibverbs.so.1 .*x86-64/ { print $NF; exit }')
[ -n "$ibv" ] || ibv=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
syms() { readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $5 == "GLOBAL" { print $8 }'; }
want=$(tr -d '\n\t' < "$def" | grep -o 'R2CC_HOOK([^"]*"[^"]*"' |
	sed -E 's/.*, *([a-z_0-9]+), *"([^"]*)"/\1@@\2/' | sort)
have=$(syms "$shim" | grep '^ibv_' | sort)
lib=$(syms "$ibv")
fail=0
n=0
for s in $want; do
	n=$((n + 1))
	grep -qx "$s" <<< "$have" || { echo "not exported: $s"; fail=1; }
	# libibverbs has it at that version (default or compat).
	grep -qx -e "$s" -e "${s/@@/@}" <<< "$lib" || { echo "libibverbs lacks $s"; fail=1; }
done
for s in $have; do
	grep -qx "$s" <<< "$want" || { echo "exported but not in hooks.def: $s"; fail=1; }
done
for s in dlsym@@GLIBC_2.34 dlsym@GLIBC_2.2.5 dlvsym@@GLIBC_2.34 dlvsym@GLIBC_2.2.5; do
	syms "$shim" | grep -qx "$s" || { echo "not exported: $s"; fail=1; }
done
# librdmacm's connection events, at the version librdmacm defines them
cm=$(ldconfig -p | awk '/librdmacm.so.1 .*x86-64/ { print $NF; exit }')
[ -n "$cm" ] || cm=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
for s in rdma_get_cm_event@@RDMACM_1.0; do
	syms "$shim" | grep -qx "$s" || { echo "not exported: $s"; fail=1; }
	syms "$cm" | grep -qx "$s" || { echo "librdmacm lacks $s"; fail=1; }
done
extra=$(syms "$shim" | grep -vE '^(ibv_|dlsym@|dlvsym@|rdma_get_cm_event@@RDMACM_1.0$)' | grep '@')
[ -z "$extra" ] || { echo "unexpected exports: $extra"; fail=1; }
echo "symbols: $n hooks checked against $ibv"
[ $n -gt 20 ] || { echo "too few hooks parsed from $def"; fail=1; }
exit $fail
