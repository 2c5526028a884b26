#!/usr/bin/env bash
# run.sh - the sheaf benchmark driver (`make bench`).
#
# What it measures: the workloads of docs/benchmarks.md, one table row each.
# Single-process rows, every contender in its own process: W1 (alloc+free
# pairs, ns/pair), W2 with B=4096 and with B=2^20 (batch alloc then free,
# ns/op), W3 cross-thread (producer -> SPSC ring -> consumer that frees,
# pinned to two CPUs, million objects/s) for sheaf, sheaf0 (capacity 0:
# every operation takes a sheaf from the barn's ring and puts it back, after
# flushing the thread's sheaves; not the kernel's per-CPU-slab baseline), and the peers glibc, jemalloc, tcmalloc (minimal) and mimalloc
# (`sheafbench --alloc malloc` under LD_PRELOAD; glibc is no preload).
# W8 mixed sizes, single-process: one thread, a fixed seeded
# sequence of sizes 8..1024 through sheaf_malloc/sheaf_free_any (sheaf's
# kmalloc-<size> classes of a local pool) or malloc/free (the peers), W1-
# shaped (`--workload w8p`, ns/pair) and W2-shaped with B=4096 (`--workload
# w8b`, ns/op); goals: sheaf <= 0.5x the best peer (pair), <= 0.8x (B=4096).
# w8ps and w8bs the same with sized frees (`--sized`: sheaf_free_sized, the
# peer's sdallocx / tc_free_sized / mi_free_size; glibc's free).
# W12 thread churn and W14 server simulation (w14, w14s with sized frees):
# threads started and replaced over time, the same contenders; W14's goal
# is sheaf <= 1.0x tcmalloc.  W13 footprint: MiB resident after an idle
# second, goal sheaf <= 1.25x the lowest peer.
# sheafd rows, against one sheafd started here (--nodes 1 --size 1G, socket
# in a temporary folder; stopped with SIGTERM at the end):
#   W3 cross-process  `sheafbench --workload w3p`: producer and consumer are
#                     two processes, each connecting on its own, pinned to
#                     two CPUs; sheaf and sheaf0 through sheafd, and the peers
#                     mutex-pool (one robust process-shared mutex over a free
#                     list in a MAP_SHARED region, the naive multi-process
#                     design) and DPDK (dpdkbench: rte_mempool with a
#                     256-object per-lcore cache on two lcores of ONE process:
#                     cross-lcore, i.e. cross-thread), twice: "dpdk" hands
#                     objects over an SP/SC rte_ring, one per enqueue, and
#                     "dpdk_spsc" over sheafbench's own SPSC ring, the one all
#                     the other contenders use (rte_ring's per-object
#                     enqueue/dequeue touches the other side's cache line
#                     every time and costs more than the allocator); and
#                     "dpdk_bulk": the SPSC ring with rte_mempool_get_bulk/
#                     put_bulk of 32.  The pool is configured fairly:
#                     objects packed as sheaf packs them (NO_SPREAD |
#                     NO_CACHE_ALIGN), sized like the flow's working set.
#   W4 W1 / W2 N proc `sheafbench --procs N`: N processes (BENCH_PROCS,
#                     default 1 and 2, at most the CPUs) run W1 (an operation
#                     is an alloc+free pair) or W2 B=4096 at once; million
#                     operations per process per second (will-it-scale's
#                     per_process_ops); the ratio column is N-proc / 1-proc
#                     (ideal 1).
#   W6 miss p50/p99/max  `sheafbench --workload w6`: latency (us) of an
#                     allocation that waits for sheafd to stock an emptied
#                     barn (emptied by sheaf_cache_shrink before each
#                     sample, untimed), 1000 verified misses per run (quick:
#                     100), capacity-256 cache.
#   attach N p50/p99  `scale_walks --attach N` (tests/bench/scale/walks.c,
#                     its own sheafd): N processes released together each
#                     time connect + cache open + first allocation (us);
#                     N = 1 and 512 (BENCH_ATTACH_RUNS runs, default 3).
#   W9 readers/writer `rcu_table bench MODE` (tests/examples/rcu_table.c):
#                     a hash table in the pool, 1 reader and 1
#                     writer process pinned to two CPUs; readers' Mlookups/s
#                     with the writer paced at BENCH_W9_PACE (10^6) updates/s,
#                     the writer's Mupdates/s flat out; MODE rcu (read_lock/
#                     unlock per lookup), qsbr, rwlock (process-shared
#                     pthread rwlock), none (unsynchronized), and dpdk
#                     (tests/bench/w9/w9dpdk.c: rte_rcu QSBR, threads of one
#                     process, no EAL); targets: paired per-round ratios.
#   sheafd idle CPU   utime+stime of sheafd over BENCH_IDLE_S (10) seconds
#                     with no client, from /proc/PID/stat (one measurement).
#   W7 messages       `w7bench` (tests/bench/w7/): a producer
#                     process allocates a message (64 B, 1 KiB), writes it
#                     whole and hands it to a consumer process that reads it
#                     whole and frees it, pinned to two CPUs (nice -20 as
#                     root); million messages/s (the median of the rates
#                     of 1024-message chunks, see w7.h) and ping-pong round trip
#                     p50/p99 (us).  Contenders: sheaf (sheaf_alloc +
#                     sheaf_enqueue / sheaf_dequeue + sheaf_free, one at a
#                     time) and sheaf_b32 (the bulk calls, 32 at a time),
#                     both on SHEAF_QUEUE_SP | SHEAF_QUEUE_SC queues (one
#                     producer, one consumer: the fastest correct mode,
#                     like DPDK's SP/SC rings; w7bench --mpmc for MPMC);
#                     dpdk_mp and dpdk_mp_b32 (w7dpdk: rte_mempool +
#                     SP/SC rte_ring between a primary and a secondary process:
#                     needs root and hugepages, which run.sh raises by what
#                     is missing and gives back at the end); iceoryx (w7iox:
#                     loan/publish/take/release through an iox-roudi that
#                     run.sh starts with tests/bench/w7/roudi.toml and stops
#                     at the end); socket (copy through a Unix socketpair);
#                     and a reference, slots and slots_b32: the messages
#                     written and read in place in a ring of message slots
#                     (no allocator, no pointer queue, no check): the
#                     messages alone, moving between the two CPUs.
#                     All wait alike: spin, then sched_yield.  One w7bench
#                     run per contender and round gives all six W7 cells.
#   W7 large messages `w7bench --large`, the same two processes and
#                     contenders one message at a time (sheaf, dpdk_mp,
#                     iceoryx, socket, slots; no bulk) at 64 KiB, 1 MiB and
#                     4 MiB, the producer at most 32 MiB of messages ahead
#                     of the consumer's frees (8 to 512 messages); one run
#                     per contender and round fills the rows
#                     w7_<sz>_whole  (every byte written and read) and
#                     w7_<sz>_pages  (one cache line per 4 KiB page written
#                                    and read), thousand messages/s, and
#                     w7_<sz>_pp / w7_<sz>_pp99  ping-pong writing and
#                                    reading the first line only, p50/p99
#                                    round trip (us); <sz> is 64k, 1m, 4m;
#                     w7_64_pp is the same run's first-line ping-pong at
#                     64 B (the reference of the goal that a large message
#                     costs the transport no more).  BENCH_ROWS=w7l: all of
#                     them.  Goals (targets below the table): whole >= 0.9x
#                     the slot ring; pages at 1 MiB >= 2x iceoryx and >= 50x
#                     the socket; ping-pong p50 at 1 MiB <= 1.5x that at 64 B.
# Counts per run: W1 10^8 pairs, W2 2*10^7 operations, W3 10^7 objects;
# sheaf0 runs a tenth and mutex-pool half of that; figures are per operation
# or per second, so they compare all the same.
#
# Runs are grouped (each single-process row is its own group; W4's rows form
# one group, W6's another); in every round of a group each of its runs
# happens once, contenders alternating, R rounds per group (R=5; R=7 for W3
# and W3 cross-process; R=9 for W4, whose two-process runs on this 2-core VM
# are the noisiest), so that machine noise hits them alike.  The table on
# stdout shows each cell's median (min-max) and the ratio of sheaf's median
# to the row's best peer (single-process rows: glibc, jemalloc, tcmalloc,
# mimalloc; W3 cross-process: mutex-pool, dpdk); the direction that is better
# is printed with it.  Below the table, the target ratios: W3 cross-process
# sheaf / best single-process peer's W3 cross-thread, W3 cross-process sheaf
# / dpdk (both hand-offs), W4 N-proc / 1-proc.  The same data goes, as
# JSON, to results/bench-<UTC timestamp>.json and results/latest.json, and
# the table to results/bench-<UTC timestamp>.txt and results/latest.txt.
# Progress goes to stderr.  Exit status 1 when any run failed (its cell shows
# FAIL) or sheafd died or did not stop cleanly.
#
# DPDK is optional: dpdkbench is built only when `pkg-config libdpdk` works,
# and runs only as root with >= 32 free 2 MiB hugepages (dpdkbench runs with -m 64); otherwise the dpdk
# column is skipped with a note saying why.  As root, run.sh sets them up
# itself: it raises /proc/sys/vm/nr_hugepages by what is missing and mounts
# hugetlbfs on /dev/hugepages when none is mounted, and at exit puts both
# back as it found them (notes below the table say what it changed).
# Huge pages for sheaf (BENCH_THP, default 1): sheafd and local pools ask
# for shmem transparent huge pages for the object data by default
# (huge_pages=try) where the kernel allows them; as root, when
# /sys/kernel/mm/transparent_hugepage/shmem_enabled is "never" or "deny",
# run.sh sets it to "advise" for the run and restores it at exit (a note
# says so).  BENCH_THP=0 leaves it alone (sheaf on 4 KiB pages there).
#
# Usage (from anywhere; it works from the repository root):
#   tests/bench/run.sh build/tests/bench/sheafbench      # or: make bench
# (sheafd and dpdkbench are looked up next to it: BUILD/daemon/sheafd,
# BUILD/tests/bench/dpdkbench.  The run uses copies of the three taken at
# its start, so that a rebuild meanwhile does not change what is measured.)
# Environment:
#   BENCH_QUICK=1        pass --quick (counts / 10) and use R=3
#   BENCH_RUNS=N         rounds per group (overrides R)
#   BENCH_SIZE=BYTES     object size (default 64)
#   BENCH_ROWS="..."     subset of rows: w1 w2_4096 w2_1m w3 w8p w8b w8ps w8bs w10 w12 w13 w14 w3p w4 w6 attach w7 w7l w9 idle
#                        w11 (topics: tests/bench/w11/run.sh, its own tables)
#                        (w4, w6, w7, w7l, w8, w9, w10, w12, w13 and w14 stand for their rows, e.g. w4_w1_2,
#                        w7_1m_pages);
#                        "single": the first four; "daemon": the last four
#   BENCH_CONTENDERS=".." subset of: sheaf sheaf0 glibc jemalloc tcmalloc
#                        mimalloc mutexpool dpdk dpdk_spsc dpdk_bulk sheaf_b32
#                        dpdk_mp dpdk_mp_b32 iceoryx socket
#   BENCH_PROCS="1 2"    W4 process counts (default: 1 2 4 8... up to the CPUs)
#   BENCH_IDLE_S=SEC     sheafd idle measurement (default 10)
#   BENCH_W9_S=SEC       seconds per W9 run (default 2; quick 1)
#   BENCH_W9_PACE=N      the W9 writer's pace for the readers' rows
#   BENCH_TIMEOUT=SEC    limit per run (default 300)
#   SHEAF_BENCH_CPUTIME=1 (read by sheafbench) time one-thread rows (w1, w2,
#                        w8) by the thread's CPU time, not the wall clock:
#                        steadier on a machine other jobs load
set -u -o pipefail

