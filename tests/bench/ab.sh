#!/usr/bin/env bash
# ab.sh - one alternating before/after run of two builds of sheaf, for a
# change that must not move the figures: W1, W2 (B = 4096), W3 between
# processes and W7 (64 B, one at a time), each contender run in turn,
# ROUNDS times (default 11), then the median with min-max of each.
#
# Usage: tests/bench/ab.sh OLD_BUILD NEW_BUILD [ROUNDS]
#   OLD_BUILD, NEW_BUILD: build directories (e.g. a worktree of the old
#   commit's build/ and this tree's build/), each with daemon/sheafd,
#   tests/bench/sheafbench and tests/bench/w7bench made
#   (make all build/tests/bench/w7bench).
#   AB_WORKLOADS="w1 w3p": a subset.
set -u
[ $# -ge 2 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-11}
WORKLOADS=${AB_WORKLOADS:-w1 w2 w3p w7}
for b in "$OLD" "$NEW"; do
	for f in daemon/sheafd tests/bench/sheafbench tests/bench/w7bench; do
		[ -x "$b/$f" ] || { echo "ab.sh: no $b/$f (make it first)" >&2; exit 2; }
	done
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

value() { grep -o "\"$1\":[0-9.]*" | head -1 | cut -d: -f2; }

# run_one TAG BUILD WORKLOAD: prints "TAG WORKLOAD VALUE" (NA on failure).
run_one() {
	local tag=$1 b=$2 w=$3 out="" pid i
	case $w in
	w1) out=$("$b/tests/bench/sheafbench" --alloc sheaf --workload w1 \
		--count 30000000 --json 2>/dev/null | value value) ;;
	w2) out=$("$b/tests/bench/sheafbench" --alloc sheaf --workload w2 --batch 4096 \
		--count 20000000 --json 2>/dev/null | value value) ;;
	w3p | w7)
		rm -f "$TMP/s.sock"
		"$b/daemon/sheafd" --foreground --socket "$TMP/s.sock" --nodes 1 --size 1G \
			>"$TMP/sheafd.log" 2>&1 &
		pid=$!
		for ((i = 0; i < 100; i++)); do [ -S "$TMP/s.sock" ] && break; sleep 0.05; done
		if [ "$w" = w3p ]; then
			out=$("$b/tests/bench/sheafbench" --alloc sheaf --workload w3p \
				--socket "$TMP/s.sock" --count 5000000 --json 2>/dev/null | value value)
		else
			out=$("$b/tests/bench/w7bench" --peer sheaf --count 500000 --pp 0 \
				--socket "$TMP/s.sock" --cpus 0,1 2>/dev/null | value tput_64)
		fi
		kill "$pid"
		wait "$pid" 2>/dev/null ;;
	esac
	echo "$tag $w ${out:-NA}"
}

for ((r = 0; r < ROUNDS; r++)); do
	for w in $WORKLOADS; do
		run_one old "$OLD" "$w"
		run_one new "$NEW" "$w"
	done
done >"$TMP/raw"
declare -A UNIT=([w1]="ns/pair" [w2]="ns/op" [w3p]="Mobj/s" [w7]="Mmsg/s")
for w in $WORKLOADS; do
	for tag in old new; do
		awk -v w="$w" -v t="$tag" '$1 == t && $2 == w && $3 != "NA" { print $3 }' "$TMP/raw" |
			sort -g | awk -v w="$w" -v t="$tag" -v u="${UNIT[$w]}" '
			{ a[NR] = $1 }
			END { if (NR) printf "%-4s %s median %s %s (%s-%s), %d runs\n",
				w, t, a[int((NR + 1) / 2)], u, a[1], a[NR], NR
			      else printf "%-4s %s: every run failed\n", w, t }'
	done
done
