#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/fuzz/seeds.sh MKSEEDS CORPUS: the binary seeds in CORPUS are what
# MKSEEDS writes now (a format change that left them stale would have
# the targets refuse them early, and the corpus run prove nothing).
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/ctrl_msg" "$tmp/status"
"$1" "$tmp"
n=0
for f in "$tmp"/ctrl_msg/* "$tmp"/status/*; do
	rel=${f#"$tmp"/}
	if ! cmp -s "$f" "$2/$rel"; then
		echo "stale seed: $2/$rel (run: mkseeds tests/fuzz/corpus)"
		exit 1
	fi
	n=$((n + 1))
done
echo "seeds: $n current"
