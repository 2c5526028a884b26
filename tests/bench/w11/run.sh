#!/usr/bin/env bash
# W11 of docs/benchmarks.md (topics: one publisher, N subscribers), its own
# driver: tests/bench/run.sh calls it when BENCH_ROWS names w11 (and in a
# full run).  For each message size (64 B, 1 KiB), N = 1 2 4 8 and each
# contender (topic, queues, socket, iceoryx when w11bench has it and
# iox-roudi runs or can be started), BENCH_RUNS (default 3) rounds, the
# contenders alternating within a round; each cell is the median of its
# runs.  Prints the tables and writes results/w11-STAMP.{txt,json}.
# W11_SIZES="64" (or "1024") runs one size only.
# Usage: tests/bench/w11/run.sh BIN_DIR   (BIN_DIR: build/tests/bench)
set -u -o pipefail
BIN_DIR=$(readlink -f -- "$1")
REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$REPO_ROOT" || exit 2
W11=$BIN_DIR/w11bench
SHEAFD=$(readlink -f -- "$BIN_DIR/../../daemon/sheafd")
RUNS=${BENCH_RUNS:-3}
QUICK=${BENCH_QUICK:-0}
COUNT=100000 SOCK_COUNT=20000 LAT=2000
[ "$QUICK" = 1 ] && COUNT=20000 SOCK_COUNT=5000 LAT=500
[ -x "$W11" ] || { echo "w11: $W11 not built" >&2; exit 2; }
TMP=$(mktemp -d /tmp/sheaf-w11-XXXXXX)
ROUDI_PID="" SHEAFD_PID=""
cleanup() {
	[ -n "$SHEAFD_PID" ] && kill -TERM "$SHEAFD_PID" 2>/dev/null && wait "$SHEAFD_PID" 2>/dev/null
	[ -n "$ROUDI_PID" ] && kill -TERM "$ROUDI_PID" 2>/dev/null && wait "$ROUDI_PID" 2>/dev/null
	rm -rf -- "$TMP"
}
trap cleanup EXIT

PEERS=(topic queues socket)
if ! grep -q w11_publisher "$W11"; then
	echo "w11: iceoryx: w11bench built without it (no iceoryx C binding)" >&2
elif pgrep -x iox-roudi >/dev/null; then
	PEERS+=(iceoryx)
elif command -v iox-roudi >/dev/null; then
	iox-roudi -c tests/bench/w7/roudi.toml -l error -m off >"$TMP/roudi.log" 2>&1 &
	ROUDI_PID=$!
	for ((i = 0; i < 50; i++)); do
		grep -q "RouDi is ready" "$TMP/roudi.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "RouDi is ready" "$TMP/roudi.log" && PEERS+=(iceoryx) ||
		echo "w11: iceoryx: iox-roudi did not start" >&2
fi
[ -n "${BENCH_CONTENDERS:-}" ] && PEERS=($(for p in "${PEERS[@]}"; do
	[[ " ${BENCH_CONTENDERS//,/ } " == *" $p "* ]] && echo "$p"; done))

"$SHEAFD" --foreground --socket "$TMP/s.sock" --nodes 1 --size 512M >"$TMP/sheafd.log" 2>&1 &
SHEAFD_PID=$!
for ((i = 0; i < 50; i++)); do [ -S "$TMP/s.sock" ] && break; sleep 0.1; done

declare -A VALS
SIZES=${W11_SIZES:-64 1024}
for size in $SIZES; do
	for n in 1 2 4 8; do
		for ((r = 0; r < RUNS; r++)); do
			for p in "${PEERS[@]}"; do
				c=$COUNT
				[ "$p" = socket ] && c=$SOCK_COUNT
				line=$(timeout 300 "$W11" --peer "$p" --subs "$n" --size "$size" \
					--count "$c" --lat "$LAT" --socket "$TMP/s.sock" 2>>"$TMP/err")
				echo "w11: $line" >&2
				for f in rate pub_ns p50 p99; do
					v=$(sed -n "s/.*\"$f\": \([0-9.]*\).*/\1/p" <<<"$line")
					VALS[$p,$size,$n,$f]+="$v "
				done
			done
		done
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p results
{
	echo "W11 (median of $RUNS runs; $(nproc) CPUs; count $COUNT, socket $SOCK_COUNT, latency $LAT messages)"
	for size in $SIZES; do
		for f in rate pub_ns p50 p99; do
			case $f in
			rate) what="delivered Mmsg/s per subscriber (slowest)" ;;
			pub_ns) what="publisher ns per message" ;;
			p50) what="publish->take p50 us" ;;
			p99) what="publish->take p99 us" ;;
			esac
			printf '\n%s B: %s\n| contender | N=1 | N=2 | N=4 | N=8 |\n|---|---|---|---|---|\n' "$size" "$what"
			for p in "${PEERS[@]}"; do
				printf '| %s |' "$p"
				for n in 1 2 4 8; do
					printf ' %s |' "$(median <<<"${VALS[$p,$size,$n,$f]:-}")"
				done
				printf '\n'
			done
		done
	done
} | tee "results/w11-$STAMP.txt"
{
	printf '{"stamp":"%s","runs":%d,"cells":[' "$STAMP" "$RUNS"
	sep=""
	for k in "${!VALS[@]}"; do
		IFS=, read -r p size n f <<<"$k"
		printf '%s{"peer":"%s","size":%s,"subs":%s,"field":"%s","median":%s}' "$sep" "$p" \
			"$size" "$n" "$f" "$(median <<<"${VALS[$k]}")"
		sep=","
	done
	printf ']}\n'
} >"results/w11-$STAMP.json"
grep -v -e "\[ Debug \]" -e "\[Warning\]" "$TMP/err" | tail -n 5 >&2
exit 0