progress() { printf '%s\n' "$*" >&2; }
die() { progress "run.sh: error: $*"; exit 2; }

[ $# -eq 1 ] || die "usage: $0 path/to/sheafbench"
BIN=$(readlink -f -- "$1") || die "no such file: $1"
[ -x "$BIN" ] || die "not an executable: $1"
REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO_ROOT" || die "cannot cd to $REPO_ROOT"
BIN_DIR=$(dirname -- "$BIN")
SHEAFD=$(readlink -f -- "$BIN_DIR/../../daemon/sheafd" || true)
DPDKBENCH=$BIN_DIR/dpdkbench
W7BENCH=$BIN_DIR/w7bench W7DPDK=$BIN_DIR/w7dpdk W7IOX=$BIN_DIR/w7iox

# ---- W11 (topics): its own driver, tests/bench/w11/run.sh ----
# BENCH_ROWS naming w11 runs it (first); a full run (no BENCH_ROWS) too.
# With nothing else named, the run ends there.
if [ -z "${BENCH_ROWS:-}" ] || [[ " $BENCH_ROWS " == *" w11 "* ]]; then
	tests/bench/w11/run.sh "$BIN_DIR" || progress "run.sh: W11 failed"
	if [ -n "${BENCH_ROWS:-}" ]; then
		BENCH_ROWS=$(sed 's/\bw11\b//g' <<<" $BENCH_ROWS ")
		[ -n "${BENCH_ROWS// /}" ] || exit 0
	fi
fi

QUICK=${BENCH_QUICK:-0}
SIZE=${BENCH_SIZE:-64}
TIMEOUT=${BENCH_TIMEOUT:-300}
IDLE_S=${BENCH_IDLE_S:-10}
[[ $SIZE =~ ^[0-9]+$ ]] || die "BENCH_SIZE must be a number"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "BENCH_TIMEOUT must be a number"
[[ $IDLE_S =~ ^[1-9][0-9]*$ ]] || die "BENCH_IDLE_S must be >= 1"
[[ ${BENCH_RUNS:-1} =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be >= 1"
NCPU=$(nproc)

default_procs() {
	local n=1
	while [ "$n" -le "$NCPU" ]; do printf '%d ' "$n"; n=$((n * 2)); done
}
read -r -a PROCS <<<"${BENCH_PROCS:-$(default_procs)}"
for n in "${PROCS[@]}"; do
	if ! [[ $n =~ ^[1-9][0-9]*$ ]] || [ "$n" -gt 64 ]; then
		die "BENCH_PROCS: '$n' is not 1..64"
	fi
done
[[ " ${PROCS[*]} " == *" 1 "* ]] || PROCS=(1 "${PROCS[@]}")   # the base

# ---- rows ----
# Per row: label, sheafbench args, metric (JSON), unit, better direction,
# --count, group (rows of a group alternate within each round), columns
# (contenders), the JSON field of the run's output to read, whether it needs
# sheafd, and its ratio column: "peers" (sheaf / best peer), "base:ROW"
# (sheaf / sheaf of ROW) or "none".
SINGLE_ROWS=(w1 w2_4096 w2_16k w2_64k w2_1m w3)
SINGLE_COLS="sheaf sheaf0 glibc jemalloc tcmalloc mimalloc"
declare -A ROW_LABEL=([w1]="W1 pair" [w2_4096]="W2 B=4096"
	[w2_16k]="W2 B=16384" [w2_64k]="W2 B=65536"
	[w2_1m]="W2 B=2^20" [w3]="W3 cross-thread"
	[w3p]="W3 cross-process" [w6_p50]="W6 miss p50 (cap 256)"
	[w6_p99]="W6 miss p99 (cap 256)" [w6_max]="W6 miss max (cap 256)"
	[idle]="sheafd idle CPU over $IDLE_S s")
declare -A ROW_ARGS=([w1]="--workload w1" [w2_4096]="--workload w2 --batch 4096"
	[w2_16k]="--workload w2 --batch 16384" [w2_64k]="--workload w2 --batch 65536"
	[w2_1m]="--workload w2 --batch 1048576" [w3]="--workload w3"
	[w3p]="--workload w3p" [w6_p50]="--workload w6" [w6_p99]="--workload w6"
	[w6_max]="--workload w6" [idle]="")
declare -A ROW_METRIC=([w1]=ns_per_pair [w2_4096]=ns_per_op [w2_16k]=ns_per_op [w2_64k]=ns_per_op [w2_1m]=ns_per_op
	[w3]=mobj_per_s [w3p]=mobj_per_s [w6_p50]=us_p50 [w6_p99]=us_p99
	[w6_max]=us_max [idle]=cpu_s)
declare -A ROW_UNIT=([w1]=ns/pair [w2_4096]=ns/op [w2_16k]=ns/op [w2_64k]=ns/op [w2_1m]=ns/op [w3]=Mobj/s
	[w3p]=Mobj/s [w6_p50]=us [w6_p99]=us [w6_max]=us [idle]=s)
declare -A ROW_BETTER=([w1]=lower [w2_4096]=lower [w2_16k]=lower [w2_64k]=lower [w2_1m]=lower [w3]=higher
	[w3p]=higher [w6_p50]=lower [w6_p99]=lower [w6_max]=lower [idle]=lower)
# --count per row: w1 pairs, w2 timed operations, w3 objects, w6 samples
# (sheafbench's defaults, written out so that they can be divided per
# contender).
declare -A ROW_COUNT=([w1]=100000000 [w2_4096]=20000000 [w2_16k]=20000000 [w2_64k]=20000000 [w2_1m]=20000000
	[w3]=10000000 [w3p]=10000000 [w6_p50]=1000 [w6_p99]=1000 [w6_max]=1000)
declare -A ROW_GROUP=([w6_p50]=w6 [w6_p99]=w6 [w6_max]=w6)
declare -A ROW_COLS=([w3p]="sheaf sheaf0 mutexpool dpdk dpdk_spsc dpdk_bulk" [w6_p50]=sheaf
	[w6_p99]=sheaf [w6_max]=sheaf [idle]=sheaf)
declare -A ROW_FIELD=([w6_p50]=p50_us [w6_p99]=p99_us [w6_max]=max_us)
declare -A ROW_DAEMON=([w3p]=1 [w6_p50]=1 [w6_p99]=1 [w6_max]=1 [idle]=1)
declare -A ROW_RATIO=([w6_p50]=none [w6_p99]=none [w6_max]=none [idle]=none)
W4_ROWS=()
for w in w1 w2; do
	for n in "${PROCS[@]}"; do
		row=w4_${w}_$n
		W4_ROWS+=("$row")
		if [ "$w" = w1 ]; then
			ROW_LABEL[$row]="W4 W1 (op=pair) $n proc"
			ROW_ARGS[$row]="--workload w1 --procs $n"
			ROW_COUNT[$row]=100000000
		else
			ROW_LABEL[$row]="W4 W2 B=4096 $n proc"
			ROW_ARGS[$row]="--workload w2 --batch 4096 --procs $n"
			ROW_COUNT[$row]=20000000
		fi
		ROW_METRIC[$row]=mops_per_proc_s ROW_UNIT[$row]=Mops/proc/s
		ROW_BETTER[$row]=higher ROW_GROUP[$row]=w4 ROW_COLS[$row]=sheaf
		ROW_DAEMON[$row]=1
		ROW_RATIO[$row]=none
		[ "$n" != 1 ] && ROW_RATIO[$row]=base:w4_${w}_1
	done
done
W6_ROWS=(w6_p50 w6_p99 w6_max)
# Attach latency: scale_walks --attach N, its own sheafd.
ATTACH_ROWS=()
for n in 1 512; do
	for q in p50 p99; do
		row=attach${n}_$q
		ATTACH_ROWS+=("$row")
		ROW_LABEL[$row]="attach $n proc $q"
		ROW_ARGS[$row]="" ROW_METRIC[$row]=us ROW_UNIT[$row]=us
		ROW_BETTER[$row]=lower ROW_GROUP[$row]=attach ROW_COLS[$row]=sheaf
		ROW_RATIO[$row]=none
	done
done
# W8: mixed sizes through the size classes (sheaf and the malloc peers).
# The s rows free with the size (sheafbench --sized: sheaf_free_sized, the
# peer's own sized free; glibc 2.36 has none and frees with free).
W8_ROWS=(w8p w8b w8ps w8bs)
ROW_LABEL[w8p]="W8 mixed 8..1024 pair" ROW_LABEL[w8b]="W8 mixed 8..1024 B=4096"
ROW_LABEL[w8ps]="W8 mixed sized free pair" ROW_LABEL[w8bs]="W8 mixed sized free B=4096"
ROW_ARGS[w8p]="--workload w8p" ROW_ARGS[w8b]="--workload w8b --batch 4096"
ROW_ARGS[w8ps]="--workload w8p --sized" ROW_ARGS[w8bs]="--workload w8b --batch 4096 --sized"
for row in "${W8_ROWS[@]}"; do
	case $row in
	w8p*) ROW_METRIC[$row]=ns_per_pair ROW_UNIT[$row]=ns/pair ROW_COUNT[$row]=100000000 ;;
	*)    ROW_METRIC[$row]=ns_per_op ROW_UNIT[$row]=ns/op ROW_COUNT[$row]=20000000 ;;
	esac
	ROW_BETTER[$row]=lower
	ROW_COLS[$row]="sheaf glibc jemalloc tcmalloc mimalloc"
done
# W10: large objects, one thread: alloc, a write per 4 KiB page, free;
# single (B=1) and in batches of 16, sheaf_malloc against the malloc peers.
W10_ROWS=()
declare -A ROW_TAIL=()   # sheafbench arguments after the common ones
declare -A W10_BYTES=([128k]=131072 [1m]=1048576 [8m]=8388608 [64m]=67108864)
declare -A W10_LABEL=([128k]="128 KiB" [1m]="1 MiB" [8m]="8 MiB" [64m]="64 MiB")
# objects per run: a page fault per page (a peer that maps every alloc)
# costs 100 ms per 64 MiB object on a slow VM
declare -A W10_COUNT=([128k]=40000 [1m]=4000 [8m]=480 [64m]=64)
for sz in 128k 1m 8m 64m; do
	for b in 1 16; do
		row=w10_$sz
		[ $b = 16 ] && row=w10_${sz}_b16
		W10_ROWS+=("$row")
		ROW_LABEL[$row]="W10 ${W10_LABEL[$sz]} $([ $b = 1 ] && echo single || echo "B=16")"
		ROW_ARGS[$row]="--workload w10 --batch $b"
		ROW_TAIL[$row]="--size ${W10_BYTES[$sz]}"   # after the run's --size
		ROW_METRIC[$row]=ns_per_obj ROW_UNIT[$row]=ns/obj ROW_BETTER[$row]=lower
		ROW_COUNT[$row]=${W10_COUNT[$sz]}
		ROW_COLS[$row]="sheaf glibc jemalloc tcmalloc mimalloc"
	done
done
# W12: thread churn, threads one after another, each N allocations of
# mixed sizes and their frees, then its exit (sheaf and the malloc peers).
W12_ROWS=()
for n in 10 100 1000 10000; do
	row=w12_$n
	W12_ROWS+=("$row")
	ROW_LABEL[$row]="W12 thread churn N=$n"
	ROW_ARGS[$row]="--workload w12"
	ROW_METRIC[$row]=us_per_thread ROW_UNIT[$row]=us/thread ROW_BETTER[$row]=lower
	ROW_COUNT[$row]=$n
	ROW_COLS[$row]="sheaf glibc jemalloc tcmalloc mimalloc"
done
# W13: footprint, T threads each keeping 256 objects of a burst of 4096,
# then idle: MiB resident after the idle second.
W13_ROWS=()
for t in 1 4 16 64; do
	row=w13_$t
	W13_ROWS+=("$row")
	ROW_LABEL[$row]="W13 footprint T=$t"
	ROW_ARGS[$row]="--workload w13"
	ROW_METRIC[$row]=rss_idle_mib ROW_UNIT[$row]=MiB ROW_BETTER[$row]=lower
	ROW_COUNT[$row]=$t
	ROW_COLS[$row]="sheaf glibc jemalloc tcmalloc mimalloc"
done
# W14: server simulation, two threads at once over a shared table of live
# objects, each replaced after 50000 operations; w14s with sized frees.
W14_ROWS=(w14 w14s)
ROW_LABEL[w14]="W14 server simulation" ROW_LABEL[w14s]="W14 server simulation, sized frees"
ROW_ARGS[w14]="--workload w14" ROW_ARGS[w14s]="--workload w14 --sized"
for row in "${W14_ROWS[@]}"; do
	ROW_METRIC[$row]=ns_per_op ROW_UNIT[$row]=ns/op ROW_BETTER[$row]=lower
	ROW_COUNT[$row]=20000000
	ROW_COLS[$row]="sheaf glibc jemalloc tcmalloc mimalloc"
done
# W7: one w7bench run per contender and round fills every W7
# row of that contender (each row reads its own field of the JSON line).
W7_ROWS=(w7_64 w7_1k w7_pp50_64 w7_pp99_64 w7_pp50_1k w7_pp99_1k)
W7_TPUT_COLS="sheaf sheaf_b32 dpdk_mp dpdk_mp_b32 iceoryx socket slots slots_b32"
W7_PP_COLS="sheaf dpdk_mp iceoryx socket slots"
ROW_LABEL[w7_64]="W7 msgs 64 B" ROW_LABEL[w7_1k]="W7 msgs 1 KiB"
ROW_LABEL[w7_pp50_64]="W7 ping-pong 64 B p50" ROW_LABEL[w7_pp99_64]="W7 ping-pong 64 B p99"
ROW_LABEL[w7_pp50_1k]="W7 ping-pong 1 KiB p50" ROW_LABEL[w7_pp99_1k]="W7 ping-pong 1 KiB p99"
ROW_FIELD[w7_64]=tput_64 ROW_FIELD[w7_1k]=tput_1024
ROW_FIELD[w7_pp50_64]=p50_64 ROW_FIELD[w7_pp99_64]=p99_64
ROW_FIELD[w7_pp50_1k]=p50_1024 ROW_FIELD[w7_pp99_1k]=p99_1024
for row in "${W7_ROWS[@]}"; do
	# ratio column off: the W7 targets below pair like with like (one at
	# a time with one at a time, bulk with bulk)
	ROW_GROUP[$row]=w7 ROW_DAEMON[$row]=1 ROW_ARGS[$row]="" ROW_COUNT[$row]=0
	ROW_RATIO[$row]=none
	if [[ $row == w7_pp* ]]; then
		ROW_METRIC[$row]=rtt_us ROW_UNIT[$row]=us ROW_BETTER[$row]=lower
		ROW_COLS[$row]=$W7_PP_COLS
	else
		ROW_METRIC[$row]=mmsgs_per_s ROW_UNIT[$row]=Mmsg/s ROW_BETTER[$row]=higher
		ROW_COLS[$row]=$W7_TPUT_COLS
	fi
done
# messages per timed run (and ping-pong round trips) per contender: well
# under a second each on an idle machine; the figure is a median of
# 1024-message chunks, so a short run is enough
declare -A W7_COUNT=([sheaf]=500000 [sheaf_b32]=1000000 [dpdk_mp]=500000
	[dpdk_mp_b32]=1000000 [iceoryx]=100000 [socket]=100000 [slots]=500000
	[slots_b32]=1000000)
declare -A W7_PP=([sheaf]=10000 [dpdk_mp]=10000 [iceoryx]=5000 [socket]=5000
	[sheaf_b32]=0 [dpdk_mp_b32]=0 [slots]=10000 [slots_b32]=0)
declare -A W7_PEER=([sheaf]=sheaf [sheaf_b32]=sheaf_b32 [dpdk_mp]=dpdk
	[dpdk_mp_b32]=dpdk_b32 [iceoryx]=iceoryx [socket]=socket [slots]=slots
	[slots_b32]=slots_b32)
# W9: rcu_table bench MODE, one reader and one writer process
# pinned to two CPUs; readers' Mlookups/s with the writer paced at
# W9_PACE updates/s (the same write load for every mode), and the writer's
# Mupdates/s flat out.  The dpdk mode is w9dpdk (threads of one process).
W9_MODES=(rcu qsbr rwlock none dpdk)
W9_PACE=${BENCH_W9_PACE:-1000000}
declare -A W9_TITLE=([rcu]="sheaf read_lock/unlock per lookup"
	[qsbr]="sheaf QSBR (quiescent per 64)" [rwlock]="pthread rwlock (process-shared)"
	[none]="unsynchronized reads" [dpdk]="DPDK rte_rcu QSBR, 1 process")
W9_ROWS=()
for m in "${W9_MODES[@]}"; do
	for q in r w; do
		row=w9_${q}_$m
		W9_ROWS+=("$row")
		if [ $q = r ]; then
			ROW_LABEL[$row]="W9 readers: ${W9_TITLE[$m]}"
			ROW_METRIC[$row]=mlookups_per_s ROW_UNIT[$row]=Mlookups/s
			ROW_ARGS[$row]="bench $m SECONDS 1 $W9_PACE"
		else
			ROW_LABEL[$row]="W9 writer: ${W9_TITLE[$m]}"
			ROW_METRIC[$row]=mupdates_per_s ROW_UNIT[$row]=Mupdates/s
			ROW_ARGS[$row]="bench $m SECONDS 1"
		fi
		ROW_BETTER[$row]=higher ROW_GROUP[$row]=w9 ROW_COLS[$row]=sheaf
		ROW_DAEMON[$row]=1 ROW_RATIO[$row]=none ROW_FIELD[$row]=${ROW_METRIC[$row]}
	done
done
# W7 large messages: one `w7bench --large` run per contender and round
# fills every row below (64 KiB, 1 MiB, 4 MiB; whole, pages, ping-pong).
W7L_ROWS=()
W7L_COLS="sheaf dpdk_mp iceoryx socket slots"
declare -A W7L_BYTES=([64k]=65536 [1m]=1048576 [4m]=4194304)
declare -A W7L_LABEL=([64k]="64 KiB" [1m]="1 MiB" [4m]="4 MiB")
for sz in 64k 1m 4m; do
	for f in whole pages; do
		row=w7_${sz}_$f
		W7L_ROWS+=("$row")
		ROW_LABEL[$row]="W7 ${W7L_LABEL[$sz]} $f"
		ROW_FIELD[$row]=ktput_${f}_${W7L_BYTES[$sz]}
		ROW_METRIC[$row]=kmsgs_per_s ROW_UNIT[$row]=kmsg/s ROW_BETTER[$row]=higher
	done
done
for sz in 64 64k 1m 4m; do
	for q in 50 99; do
		row=w7_${sz}_pp$([ $q = 99 ] && echo 99)
		[ $sz = 64 ] && [ $q = 99 ] && continue
		W7L_ROWS+=("$row")
		ROW_LABEL[$row]="W7 ping-pong first line ${W7L_LABEL[$sz]:-64 B} p$q"
		ROW_FIELD[$row]=p${q}_${W7L_BYTES[$sz]:-64}
		ROW_METRIC[$row]=rtt_us ROW_UNIT[$row]=us ROW_BETTER[$row]=lower
	done
done
for row in "${W7L_ROWS[@]}"; do
	ROW_GROUP[$row]=w7l ROW_DAEMON[$row]=1 ROW_ARGS[$row]="" ROW_COUNT[$row]=0
	ROW_RATIO[$row]=none ROW_COLS[$row]=$W7L_COLS
done
# the large run's count is of 64 KiB messages (16x fewer of 1 MiB, 64x
# fewer of 4 MiB, in each form); ping-pong round trips per size
declare -A W7L_COUNT=([sheaf]=20000 [dpdk_mp]=20000 [iceoryx]=20000 [socket]=5000
	[slots]=20000)
declare -A W7L_PP=([sheaf]=5000 [dpdk_mp]=5000 [iceoryx]=5000 [socket]=300 [slots]=5000)
DAEMON_ROWS=(w3p "${W4_ROWS[@]}" "${W6_ROWS[@]}" "${ATTACH_ROWS[@]}" "${W7_ROWS[@]}" "${W7L_ROWS[@]}" "${W9_ROWS[@]}" idle)
ALL_ROWS=("${SINGLE_ROWS[@]}" "${W8_ROWS[@]}" "${W10_ROWS[@]}" "${W12_ROWS[@]}" "${W13_ROWS[@]}" "${W14_ROWS[@]}"
	"${DAEMON_ROWS[@]}")
declare -A GROUP_RUNS=([w3]=7 [w3p]=7 [w4]=9 [w7]=7 [w7l]=5 [idle]=1)

# ---- contenders: name -> --alloc, LD_PRELOAD ----
ALL_CONTENDERS=(sheaf sheaf0 glibc jemalloc tcmalloc mimalloc mutexpool dpdk
	dpdk_spsc dpdk_bulk sheaf_b32 dpdk_mp dpdk_mp_b32 iceoryx socket slots slots_b32)
PEERS=(glibc jemalloc tcmalloc mimalloc mutexpool dpdk dpdk_spsc dpdk_bulk dpdk_mp
	dpdk_mp_b32 iceoryx socket)
SINGLE_PEERS=(glibc jemalloc tcmalloc mimalloc)
declare -A ALLOC=([sheaf]=sheaf [sheaf0]=sheaf0 [glibc]=malloc
	[jemalloc]=malloc [tcmalloc]=malloc [mimalloc]=malloc
	[mutexpool]=mutexpool [dpdk]=dpdk [dpdk_spsc]=dpdk [dpdk_bulk]=dpdk [sheaf_b32]=w7
	[dpdk_mp]=w7 [dpdk_mp_b32]=w7 [iceoryx]=w7 [socket]=w7 [slots]=w7 [slots_b32]=w7)
declare -A HANDOFF=([dpdk]=rte_ring [dpdk_spsc]=spsc [dpdk_bulk]=spsc)
declare -A DPDK_ARGS=([dpdk_bulk]="--bulk 32")
declare -A TITLE=([mutexpool]=mutex-pool [dpdk]="dpdk x-lcore rte_ring"
	[dpdk_spsc]="dpdk x-lcore spsc" [dpdk_bulk]="dpdk x-lcore spsc bulk32"
	[sheaf_b32]="sheaf bulk 32" [dpdk_mp]="dpdk 2-proc" [dpdk_mp_b32]="dpdk 2-proc bulk 32"
	[socket]="unix socket" [slots]="slot ring" [slots_b32]="slot ring bulk 32")
declare -A PRELOAD=([sheaf]="" [sheaf0]="" [glibc]="" [mutexpool]="" [dpdk]=""
	[dpdk_spsc]="" [dpdk_bulk]="" [sheaf_b32]="" [dpdk_mp]="" [dpdk_mp_b32]=""
	[iceoryx]="" [socket]="" [slots]="" [slots_b32]="")
declare -A SONAMES=([jemalloc]="libjemalloc.so.2 libjemalloc.so"
	[tcmalloc]="libtcmalloc_minimal.so.4 libtcmalloc_minimal.so libtcmalloc.so.4"
	[mimalloc]="libmimalloc.so.2 libmimalloc.so")
# sheaf0 (every operation through the barn) is 10-20x slower per operation:
# it runs a tenth of the count, so that it takes no longer than the others;
# mutex-pool (a lock round trip per operation between two CPUs) half.
declare -A COUNT_DIV=([sheaf0]=10 [mutexpool]=2)
LIB_DIRS="/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib /usr/local/lib64"

# The path of the first of @sonames found by ldconfig or in LIB_DIRS.
find_lib() {
	local soname dir path
	for soname in "$@"; do
		path=$(ldconfig -p 2>/dev/null | awk -v n="$soname" \
			'$1 == n && /x86-64|x86_64|64bit/ { print $NF; exit }')
		[ -n "$path" ] && [ -e "$path" ] && { echo "$path"; return 0; }
		for dir in $LIB_DIRS; do
			[ -e "$dir/$soname" ] && { echo "$dir/$soname"; return 0; }
		done
	done
	return 1
}

# Keep the names of @wanted (a list) that are also in the rest of the args.
select_names() {
	local wanted=$1 name; shift
	for name in "$@"; do
		[[ " ${wanted//,/ } " == *" $name "* ]] && printf '%s ' "$name"
	done
}

# BENCH_ROWS with its shorthands expanded.
wanted_rows() {
	local w
	for w in ${BENCH_ROWS:-${ALL_ROWS[*]}}; do
		case $w in
		single) printf '%s ' "${SINGLE_ROWS[@]}" ;;
		daemon|new) printf '%s ' "${DAEMON_ROWS[@]}" ;;
		w4) printf '%s ' "${W4_ROWS[@]}" ;;
		w6) printf '%s ' "${W6_ROWS[@]}" ;;
		w7) printf '%s ' "${W7_ROWS[@]}" ;;
		w7l) printf '%s ' "${W7L_ROWS[@]}" ;;
		attach) printf '%s ' "${ATTACH_ROWS[@]}" ;;
		w8) printf '%s ' "${W8_ROWS[@]}" ;;
		w10) printf '%s ' "${W10_ROWS[@]}" ;;
		w12) printf '%s ' "${W12_ROWS[@]}" ;;
		w13) printf '%s ' "${W13_ROWS[@]}" ;;
		w14) printf '%s ' "${W14_ROWS[@]}" ;;
		w9) printf '%s ' "${W9_ROWS[@]}" ;;
		*) printf '%s ' "$w" ;;
		esac
	done
}

