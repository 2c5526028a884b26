#!/usr/bin/env bash
# sweep.sh - the bench's curves (`make bench-sweep`; `make bench` runs it
# with BENCH_QUICK=1): W2 batch sweep and W5 capacity sweep, as tables,
# JSON-ish data files and PNG plots (gnuplot) under results/.
#
#   batch sweep  W2 (alloc B objects, free them) at B = 1K, 4K, 16K, 64K,
#                256K, 1M for sheaf and the peers glibc, jemalloc, tcmalloc
#                (minimal), mimalloc, at 64, 256 and 1024 bytes; ns/op.
#   W5           sheaf at capacity 16, 32, 64, 128, 256: W2 B=4096 (ns/op)
#                and W3 cross-thread (Mobj/s), same sizes; the best peer of
#                the same run as a flat line.
# Every point is the median of R runs (R=3; quick: 1 and counts / 10),
# contenders alternating within each round.
# Output: results/sweep-<UTC>.txt (tables), results/sweep-<UTC>.dat (one
# line per point: table size x contender median min max), and PNGs
# results/sweep-w2-SIZE.png, results/sweep-w5-SIZE.png (latest, overwritten),
# when gnuplot is installed (Debian: gnuplot-nox).
# Usage: tests/bench/sweep.sh build/tests/bench/sheafbench
# Environment: BENCH_QUICK=1, BENCH_RUNS=N, SWEEP_SIZES="64 256 1024",
#              SWEEP_BATCHES="1024 ... 1048576", SWEEP_CAPS="16 ... 256".
set -u -o pipefail
BIN=$(readlink -f -- "${1:?usage: $0 path/to/sheafbench}")
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." || exit 2
QUICK=${BENCH_QUICK:-0}
R=${BENCH_RUNS:-$([ "$QUICK" = 1 ] && echo 1 || echo 3)}
SIZES=${SWEEP_SIZES:-"64 256 1024"}
BATCHES=${SWEEP_BATCHES:-"1024 4096 16384 65536 262144 1048576"}
CAPS=${SWEEP_CAPS:-"16 32 64 128 256"}
PEERS="glibc jemalloc tcmalloc mimalloc"
L=/usr/lib/x86_64-linux-gnu
declare -A PRE=([glibc]="" [jemalloc]=$L/libjemalloc.so.2
	[tcmalloc]=$L/libtcmalloc_minimal.so.4 [mimalloc]=$L/libmimalloc.so.2)
TS=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p results
DAT=results/sweep-$TS.dat TXT=results/sweep-$TS.txt
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT
q=""; [ "$QUICK" = 1 ] && q=--quick

# one TABLE SIZE X CONTENDER ARGS...: append "table size x contender value"
one() {
	local table=$1 size=$2 x=$3 who=$4; shift 4
	local a=sheaf pre=""
	case $who in sheaf*) ;; *) a=malloc; pre=${PRE[$who]} ;; esac
	[ -n "$pre" ] && [ ! -e "$pre" ] && return
	local v
	v=$(LD_PRELOAD=$pre timeout 300 "$BIN" --alloc $a --size "$size" $q --json "$@" \
		2>/dev/null | grep -o '"value":[0-9.]*' | cut -d: -f2)
	[ -n "$v" ] && echo "$table $size $x $who $v" >>"$RAW"
	printf '.' >&2
}

for r in $(seq "$R"); do
	for size in $SIZES; do
		for b in $BATCHES; do
			for who in sheaf $PEERS; do
				one w2 "$size" "$b" "$who" --workload w2 --batch "$b"
			done
		done
		for cap in $CAPS; do
			one w5_w2 "$size" "$cap" sheaf --workload w2 --batch 4096 --capacity "$cap"
			one w5_w3 "$size" "$cap" sheaf --workload w3 --capacity "$cap"
		done
		for who in $PEERS; do
			one w5_w2 "$size" peer "$who" --workload w2 --batch 4096
			one w5_w3 "$size" peer "$who" --workload w3
		done
	done
done
echo >&2

# median min max per (table size x contender)
sort -k1,1 -k2,2n -k3,3 -k4,4 -k5,5g "$RAW" | awk '
	{ k = $1" "$2" "$3" "$4; v[k] = v[k] " " $5; n[k]++ }
	END { for (k in v) { m = split(substr(v[k], 2), a, " ");
		printf "%s %s %s %s\n", k, a[int((m + 1) / 2)], a[1], a[m] } }' |
	sort -k1,1 -k2,2n -k3,3n -k4,4 >"$DAT"

