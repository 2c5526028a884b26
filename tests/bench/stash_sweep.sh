#!/usr/bin/env bash
# stash_sweep.sh - the per-thread stash limits against the W2 batch curve
# (the defaults of the stash_sheaves / stash_bytes tunables are chosen
# from this sweep).  Run by sweep.sh (make bench-sweep;
# quick in make bench) when sheafd and sheafctl are built next to sheafbench.
#
# What it does: starts one sheafd (--nodes 1 --size 1G, socket in a
# temporary folder, stopped at the end), makes sheafbench's cache of each
# object size (one tiny run), then for each stash setting S in
# STASH_BYTES (stash_bytes=S, stash_sheaves=64, the most: the byte limit
# binds; "s16-256K": stash_sheaves=16, stash_bytes=256 KiB, the defaults
# before this sweep chose 32 / 512 KiB) runs
# sheafbench W2 through sheafd at each batch B.  In every round each
# (setting, batch) runs once, settings alternating (a `sheafctl tune`
# before each run), R rounds; the median per point.
# Output: results/stash-<UTC>.txt (table: ns/op, B down, settings across),
# results/stash-<UTC>.dat ("size batch setting median min max"), and
# results/sweep-stash-SIZE.png (gnuplot, when installed).
# Usage: tests/bench/stash_sweep.sh build/tests/bench/sheafbench
# Environment: BENCH_QUICK=1 (R=1, counts / 10), BENCH_RUNS=N,
#   SWEEP_SIZES="64 256 1024", STASH_BATCHES="1024 ... 1048576",
#   STASH_BYTES="0 65536 262144 524288 1048576 4194304".
set -u -o pipefail
BIN=$(readlink -f -- "${1:?usage: $0 path/to/sheafbench}")
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." || exit 2
BUILD_DIR=$(dirname -- "$(dirname -- "$(dirname -- "$BIN")")")
SHEAFD=$BUILD_DIR/daemon/sheafd
SHEAFCTL=$BUILD_DIR/client/sheafctl/sheafctl
[ -x "$SHEAFD" ] && [ -x "$SHEAFCTL" ] ||
	{ echo "stash_sweep: $SHEAFD or $SHEAFCTL not built: skipped" >&2; exit 0; }
QUICK=${BENCH_QUICK:-0}
R=${BENCH_RUNS:-$([ "$QUICK" = 1 ] && echo 1 || echo 3)}
SIZES=${SWEEP_SIZES:-"64 256 1024"}
BATCHES=${STASH_BATCHES:-"1024 4096 16384 65536 262144 1048576"}
SETTINGS="s16-256K ${STASH_BYTES:-0 65536 262144 524288 1048576 4194304}"
TS=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p results
DAT=results/stash-$TS.dat TXT=results/stash-$TS.txt
TMP=$(mktemp -d)
SOCK=$TMP/s.sock
PID=""
cleanup() {
	[ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
q=""; [ "$QUICK" = 1 ] && q=--quick

"$SHEAFD" --foreground --socket "$SOCK" --nodes 1 --size 1G >"$TMP/sheafd.log" 2>&1 &
PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] || { echo "stash_sweep: sheafd did not start: $(tail -3 "$TMP/sheafd.log")" >&2; exit 1; }

ctl() { "$SHEAFCTL" -s "$SOCK" "$@" >/dev/null; }
# tune SIZE SETTING: the cache of SIZE to SETTING (see above)
tune() {
	local cache=sb-sheaf-$1-cdef
	if [ "$2" = s16-256K ]; then
		ctl tune "$cache" stash_sheaves=16 stash_bytes=262144
	else
		ctl tune "$cache" stash_sheaves=64 stash_bytes="$2"
	fi
}
for size in $SIZES; do
	"$BIN" --alloc sheaf --socket "$SOCK" --size "$size" --workload w1 --count 1000 \
		>/dev/null || { echo "stash_sweep: cannot make the $size B cache" >&2; exit 1; }
done

RAW=$TMP/raw
for r in $(seq "$R"); do
	for size in $SIZES; do
		for b in $BATCHES; do
			for s in $SETTINGS; do
				tune "$size" "$s" || { echo "stash_sweep: tune $s failed" >&2; exit 1; }
				v=$(timeout 300 "$BIN" --alloc sheaf --socket "$SOCK" --size "$size" \
					--workload w2 --batch "$b" $q --json 2>/dev/null |
					grep -o '"value":[0-9.]*' | cut -d: -f2)
				[ -n "$v" ] && echo "$size $b $s $v" >>"$RAW"
				printf '.' >&2
			done
		done
	done
done
echo >&2
[ -s "$RAW" ] || { echo "stash_sweep: no run gave a figure" >&2; exit 1; }

sort -k1,1n -k2,2n -k3,3 -k4,4g "$RAW" | awk '
	{ k = $1" "$2" "$3; v[k] = v[k] " " $4 }
	END { for (k in v) { m = split(substr(v[k], 2), a, " ");
		printf "%s %s %s %s\n", k, a[int((m + 1) / 2)], a[1], a[m] } }' |
	sort -k1,1n -k2,2n -k3,3 >"$DAT"

{
	echo "# stash sweep $TS, W2 through sheafd, ns/op (lower is better), median (min-max) of $R run(s)$([ "$QUICK" = 1 ] && echo ', quick')"
	echo "# columns: stash_bytes (stash_sheaves=64); s16-256K = 16 sheaves / 256 KiB (the former defaults; now 32 / 512 KiB)"
	for size in $SIZES; do
		echo
		echo "$size B objects"
		printf '%-8s' B; for s in $SETTINGS; do printf ' %-20s' "$s"; done; echo
		for b in $BATCHES; do
			printf '%-8s' "$b"
			for s in $SETTINGS; do
				awk -v z="$size" -v b="$b" -v s="$s" '$1 == z && $2 == b && $3 == s {
					printf " %-20s", sprintf("%.2f (%.2f-%.2f)", $4, $5, $6); f = 1 }
					END { if (!f) printf " %-20s", "-" }' "$DAT"
			done
			echo
		done
	done
} | tee "$TXT"

command -v gnuplot >/dev/null || exit 0
for size in $SIZES; do
	plot="" sep=""
	for s in $SETTINGS; do
		awk -v z="$size" -v s="$s" '$1 == z && $3 == s { print $2, $4 }' "$DAT" >"$TMP/ser-$size-$s"
		[ -s "$TMP/ser-$size-$s" ] &&
			plot="$plot$sep'$TMP/ser-$size-$s' using 1:2 with linespoints title 'stash $s'" && sep=", "
	done
	[ -n "$plot" ] && gnuplot -e "set terminal png size 800,500; set output 'results/sweep-stash-$size.png';
		set logscale x 2; set xlabel 'batch B (objects)'; set ylabel 'ns per operation (lower is better)';
		set title 'W2 through sheafd by stash_bytes, $size-byte objects ($TS)'; set key top left;
		set yrange [0:*]; plot $plot" || echo "gnuplot failed for stash $size" >&2
done
echo "plots: results/sweep-stash-SIZE.png" >&2