NOTES=()
note() { NOTES+=("$*"); progress "note: $*"; }

# The first two CPUs this script may run on, as an EAL -l list ("0,1").
first_two_cpus() {
	local list part i cpus=()
	list=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)
	IFS=, read -r -a parts <<<"$list"
	for part in "${parts[@]}"; do
		if [[ $part == *-* ]]; then
			for ((i = ${part%-*}; i <= ${part#*-}; i++)); do cpus+=("$i"); done
		else
			cpus+=("$part")
		fi
	done
	[ ${#cpus[@]} -ge 2 ] && printf '%s,%s' "${cpus[0]}" "${cpus[1]}"
}

# DPDK needs dpdkbench, root, hugepages and (we mount it) hugetlbfs.
# Checked once (DPDK_OK: "" not yet, 1 ready, 0 skipped).
DPDK_LCORES=""
DPDK_OK=""
dpdk_ready() {
	[ -z "$DPDK_OK" ] || { [ "$DPDK_OK" = 1 ]; return; }
	DPDK_OK=0
	dpdk_check || return 1
	DPDK_OK=1
	note "dpdk: rte_mempool (per-lcore cache 256, objects packed: NO_SPREAD|NO_CACHE_ALIGN, pool sized to the flow's working set) on lcores $DPDK_LCORES of one process: cross-lcore (cross-thread), not cross-process; hand-off rte_ring SP/SC (dpdk), the SPSC ring of every other contender (dpdk_spsc), or that ring with get_bulk/put_bulk of 32 (dpdk_bulk)"
}

# What run.sh changed on the system, put back by restore_system (EXIT).
HP_ORIG_NR=""       # nr_hugepages before we raised it
HP_MOUNTED=""       # the hugetlbfs mount we made
THP_ORIG=""         # shmem_enabled before we set it to advise
THP_SHMEM=/sys/kernel/mm/transparent_hugepage/shmem_enabled
restore_system() {
	if [ -n "$HP_MOUNTED" ]; then
		umount "$HP_MOUNTED" 2>/dev/null ||
			progress "run.sh: could not unmount $HP_MOUNTED (left mounted)"
		HP_MOUNTED=""
	fi
	if [ -n "$HP_ORIG_NR" ]; then
		echo "$HP_ORIG_NR" >/proc/sys/vm/nr_hugepages 2>/dev/null ||
			progress "run.sh: could not set nr_hugepages back to $HP_ORIG_NR"
		HP_ORIG_NR=""
	fi
	if [ -n "$THP_ORIG" ]; then
		echo "$THP_ORIG" >"$THP_SHMEM" 2>/dev/null ||
			progress "run.sh: could not set $THP_SHMEM back to $THP_ORIG"
		THP_ORIG=""
	fi
}
trap restore_system EXIT

# Root with too few free 2 MiB hugepages: raise nr_hugepages by the
# shortfall (restored at exit).
hugepages_raise() {
	local need=$1 free nr
	free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
	[ "${free:-0}" -ge "$need" ] && return 0
	nr=$(cat /proc/sys/vm/nr_hugepages) || return 1
	echo $((nr + need - ${free:-0})) >/proc/sys/vm/nr_hugepages 2>/dev/null || return 1
	[ -n "$HP_ORIG_NR" ] || HP_ORIG_NR=$nr
	free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
	note "set nr_hugepages $nr -> $(cat /proc/sys/vm/nr_hugepages) for DPDK (put back at exit)"
	[ "${free:-0}" -ge "$need" ]
}

# A hugetlbfs mount for DPDK: 0 when one is there or we made it (unmounted
# at exit).
hugetlbfs_mount() {
	awk '$3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts && return 0
	mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages || return 1
	HP_MOUNTED=/dev/hugepages
	note "mounted hugetlbfs on /dev/hugepages for DPDK (unmounted at exit)"
}

# The bracketed word of shmem_enabled; as root, "never"/"deny" become
# "advise" for this run (BENCH_THP=0: untouched).
thp_setup() {
	local cur
	[ -r "$THP_SHMEM" ] || { note "sheaf huge pages: $THP_SHMEM missing (4 KiB pages)"; return; }
	cur=$(sed 's/.*\[\(.*\)\].*/\1/' "$THP_SHMEM")
	if [ "${BENCH_THP:-1}" = 0 ]; then
		note "sheaf huge pages: shmem_enabled '$cur' left alone (BENCH_THP=0)"
	elif [ "$cur" = never ] || [ "$cur" = deny ]; then
		if [ "$(id -u)" = 0 ] && echo advise >"$THP_SHMEM" 2>/dev/null; then
			THP_ORIG=$cur
			note "set $THP_SHMEM '$cur' -> 'advise' (put back at exit): sheaf's object data on 2 MiB pages (its default huge_pages=try)"
		else
			note "sheaf huge pages: shmem_enabled is '$cur' and run.sh is not root: 4 KiB pages"
		fi
	else
		note "sheaf huge pages: shmem_enabled '$cur': sheaf's object data on 2 MiB pages (huge_pages=try)"
	fi
}

dpdk_check() {
	local free
	if [ ! -x "$DPDKBENCH" ]; then
		if pkg-config --exists libdpdk 2>/dev/null; then
			note "dpdk skipped: $DPDKBENCH not built (run it through make bench)"
		else
			note "dpdk skipped: pkg-config libdpdk failed (libdpdk-dev not installed), dpdkbench not built"
		fi
		return 1
	fi
	if [ "$(id -u)" != 0 ]; then
		note "dpdk skipped: not root (DPDK needs hugepages and a hugetlbfs mount)"
		return 1
	fi
	hugepages_raise 32
	free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
	if [ "${free:-0}" -lt 32 ]; then
		note "dpdk skipped: ${free:-0} free 2 MiB hugepages, need 32 (echo 64 > /proc/sys/vm/nr_hugepages)"
		return 1
	fi
	hugetlbfs_mount || { note "dpdk skipped: cannot mount hugetlbfs on /dev/hugepages"; return 1; }
	DPDK_LCORES=$(first_two_cpus) || { note "dpdk skipped: needs two CPUs"; return 1; }
	return 0
}

# W7's contenders: w7bench for all; dpdk_mp needs w7dpdk, root, hugepages
# (raised by what is missing, put back at exit: restore_system) and
# hugetlbfs; iceoryx needs w7iox and iox-roudi (started by start_roudi).
w7_ready() {
	local name=$1 free
	if [ ! -x "$W7BENCH" ]; then
		note "W7 $name skipped: $W7BENCH not built (make bench builds it)"
		return 1
	fi
	case $name in
	dpdk_mp|dpdk_mp_b32)
		# the large run's mempools: about 180 MiB (w7dpdk.c)
		local need=64
		[ -n "$(select_names "${ROWS[*]}" "${W7L_ROWS[@]}")" ] && need=160
		[ -x "$W7DPDK" ] || { note "W7 $name skipped: $W7DPDK not built (pkg-config libdpdk failed)"; return 1; }
		[ "$(id -u)" = 0 ] || { note "W7 $name skipped: not root (multi-process DPDK needs hugepages and hugetlbfs)"; return 1; }
		hugepages_raise $need
		free=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
		[ "${free:-0}" -ge $need ] || { note "W7 $name skipped: ${free:-0} free 2 MiB hugepages, need $need"; return 1; }
		hugetlbfs_mount || { note "W7 $name skipped: cannot mount hugetlbfs"; return 1; } ;;
	iceoryx)
		[ -x "$W7IOX" ] || { note "W7 iceoryx skipped: $W7IOX not built (apt-get install iceoryx libiceoryx-binding-c-dev)"; return 1; }
		command -v iox-roudi >/dev/null || { note "W7 iceoryx skipped: no iox-roudi (apt-get install iceoryx)"; return 1; } ;;
	esac
	return 0
}

CONTENDERS=()
requested=$(select_names "${BENCH_CONTENDERS:-${ALL_CONTENDERS[*]}}" "${ALL_CONTENDERS[@]}")
read -r -a ROWS <<<"$(select_names "$(wanted_rows)" "${ALL_ROWS[@]}")"
[ ${#ROWS[@]} -gt 0 ] || die "no row to run (BENCH_ROWS)"

row_wants() {  # row_wants NAME: some selected row has column NAME
	local row
	for row in "${ROWS[@]}"; do
		[[ " ${ROW_COLS[$row]:-$SINGLE_COLS} " == *" $1 "* ]] && return 0
	done
	return 1
}

for name in $requested; do
	row_wants "$name" || continue
	if [ -n "${SONAMES[$name]:-}" ]; then
		# shellcheck disable=SC2086
		if lib=$(find_lib ${SONAMES[$name]}); then
			PRELOAD[$name]=$lib
		else
			note "$name skipped: none of ${SONAMES[$name]} found"
			continue
		fi
	fi
	if [ "${ALLOC[$name]}" = dpdk ]; then
		dpdk_ready || continue
	fi
	if [ "${ALLOC[$name]}" = w7 ]; then
		w7_ready "$name" || continue
	fi
	CONTENDERS+=("$name")
done
[ ${#CONTENDERS[@]} -gt 0 ] || die "no contender to run"

# A row's columns: its contenders that are available and requested.
row_cols() {
	select_names "${ROW_COLS[$1]:-$SINGLE_COLS}" "${CONTENDERS[@]}"
}

# W7 rows need w7bench: drop them with a note when it is missing.
if [ ! -x "$W7BENCH" ] && [ -n "$(select_names "${ROWS[*]}" "${W7_ROWS[@]}" "${W7L_ROWS[@]}")" ]; then
	note "W7 rows skipped: no $W7BENCH (make bench builds it)"
	read -r -a ROWS <<<"$(for row in "${ROWS[@]}"; do
		[[ $row == w7_* ]] || printf '%s ' "$row"; done)"
fi

# Rows need sheafd: drop them with a note when it is missing.
needs_daemon=0
for row in "${ROWS[@]}"; do [ -n "${ROW_DAEMON[$row]:-}" ] && needs_daemon=1; done
if [ $needs_daemon = 1 ] && [ ! -x "$SHEAFD" ]; then
	note "sheafd rows skipped: no sheafd at $BIN_DIR/../../daemon/sheafd (make it)"
	read -r -a ROWS <<<"$(for row in "${ROWS[@]}"; do
		[ -z "${ROW_DAEMON[$row]:-}" ] && printf '%s ' "$row"; done)"
	[ ${#ROWS[@]} -gt 0 ] || die "no row left to run"
	needs_daemon=0
fi

# The groups of the selected rows, in row order.
GROUPS_LIST=()
for row in "${ROWS[@]}"; do
	g=${ROW_GROUP[$row]:-$row}
	[[ " ${GROUPS_LIST[*]} " == *" $g "* ]] || GROUPS_LIST+=("$g")
done

EXTRA_ARGS="--size $SIZE"
[ "$QUICK" = 1 ] && EXTRA_ARGS+=" --quick"
TIMEOUT_CMD=()
command -v timeout >/dev/null && TIMEOUT_CMD=(timeout "$TIMEOUT")

# ---- the binaries we run: copies, so that a rebuild in another shell
# during the run can neither swap them under us nor catch them half-written.
SHEAFD_PID=""
TMP=$(mktemp -d) || die "mktemp failed"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	[ -n "$SHEAFD_PID" ] && kill -TERM "$SHEAFD_PID" 2>/dev/null
	stop_roudi
	rm -rf "$TMP"
	restore_system
}
trap cleanup EXIT

snapshot() {  # snapshot PATH NAME: copy PATH to $TMP/bin/NAME, print the copy
	mkdir -p "$TMP/bin" && cp -p -- "$1" "$TMP/bin/$2" && printf '%s' "$TMP/bin/$2"
}
case " ${CONTENDERS[*]} " in *" sheaf "*) thp_setup ;; esac
RUN_BIN=$(snapshot "$BIN" sheafbench) || die "cannot copy $BIN"
RUN_SHEAFD=""
if [ $needs_daemon = 1 ]; then
	RUN_SHEAFD=$(snapshot "$SHEAFD" sheafd) || die "cannot copy $SHEAFD"
fi
RUN_W7="" RUN_W7DPDK="" RUN_W7IOX=""
[ -x "$W7BENCH" ] && RUN_W7=$(snapshot "$W7BENCH" w7bench)
[ -x "$W7DPDK" ] && RUN_W7DPDK=$(snapshot "$W7DPDK" w7dpdk)
[ -x "$W7IOX" ] && RUN_W7IOX=$(snapshot "$W7IOX" w7iox)
W7_CPUS=$(first_two_cpus || echo 0,1)

# iox-roudi for the W7 iceoryx column: started before the W7 group (unless
# one runs already: then that one serves), stopped at the end.
ROUDI_PID=""
start_roudi() {
	local i
	[[ " ${CONTENDERS[*]} " == *" iceoryx "* ]] || return 0
	[ -n "$ROUDI_PID" ] && return 0     # ours, from an earlier W7 group
	if pgrep -x iox-roudi >/dev/null; then
		note "iceoryx: an iox-roudi was already running: W7 uses it"
		return 0
	fi
	# -m off: RouDi's liveness monitoring declares an application dead
	# when its heartbeat thread misses a beat, which on a loaded machine
	# happens mid-run and leaves the other side waiting for ever
	iox-roudi -c tests/bench/w7/roudi.toml -l error -m off >"$TMP/roudi.log" 2>&1 &
	ROUDI_PID=$!
	for ((i = 0; i < 50; i++)); do
		grep -q "RouDi is ready" "$TMP/roudi.log" 2>/dev/null && return 0
		sleep 0.1
	done
	note "iceoryx: iox-roudi did not become ready in 5 s: $(tail -n 2 "$TMP/roudi.log" | tr '\n' ' ')"
}
stop_roudi() {
	[ -n "$ROUDI_PID" ] || return 0
	kill -TERM "$ROUDI_PID" 2>/dev/null && wait "$ROUDI_PID" 2>/dev/null
	ROUDI_PID=""
}

RUN_DPDK=""
if [ "$DPDK_OK" = 1 ]; then
	RUN_DPDK=$(snapshot "$DPDKBENCH" dpdkbench) || die "cannot copy $DPDKBENCH"
fi

# ---- sheafd ----
SOCK=$TMP/s.sock
SHEAFD_DEAD=0
SHEAFD_EXIT=""
IDLE_CPU=""

sheafd_alive() {
	local state
	[ -n "$SHEAFD_PID" ] && [ -r "/proc/$SHEAFD_PID/stat" ] || return 1
	# bash reaps a dead child at once: the file may vanish under us.
	state=$(sed 's/.*) //' "/proc/$SHEAFD_PID/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$state" ] && [ "$state" != Z ]
}

sheafd_log_tail() { tail -n 3 "$TMP/sheafd.log" 2>/dev/null | tr '\n' ' '; }

start_sheafd() {
	local i
	"$RUN_SHEAFD" --foreground --socket "$SOCK" --nodes 1 --size 1G \
		>"$TMP/sheafd.log" 2>&1 &
	SHEAFD_PID=$!
	for ((i = 0; i < 100; i++)); do
		[ -S "$SOCK" ] && sheafd_alive && break
		sleep 0.1
	done
	if ! sheafd_alive || [ ! -S "$SOCK" ]; then
		note "sheafd did not start (socket $SOCK): $(sheafd_log_tail)"
		FAILED_ANY=1
		SHEAFD_DEAD=1
		return 1
	fi
	progress "sheafd: pid $SHEAFD_PID, socket $SOCK"
}

# SIGTERM, then wait up to 10 s for a clean exit.
stop_sheafd() {
	local i
	[ -n "$SHEAFD_PID" ] || return 0
	if sheafd_alive; then
		kill -TERM "$SHEAFD_PID"
		for ((i = 0; i < 100; i++)); do sheafd_alive || break; sleep 0.1; done
		if sheafd_alive; then
			note "sheafd did not stop within 10 s of SIGTERM (hang): killed"
			kill -KILL "$SHEAFD_PID"
			FAILED_ANY=1
		fi
	fi
	wait "$SHEAFD_PID"
	SHEAFD_EXIT=$?
	if [ "$SHEAFD_EXIT" != 0 ]; then
		note "sheafd exited with status $SHEAFD_EXIT: $(sheafd_log_tail)"
		FAILED_ANY=1
	fi
	SHEAFD_PID=""
}

# A dead sheafd fails every later sheafd run at once (noted once).
check_sheafd() {
	[ "$SHEAFD_DEAD" = 1 ] && return 1
	sheafd_alive && return 0
	SHEAFD_DEAD=1
	FAILED_ANY=1
	note "sheafd (pid $SHEAFD_PID) died during the run ($1): $(sheafd_log_tail)"
	return 1
}

# utime+stime of sheafd (clock ticks), from /proc/PID/stat.
sheafd_ticks() {
	sed 's/.*) //' "/proc/$SHEAFD_PID/stat" | awk '{ print $12 + $13 }'
}

measure_idle() {
	local t0 t1 hz
	check_sheafd "idle measurement" || { FAILS[idle,sheaf]=1; return; }
	hz=$(getconf CLK_TCK)
	progress "[${ROW_LABEL[idle]}] sleeping $IDLE_S s, no client attached"
	t0=$(sheafd_ticks)
	sleep "$IDLE_S"
	t1=$(sheafd_ticks)
	IDLE_CPU=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { printf "%.3f", (b - a) / hz }')
	VALUES[idle,sheaf]="$IDLE_CPU "
	COUNT[idle,sheaf]=1
	progress "[${ROW_LABEL[idle]}] sheafd: $IDLE_CPU s of CPU (utime+stime)"
}

# Attach latency rows: scale_walks --attach N prints
# "attach N=N p50_us X p99_us Y".
measure_attach() {
	local walks=$BIN_DIR/../scale_walks n run line
	[ -x "$walks" ] || { note "no $walks: attach rows skipped"; return; }
	for ((run = 1; run <= ${BENCH_ATTACH_RUNS:-3}; run++)); do
		for n in 1 512; do
			progress "[attach $n proc $run/${BENCH_ATTACH_RUNS:-3}]"
			if ! line=$(timeout "$TIMEOUT" "$walks" --attach "$n" 2>&1 | grep '^attach '); then
				FAILS[attach${n}_p50,sheaf]=1 FAILS[attach${n}_p99,sheaf]=1
				FAILED_ANY=1
				continue
			fi
			VALUES[attach${n}_p50,sheaf]+="$(awk '{ print $4 }' <<<"$line") "
			VALUES[attach${n}_p99,sheaf]+="$(awk '{ print $6 }' <<<"$line") "
			COUNT[attach${n}_p50,sheaf]=$n COUNT[attach${n}_p99,sheaf]=$n
		done
	done
}

# W9 rows: each round runs every mode once paced (readers' row) and once
# flat out (writer's row), modes alternating; W9V keeps each round's value
# for the paired ratios (a ratio of two runs of the same round).
declare -A W9V=()
w9_once() {  # w9_once MODE ROUND PACE ROW FIELD
	local m=$1 round=$2 pace=$3 row=$4 field=$5 bin=$TMP/bin/rcu_table out v
	[ "$m" = dpdk ] && bin=$TMP/bin/w9dpdk
	progress "[${ROW_LABEL[$row]} $round/$(runs_for_row "$row")]"
	if [ "$m" = dpdk ]; then
		out=$("${TIMEOUT_CMD[@]}" "$bin" "$W9_S" 1 $pace 2>&1)
	else
		out=$(SHEAF_SOCKET=$SOCK "${TIMEOUT_CMD[@]}" "$bin" bench "$m" "$W9_S" 1 $pace 2>&1)
	fi
	v=$(grep '^{' <<<"$out" | json_field "$field")
	if [ -z "$v" ]; then
		FAILS[$row,sheaf]=$(( ${FAILS[$row,sheaf]:-0} + 1 ))
		FAILED_ANY=1
		NOTES+=("${ROW_LABEL[$row]} failed: $(tail -n 1 <<<"$out")")
		return
	fi
	VALUES[$row,sheaf]+="$v "
	W9V[$row,$round]=$v
	progress "  $v ${ROW_UNIT[$row]}"
}

measure_w9() {
	local runs round m
	W9_S=${BENCH_W9_S:-$([ "$QUICK" = 1 ] && echo 1 || echo 2)}
	for m in rcu dpdk; do
		local b=$BIN_DIR/rcu_table
		[ $m = dpdk ] && b=$BIN_DIR/w9dpdk
		if [ ! -x "$b" ]; then
			note "no $b (make bench builds it): W9 ${m} rows skipped"
			[ $m = rcu ] && return
		else
			snapshot "$b" "$(basename "$b")" >/dev/null
		fi
	done
	runs=$(runs_for_group w9)
	for ((round = 1; round <= runs; round++)); do
		check_sheafd "W9" || return
		for m in "${W9_MODES[@]}"; do
			[ -x "$TMP/bin/$([ $m = dpdk ] && echo w9dpdk || echo rcu_table)" ] || continue
			w9_once "$m" "$round" "$W9_PACE" "w9_r_$m" mlookups_per_s
			w9_once "$m" "$round" "" "w9_w_$m" mupdates_per_s
		done
	done
	note "W9: 1 reader + 1 writer pinned to two CPUs, $W9_S s a run; readers' rows with the writer paced at $W9_PACE updates/s, writer's rows flat out; dpdk: threads of one process (rte_rcu QSBR, no EAL)"
}

# The median over rounds of ROW_A / ROW_B within the same round.
w9_paired() {
	local a=$1 b=$2 round ratios=()
	for ((round = 1; round <= $(runs_for_group w9); round++)); do
		[ -n "${W9V[$a,$round]:-}" ] && [ -n "${W9V[$b,$round]:-}" ] &&
			ratios+=("$(ratio "${W9V[$a,$round]}" "${W9V[$b,$round]}")")
	done
	[ ${#ratios[@]} -gt 0 ] && summary "${ratios[@]}" | awk '{ printf "%.3f", $1 }'
}

# ---- running ----
declare -A VALUES=()     # row,contender -> "v1 v2 ..."
declare -A FAILS=()      # row,contender -> failed runs
declare -A CAPACITY=()   # contender -> sheaf capacity reported
declare -A COUNT=()      # row,contender -> count of the last good run
FAILED_ANY=0

runs_for_group() {
	if [ -n "${BENCH_RUNS:-}" ]; then echo "$BENCH_RUNS"
	elif [ "$1" = idle ]; then echo 1
	elif [ "$QUICK" = 1 ]; then echo 3
	else echo "${GROUP_RUNS[$1]:-5}"; fi
}
runs_for_row() { runs_for_group "${ROW_GROUP[$1]:-$1}"; }

json_field() {  # json_field NAME < line: a number field of sheafbench's JSON
	sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p"
}

# The command of one cell into CMD (an array).
CMD=()
cell_command() {
	local row=$1 name=$2 count
	if [ "${ROW_GROUP[$row]:-}" = w7 ]; then
		CMD=("$RUN_W7" --peer "${W7_PEER[$name]}"
			--count "${W7_COUNT[$name]}" --pp "${W7_PP[$name]}"
			--socket "$SOCK" --cpus "$W7_CPUS")
		[ "$name" = dpdk_mp ] || [ "$name" = dpdk_mp_b32 ] && CMD+=(--exec "$RUN_W7DPDK")
		[ "$name" = iceoryx ] && CMD+=(--exec "$RUN_W7IOX")
		[ "$(id -u)" = 0 ] && CMD+=(--nice -20)
		[ "$QUICK" = 1 ] && CMD+=(--quick)
		# a W7 run takes seconds: a hung one (a peer stuck) costs 90 s
		[ ${#TIMEOUT_CMD[@]} -gt 0 ] && CMD=(timeout "$(( TIMEOUT < 90 ? TIMEOUT : 90 ))" "${CMD[@]}")
		return
	fi
	if [ "${ROW_GROUP[$row]:-}" = w7l ]; then
		CMD=("$RUN_W7" --peer "${W7_PEER[$name]}" --large
			--count "${W7L_COUNT[$name]}" --pp "${W7L_PP[$name]}"
			--socket "$SOCK" --cpus "$W7_CPUS")
		[ "$name" = dpdk_mp ] && CMD+=(--exec "$RUN_W7DPDK")
		[ "$name" = iceoryx ] && CMD+=(--exec "$RUN_W7IOX")
		[ "$(id -u)" = 0 ] && CMD+=(--nice -20)
		[ "$QUICK" = 1 ] && CMD+=(--quick)
		[ ${#TIMEOUT_CMD[@]} -gt 0 ] && CMD=(timeout "$(( TIMEOUT < 120 ? TIMEOUT : 120 ))" "${CMD[@]}")
		return
	fi
	count=$(( ROW_COUNT[$row] / ${COUNT_DIV[$name]:-1} ))
	if [ "${ALLOC[$name]}" = dpdk ]; then
		# shellcheck disable=SC2206
		CMD=("${TIMEOUT_CMD[@]}" "$RUN_DPDK" -l "$DPDK_LCORES" --no-pci
			--in-memory -m 64 --file-prefix sheafbench --no-telemetry
			--log-level=error -- --handoff "${HANDOFF[$name]}"
			${DPDK_ARGS[$name]:-} --count "$count" $EXTRA_ARGS --json)
		return
	fi
	local preload=(-u LD_PRELOAD)   # glibc, sheaf, mutexpool: no preload
	[ -n "${PRELOAD[$name]}" ] && preload=("LD_PRELOAD=${PRELOAD[$name]}")
	# shellcheck disable=SC2206
	CMD=("${TIMEOUT_CMD[@]}" env "${preload[@]}" "$RUN_BIN"
		--alloc "${ALLOC[$name]}" ${ROW_ARGS[$row]} --count "$count"
		$EXTRA_ARGS ${ROW_TAIL[$row]:-} --json)
	if [ -n "${ROW_DAEMON[$row]:-}" ] && [ "${ALLOC[$name]}" != mutexpool ]; then
		CMD+=(--socket "$SOCK")
	fi
}

uses_daemon() { [ -n "${ROW_DAEMON[$1]:-}" ] && [[ $2 == sheaf || $2 == sheaf0 || $2 == sheaf_b32 ]]; }

# Run CMD once; its output goes to $TMP/out.$1, exit status to RUN_RC[$1].
declare -A RUN_RC=()
execute() {
	local n=$1 row=$2 name=$3
	if uses_daemon "$row" "$name" && ! check_sheafd "before ${ROW_LABEL[$row]} / $name"; then
		: >"$TMP/out.$n"
		echo "sheafd is not running" >"$TMP/err.$n"
		RUN_RC[$n]=125
		return
	fi
	"${CMD[@]}" >"$TMP/out.$n" 2>"$TMP/err.$n"
	RUN_RC[$n]=$?
	uses_daemon "$row" "$name" && check_sheafd "${ROW_LABEL[$row]} / $name"
	if [ "${RUN_RC[$n]}" != 0 ]; then
		FAILED_ANY=1
		progress "[${ROW_LABEL[$row]}] $name: FAILED (exit ${RUN_RC[$n]}): $(tail -n 3 "$TMP/err.$n" | tr '\n' ' ')"
		NOTES+=("${ROW_LABEL[$row]} / $name failed (exit ${RUN_RC[$n]}): $(tail -n 1 "$TMP/err.$n")")
	fi
}

# Record one cell's value from run $1's output.
record() {
	local n=$1 row=$2 name=$3 tag=$4 value cap
	value=$(json_field "${ROW_FIELD[$row]:-value}" <"$TMP/out.$n")
	if [ "${RUN_RC[$n]}" != 0 ] || [ -z "$value" ]; then
		FAILS[$row,$name]=$(( ${FAILS[$row,$name]:-0} + 1 ))
		if [ "${RUN_RC[$n]}" = 0 ]; then
			FAILED_ANY=1
			NOTES+=("${ROW_LABEL[$row]} / $name: no ${ROW_FIELD[$row]:-value} in the output")
		fi
		return
	fi
	VALUES[$row,$name]+="$value "
	COUNT[$row,$name]=$(json_field count <"$TMP/out.$n")
	cap=$(json_field capacity <"$TMP/out.$n")
	[ -n "$cap" ] && [ "${ROW_GROUP[$row]:-}" != w6 ] && CAPACITY[$name]=$cap
	progress "$tag $name: $value ${ROW_UNIT[$row]}"
}

# One round of a group: each distinct command once, in row and column
# order (so contenders alternate), its output read by every cell using it.
RUN_SEQ=0
run_round() {
	local group=$1 round=$2 runs=$3 row name key
	local -A ran=()
	for row in "${ROWS[@]}"; do
		[ "${ROW_GROUP[$row]:-$row}" = "$group" ] || continue
		for name in $(row_cols "$row"); do
			cell_command "$row" "$name"
			key="${CMD[*]}"
			if [ -z "${ran[$key]:-}" ]; then
				RUN_SEQ=$((RUN_SEQ + 1))
				ran[$key]=$RUN_SEQ
				execute "$RUN_SEQ" "$row" "$name"
			fi
			record "${ran[$key]}" "$row" "$name" "[${ROW_LABEL[$row]} $round/$runs]"
		done
	done
}

run_group() {
	local group=$1 runs round row
	if [ "$group" = idle ]; then
		measure_idle
		return
	fi
	if [ "$group" = attach ]; then
		measure_attach
		return
	fi
	if [ "$group" = w9 ]; then
		measure_w9
		return
	fi
	[ "$group" = w7 ] || [ "$group" = w7l ] && start_roudi
	runs=$(runs_for_group "$group")
	for ((round = 1; round <= runs; round++)); do
		run_round "$group" "$round" "$runs"
	done
}

group_needs_daemon() {
	local row
	for row in "${ROWS[@]}"; do
		[ "${ROW_GROUP[$row]:-$row}" = "$1" ] && [ -n "${ROW_DAEMON[$row]:-}" ] &&
			return 0
	done
	return 1
}

START=$(date +%s)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
progress "sheaf bench: $BIN, size $SIZE, contenders: ${CONTENDERS[*]}$([ "$QUICK" = 1 ] && echo ', quick')"
for group in "${GROUPS_LIST[@]}"; do
	if group_needs_daemon "$group" && [ -z "$SHEAFD_PID" ] && [ "$SHEAFD_DEAD" = 0 ]; then
		start_sheafd
	fi
	run_group "$group"
done
stop_sheafd
stop_roudi
ELAPSED=$(( $(date +%s) - START ))

# ---- statistics ----
# "median min max n" of the numbers given, or nothing when none.
summary() {
	printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) exit
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.4f %.4f %.4f %d\n", m, v[1], v[NR], NR
		}'
}

ratio() {  # ratio A B: A / B with 3 decimals, or nothing
	[ -n "$1" ] && [ -n "$2" ] &&
		awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'
}

# The best of @names (by median) in @row, per the row's better direction.
best_of() {
	local row=$1 best="" name m; shift
	for name in "$@"; do
		m=${MEDIAN[$row,$name]:-}
		[ -n "$m" ] || continue
		if [ -z "$best" ] || awk -v a="$m" -v b="${MEDIAN[$row,$best]}" \
			-v dir="${ROW_BETTER[$row]}" \
			'BEGIN { exit !(dir == "lower" ? a < b : a > b) }'; then
			best=$name
		fi
	done
	printf '%s' "$best"
}

declare -A MEDIAN=() MIN=() MAX=()
declare -A BEST_PEER=() RATIO=() RATIO_TEXT=()
for row in "${ROWS[@]}"; do
	for name in $(row_cols "$row"); do
		# shellcheck disable=SC2086
		read -r m lo hi _ <<<"$(summary ${VALUES[$row,$name]:-})"
		[ -n "${m:-}" ] || continue
		MEDIAN[$row,$name]=$m MIN[$row,$name]=$lo MAX[$row,$name]=$hi
	done
done
for row in "${ROWS[@]}"; do
	kind=${ROW_RATIO[$row]:-peers}
	if [ "$kind" = peers ]; then
		# shellcheck disable=SC2046
		best=$(best_of "$row" $(select_names "${PEERS[*]}" $(row_cols "$row")))
		BEST_PEER[$row]=$best
		[ -n "$best" ] && RATIO[$row]=$(ratio "${MEDIAN[$row,sheaf]:-}" "${MEDIAN[$row,$best]}")
		[ -n "${RATIO[$row]:-}" ] &&
			RATIO_TEXT[$row]="${RATIO[$row]}x vs $best (${ROW_BETTER[$row]} is better)"
	elif [[ $kind == base:* ]]; then
		base=${kind#base:}
		RATIO[$row]=$(ratio "${MEDIAN[$row,sheaf]:-}" "${MEDIAN[$base,sheaf]:-}")
		[ -n "${RATIO[$row]:-}" ] &&
			RATIO_TEXT[$row]="${RATIO[$row]}x of 1 proc (ideal 1)"
	fi
done

# ---- target ratios ----
declare -A TARGET=() TARGET_TEXT=()
TARGET_ORDER=()
add_target() {  # add_target ID TEXT VALUE
	TARGET_ORDER+=("$1")
	TARGET[$1]=$3
	TARGET_TEXT[$1]=$2
}
best_xthread=$(best_of w3 "${SINGLE_PEERS[@]}")
add_target w3p_sheaf_vs_best_xthread_peer \
	"W3 cross-process sheaf / best single-process peer's W3 cross-thread${best_xthread:+ ($best_xthread)}" \
	"$(ratio "${MEDIAN[w3p,sheaf]:-}" "${MEDIAN[w3,$best_xthread]:-}")"
add_target w3p_sheaf_vs_dpdk "W3 cross-process sheaf / dpdk cross-lcore (rte_ring hand-off)" \
	"$(ratio "${MEDIAN[w3p,sheaf]:-}" "${MEDIAN[w3p,dpdk]:-}")"
add_target w3p_sheaf_vs_dpdk_spsc "W3 cross-process sheaf / dpdk cross-lcore (same SPSC ring as sheaf)" \
	"$(ratio "${MEDIAN[w3p,sheaf]:-}" "${MEDIAN[w3p,dpdk_spsc]:-}")"
add_target w3p_sheaf_vs_dpdk_bulk "W3 cross-process sheaf / dpdk cross-lcore (SPSC ring, get/put bulk 32)" \
	"$(ratio "${MEDIAN[w3p,sheaf]:-}" "${MEDIAN[w3p,dpdk_bulk]:-}")"
add_target w3p_sheaf_vs_mutexpool "W3 cross-process sheaf / mutex-pool" \
	"$(ratio "${MEDIAN[w3p,sheaf]:-}" "${MEDIAN[w3p,mutexpool]:-}")"
add_target w3p_vs_w3_sheaf "W3 sheaf cross-process / sheaf cross-thread" \
	"$(ratio "${MEDIAN[w3p,sheaf]:-}" "${MEDIAN[w3,sheaf]:-}")"
add_target w8p_sheaf_vs_best_peer "W8 mixed sizes pair: sheaf / best peer (goal <= 0.5)" \
	"${RATIO[w8p]:-}"
add_target w8b_sheaf_vs_best_peer "W8 mixed sizes B=4096: sheaf / best peer (goal <= 0.8)" \
	"${RATIO[w8b]:-}"
add_target w8ps_sheaf_vs_best_peer "W8 sized frees pair: sheaf / best peer, each its sized free" \
	"${RATIO[w8ps]:-}"
add_target w8bs_sheaf_vs_best_peer "W8 sized frees B=4096: sheaf / best peer, each its sized free" \
	"${RATIO[w8bs]:-}"
add_target w8bs_vs_w8b_sheaf "W8 B=4096 sheaf: sheaf_free_sized / sheaf_free_any" \
	"$(ratio "${MEDIAN[w8bs,sheaf]:-}" "${MEDIAN[w8b,sheaf]:-}")"
for row in "${W10_ROWS[@]}"; do
	add_target "${row}_sheaf_vs_best_peer" "${ROW_LABEL[$row]}: sheaf / best peer (goal <= 0.8)" \
		"${RATIO[$row]:-}"
done
for row in "${W13_ROWS[@]}"; do
	add_target "${row}_sheaf_vs_best_peer" "${ROW_LABEL[$row]}: sheaf / lowest peer's RSS (goal <= 1.25)" \
		"${RATIO[$row]:-}"
done
for row in "${W14_ROWS[@]}"; do
	add_target "${row}_sheaf_vs_tcmalloc" "${ROW_LABEL[$row]}: sheaf / tcmalloc (goal <= 1.0)" \
		"$(ratio "${MEDIAN[$row,sheaf]:-}" "${MEDIAN[$row,tcmalloc]:-}")"
done
for row in "${W12_ROWS[@]}"; do
	add_target "${row}_sheaf_vs_best_peer" \
		"${ROW_LABEL[$row]}: sheaf / best peer (goal <= $([ "$row" = w12_10 ] && echo 1.5 || echo 1.0))" \
		"${RATIO[$row]:-}"
done
# slots (a ring of message slots: no allocator, no pointer queue, no
# check): the messages alone against each peer, and sheaf against it
for sz in 64 1k; do
	for who in sheaf slots; do
		for peer in dpdk_mp iceoryx socket; do
			add_target "w7_${sz}_${who}_vs_$peer" \
				"W7 $sz ${TITLE[$who]:-$who} / ${TITLE[$peer]:-$peer} (one message at a time)" \
				"$(ratio "${MEDIAN[w7_$sz,$who]:-}" "${MEDIAN[w7_$sz,$peer]:-}")"
		done
		add_target "w7_${sz}_${who}_b32_vs_dpdk_mp_b32" "W7 $sz ${TITLE[${who}_b32]} / dpdk 2-proc bulk 32" \
			"$(ratio "${MEDIAN[w7_$sz,${who}_b32]:-}" "${MEDIAN[w7_$sz,dpdk_mp_b32]:-}")"
	done
	for b in "" _b32; do
		add_target "w7_${sz}_sheaf${b}_vs_slots$b" "W7 $sz ${TITLE[sheaf$b]:-sheaf} / ${TITLE[slots$b]}" \
			"$(ratio "${MEDIAN[w7_$sz,sheaf$b]:-}" "${MEDIAN[w7_$sz,slots$b]:-}")"
	done
done
# W7 large messages: the issue's goals
for sz in 64k 1m 4m; do
	add_target "w7_${sz}_whole_sheaf_vs_slots" "W7 ${W7L_LABEL[$sz]} whole: sheaf / slot ring (goal >= 0.9)" \
		"$(ratio "${MEDIAN[w7_${sz}_whole,sheaf]:-}" "${MEDIAN[w7_${sz}_whole,slots]:-}")"
	for peer in iceoryx socket dpdk_mp; do
		add_target "w7_${sz}_pages_sheaf_vs_$peer" \
			"W7 ${W7L_LABEL[$sz]} pages: sheaf / ${TITLE[$peer]:-$peer}$([ $sz = 1m ] && case $peer in iceoryx) echo ' (goal >= 2)';; socket) echo ' (goal >= 50)';; esac)" \
			"$(ratio "${MEDIAN[w7_${sz}_pages,sheaf]:-}" "${MEDIAN[w7_${sz}_pages,$peer]:-}")"
	done
	add_target "w7_${sz}_pp_vs_64_sheaf" "W7 ping-pong p50 ${W7L_LABEL[$sz]} / 64 B, sheaf, first line$([ $sz = 1m ] && echo ' (goal <= 1.5)')" \
		"$(ratio "${MEDIAN[w7_${sz}_pp,sheaf]:-}" "${MEDIAN[w7_64_pp,sheaf]:-}")"
done
add_target w7_pp50_64_dpdk_mp_vs_sheaf "W7 ping-pong 64 B p50: dpdk 2-proc / sheaf (>1: sheaf faster)" \
	"$(ratio "${MEDIAN[w7_pp50_64,dpdk_mp]:-}" "${MEDIAN[w7_pp50_64,sheaf]:-}")"
for n in "${PROCS[@]}"; do
	[ "$n" = 1 ] && continue
	for w in w1 w2; do
		add_target "w4_${w}_${n}p_vs_1p" \
			"W4 ${w^^} ${n}-proc / 1-proc per-process ops (ideal 1)" \
			"$(ratio "${MEDIAN[w4_${w}_$n,sheaf]:-}" "${MEDIAN[w4_${w}_1,sheaf]:-}")"
	done
done

for m in rcu qsbr; do
	add_target "w9_${m}_vs_none" "W9 readers sheaf $m / unsynchronized reads (paired; goal >= 0.833, i.e. within 1.2x)" \
		"$(w9_paired "w9_r_$m" w9_r_none)"
	add_target "w9_${m}_vs_rwlock" "W9 readers sheaf $m / pthread rwlock (paired; goal >= 5)" \
		"$(w9_paired "w9_r_$m" w9_r_rwlock)"
	add_target "w9_${m}_vs_dpdk" "W9 readers sheaf $m / DPDK rte_rcu QSBR in one process (paired)" \
		"$(w9_paired "w9_r_$m" w9_r_dpdk)"
	add_target "w9_writer_${m}_vs_rwlock" "W9 writer sheaf $m / pthread rwlock (paired)" \
		"$(w9_paired "w9_w_$m" w9_w_rwlock)"
	add_target "w9_writer_${m}_vs_dpdk" "W9 writer sheaf $m / DPDK rte_rcu QSBR (paired)" \
		"$(w9_paired "w9_w_$m" w9_w_dpdk)"
done

# ---- the table ----
fmt() { awk -v x="$1" 'BEGIN { printf (x >= 100 ? "%.0f" : "%.2f"), x }'; }

cell() {
	local key=$1
	if [ -n "${MEDIAN[$key]:-}" ]; then
		printf '%s (%s-%s)' "$(fmt "${MEDIAN[$key]}")" \
			"$(fmt "${MIN[$key]}")" "$(fmt "${MAX[$key]}")"
		[ -n "${FAILS[$key]:-}" ] && printf ' %sxFAIL' "${FAILS[$key]}"
	elif [ -n "${FAILS[$key]:-}" ]; then
		printf 'FAIL'
	else
		printf -- '-'
	fi
}

# The columns of the table: contenders that some row has.
TABLE_COLS=()
for name in "${CONTENDERS[@]}"; do
	for row in "${ROWS[@]}"; do
		if [[ " $(row_cols "$row") " == *" $name "* ]]; then
			TABLE_COLS+=("$name")
			break
		fi
	done
done

print_table() {
	local row name header target
	printf '\nsheaf benchmark, %s-byte objects, median (min-max) of the runs%s\n' \
		"$SIZE" "$([ "$QUICK" = 1 ] && echo ', QUICK')"
	printf '%-44s' "workload [unit] x runs"
	for name in "${TABLE_COLS[@]}"; do
		header=${TITLE[$name]:-$name}
		[ -n "${CAPACITY[$name]:-}" ] && header+=" (cap ${CAPACITY[$name]})"
		printf ' %-24s' "$header"
	done
	printf ' %s\n' "sheaf / best peer"
	for row in "${ROWS[@]}"; do
		printf '%-44s' "${ROW_LABEL[$row]} [${ROW_UNIT[$row]}] x$(runs_for_row "$row")"
		for name in "${TABLE_COLS[@]}"; do
			if [[ " $(row_cols "$row") " == *" $name "* ]]; then
				printf ' %-24s' "$(cell "$row,$name")"
			else
				printf ' %-24s' ""
			fi
		done
		printf ' %s\n' "${RATIO_TEXT[$row]:--}"
	done
	printf 'targets:\n'
	for target in "${TARGET_ORDER[@]}"; do
		printf '  %-80s %s\n' "${TARGET_TEXT[$target]}" \
			"$([ -n "${TARGET[$target]}" ] && printf '%sx' "${TARGET[$target]}" || printf 'n/a (not measured)')"
	done
	for note in "${NOTES[@]}"; do
		printf 'note: %s\n' "$note"
	done
	printf 'total %d s; JSON: %s\n' "$ELAPSED" "$JSON_FILE"
}

# ---- JSON ----
json_str() {  # a JSON string of $1 (backslash, quote and control characters)
	printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' |
		tr '\t\r\n' '   ')"
}

json_num_or_null() { if [ -n "$1" ]; then printf '%s' "$1"; else printf null; fi; }

json_list() {  # the numbers given, as a JSON array
	local sep="" x
	printf '['
	for x in "$@"; do printf '%s%s' "$sep" "$x"; sep=","; done
	printf ']'
}

json_result() {
	local key=$1
	# shellcheck disable=SC2086
	printf '{"count":%s,"runs":%s,"median":%s,"min":%s,"max":%s,"failures":%d}' \
		"$(json_num_or_null "${COUNT[$key]:-}")" \
		"$(json_list ${VALUES[$key]:-})" \
		"$(json_num_or_null "${MEDIAN[$key]:-}")" \
		"$(json_num_or_null "${MIN[$key]:-}")" \
		"$(json_num_or_null "${MAX[$key]:-}")" "${FAILS[$key]:-0}"
}

json_row() {
	local row=$1 name sep=""
	printf '    {"id":%s,"label":%s,"group":%s,"args":%s,"field":%s,"metric":%s,"unit":%s,' \
		"$(json_str "$row")" "$(json_str "${ROW_LABEL[$row]}")" \
		"$(json_str "${ROW_GROUP[$row]:-$row}")" \
		"$(json_str "${ROW_ARGS[$row]} $EXTRA_ARGS")" \
		"$(json_str "${ROW_FIELD[$row]:-value}")" \
		"$(json_str "${ROW_METRIC[$row]}")" "$(json_str "${ROW_UNIT[$row]}")"
	printf '"better":%s,"rounds":%d,"sheafd":%s,\n     "results":{' \
		"$(json_str "${ROW_BETTER[$row]}")" "$(runs_for_row "$row")" \
		"$([ -n "${ROW_DAEMON[$row]:-}" ] && echo true || echo false)"
	for name in $(row_cols "$row"); do
		printf '%s\n      %s:%s' "$sep" "$(json_str "$name")" \
			"$(json_result "$row,$name")"
		sep=","
	done
	printf '},\n     "best_peer":%s,"ratio_sheaf_to_best_peer":%s,"ratio_kind":%s,"ratio":%s}' \
		"$([ -n "${BEST_PEER[$row]:-}" ] && json_str "${BEST_PEER[$row]}" || printf null)" \
		"$(json_num_or_null "$([ -n "${BEST_PEER[$row]:-}" ] && printf '%s' "${RATIO[$row]:-}")")" \
		"$(json_str "${ROW_RATIO[$row]:-peers}")" \
		"$(json_num_or_null "${RATIO[$row]:-}")"
}

write_json() {
	local name row sep note target
	printf '{\n  "timestamp":%s,"host":%s,"cpus":%s,"commit":%s,\n' \
		"$(json_str "$STAMP")" "$(json_str "$(uname -n)")" "$NCPU" \
		"$(json_str "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")"
	printf '  "binary":%s,"size":%d,"quick":%s,"elapsed_s":%d,\n' \
		"$(json_str "$BIN")" "$SIZE" \
		"$([ "$QUICK" = 1 ] && echo true || echo false)" "$ELAPSED"
	printf '  "sheafd":{"binary":%s,"args":%s,"exit_status":%s,"idle_s":%d,"idle_cpu_s":%s},\n' \
		"$(json_str "$SHEAFD")" "$(json_str "--foreground --nodes 1 --size 1G")" \
		"$(json_num_or_null "$SHEAFD_EXIT")" "$IDLE_S" \
		"$(json_num_or_null "$IDLE_CPU")"
	printf '  "contenders":{'
	sep=""
	for name in "${TABLE_COLS[@]}"; do
		printf '%s\n    %s:{"alloc":%s,"preload":%s,"peer":%s,"capacity":%s}' \
			"$sep" "$(json_str "$name")" "$(json_str "${ALLOC[$name]}")" \
			"$(json_str "${PRELOAD[$name]}")" \
			"$([[ " ${PEERS[*]} " == *" $name "* ]] && echo true || echo false)" \
			"$(json_num_or_null "${CAPACITY[$name]:-}")"
		sep=","
	done
	printf '},\n  "targets":{'
	sep=""
	for target in "${TARGET_ORDER[@]}"; do
		printf '%s\n    %s:{"label":%s,"ratio":%s}' "$sep" "$(json_str "$target")" \
			"$(json_str "${TARGET_TEXT[$target]}")" \
			"$(json_num_or_null "${TARGET[$target]}")"
		sep=","
	done
	printf '},\n  "notes":['
	sep=""
	for note in "${NOTES[@]}"; do
		printf '%s%s' "$sep" "$(json_str "$note")"; sep=","
	done
	printf '],\n  "rows":[\n'
	sep=""
	for row in "${ROWS[@]}"; do
		printf '%s' "$sep"; json_row "$row"; sep=$',\n'
	done
	printf '\n  ]\n}\n'
}

mkdir -p results || die "cannot create results/"
JSON_FILE=results/bench-$STAMP.json
write_json >"$JSON_FILE" || die "cannot write $JSON_FILE"
cp -f -- "$JSON_FILE" results/latest.json
print_table | tee "results/bench-$STAMP.txt"
cp -f -- "results/bench-$STAMP.txt" results/latest.txt
exit $FAILED_ANY