{
	echo "# sweep $TS, median (min-max) of $R run(s)$([ "$QUICK" = 1 ] && echo ', quick')"
	for size in $SIZES; do
		echo
		echo "W2 batch sweep, $size B objects, ns/op (lower is better); ratio: sheaf / best peer"
		printf '%-8s' B; for who in sheaf $PEERS; do printf ' %-18s' "$who"; done; echo ' ratio'
		for b in $BATCHES; do
			awk -v s="$size" -v b="$b" -v cols="sheaf $PEERS" '
				$1 == "w2" && $2 == s && $3 == b { m[$4] = $5; lo[$4] = $6; hi[$4] = $7 }
				END { printf "%-8s", b; n = split(cols, c, " "); best = 0
				      for (i = 1; i <= n; i++) {
					  if (c[i] in m) printf " %-18s", sprintf("%.2f (%.2f-%.2f)", m[c[i]], lo[c[i]], hi[c[i]])
					  else printf " %-18s", "-"
					  if (i > 1 && (c[i] in m) && (best == 0 || m[c[i]] < best)) best = m[c[i]] }
				      if (best > 0 && ("sheaf" in m)) printf " %.2f", m["sheaf"] / best
				      print "" }' "$DAT"
		done
		echo
		echo "W5 capacity sweep, $size B objects: sheaf's W2 B=4096 (ns/op) and W3 (Mobj/s); best peer last"
		for cap in $CAPS peer; do
			awk -v s="$size" -v x="$cap" '
				($1 == "w5_w2" || $1 == "w5_w3") && $2 == s && $3 == x {
					if (x != "peer") { v[$1] = $5; next }
					if ($1 == "w5_w2" && (!("w5_w2" in v) || $5 < v["w5_w2"])) v["w5_w2"] = $5
					if ($1 == "w5_w3" && (!("w5_w3" in v) || $5 > v["w5_w3"])) v["w5_w3"] = $5 }
				END { printf "%-12s W2 %6.2f ns/op   W3 %6.2f Mobj/s\n",
				      x == "peer" ? "best peer" : "capacity " x, v["w5_w2"], v["w5_w3"] }' "$DAT"
		done
	done
} | tee "$TXT"

command -v gnuplot >/dev/null || { echo "note: gnuplot not installed (gnuplot-nox): no plots" >&2; exit 0; }
SER=$(mktemp -d)
trap 'rm -rf "$RAW" "$SER"' EXIT
# one file per series: SER/TABLE-SIZE-CONTENDER, "x value" lines
awk -v d="$SER" '$3 != "peer" { print $3, $5 > (d "/" $1 "-" $2 "-" $4) }' "$DAT"
for size in $SIZES; do
	plot="" sep=""
	for who in sheaf $PEERS; do
		f=$SER/w2-$size-$who
		[ -s "$f" ] && plot="$plot$sep'$f' using 1:2 with linespoints title '$who'" && sep=", "
	done
	[ -n "$plot" ] && gnuplot -e "set terminal png size 800,500; set output 'results/sweep-w2-$size.png';
		set logscale x 2; set xlabel 'batch B (objects)'; set ylabel 'ns per operation (lower is better)';
		set title 'W2 batch sweep, $size-byte objects ($TS)'; set key top left; set yrange [0:*];
		plot $plot" || echo "gnuplot failed for W2 $size" >&2
	[ -s "$SER/w5_w2-$size-sheaf" ] && gnuplot -e "set terminal png size 800,500;
		set output 'results/sweep-w5-$size.png';
		set logscale x 2; set xlabel 'sheaf capacity'; set ylabel 'W2 B=4096 ns/op (lower is better)';
		set y2label 'W3 Mobj/s (higher is better)'; set y2tics; set ytics nomirror;
		set yrange [0:*]; set y2range [0:*];
		set title 'W5 capacity sweep, $size-byte objects ($TS)'; set key bottom right;
		plot '$SER/w5_w2-$size-sheaf' using 1:2 with linespoints title 'sheaf W2',
		     '$SER/w5_w3-$size-sheaf' using 1:2 axes x1y2 with linespoints title 'sheaf W3'" \
		|| echo "gnuplot failed for W5 $size" >&2
done
echo "plots: results/sweep-w2-SIZE.png, results/sweep-w5-SIZE.png" >&2
