#!/usr/bin/env bash
# run.sh - the sheaf benchmark driver (`make bench`).
#
# What it measures: the workloads of BENCHMARKS.md that sheafbench implements,
# one row each -- W1 (alloc+free pairs, ns/pair), W2 with B=4096 and with
# B=2^20 (batch alloc then free, ns/op), W3 cross-thread (producer -> SPSC
# ring -> consumer that frees, pinned to two CPUs, million objects/s) -- for
# every contender: sheaf, sheaf0 (sheaves disabled), and the peers glibc,
# jemalloc, tcmalloc (minimal) and mimalloc, each run in its own process
# (`sheafbench --alloc malloc` under LD_PRELOAD; glibc is no preload).  A
# peer whose library is not installed is skipped with a note.  Counts per
# run: W1 10^8 pairs, W2 2*10^7 operations, W3 10^7 objects; sheaf0 runs a
# tenth of that (it is 10-20x slower per operation); figures are per
# operation or per second, so they compare all the same.
#
# The contenders are alternated round-robin, R rounds per row (R=5 for W1/W2,
# R=7 for W3), so that machine noise hits them alike.  The table on stdout
# shows each contender's median (min-max) and the ratio of sheaf's median to
# the best peer's (peers: glibc, jemalloc, tcmalloc, mimalloc); the direction
# that is better is printed with it.  The same data goes, as JSON, to
# results/bench-<UTC timestamp>.json and results/latest.json.  Progress goes
# to stderr.  Exit status 1 when any run failed (its cell shows FAIL).
#
# Usage (from anywhere; it works from the repository root):
#   tests/bench/run.sh build/tests/bench/sheafbench      # or: make bench
# Environment:
#   BENCH_QUICK=1        pass --quick (counts / 10) and use R=3
#   BENCH_RUNS=N         rounds per row (overrides R)
#   BENCH_SIZE=BYTES     object size (default 64)
#   BENCH_ROWS="..."     subset of rows: w1 w2_4096 w2_1m w3
#   BENCH_CONTENDERS=".." subset of: sheaf sheaf0 glibc jemalloc tcmalloc mimalloc
#   BENCH_TIMEOUT=SEC    limit per run (default 300)
set -u -o pipefail

progress() { printf '%s\n' "$*" >&2; }
die() { progress "run.sh: error: $*"; exit 2; }

[ $# -eq 1 ] || die "usage: $0 path/to/sheafbench"
BIN=$(readlink -f -- "$1") || die "no such file: $1"
[ -x "$BIN" ] || die "not an executable: $1"
REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO_ROOT" || die "cannot cd to $REPO_ROOT"

QUICK=${BENCH_QUICK:-0}
SIZE=${BENCH_SIZE:-64}
TIMEOUT=${BENCH_TIMEOUT:-300}
[[ $SIZE =~ ^[0-9]+$ ]] || die "BENCH_SIZE must be a number"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "BENCH_TIMEOUT must be a number"
[[ ${BENCH_RUNS:-1} =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be >= 1"

# ---- rows: id | label | sheafbench args | metric | unit | better | R ----
ALL_ROWS=(w1 w2_4096 w2_1m w3)
declare -A ROW_LABEL=([w1]="W1 pair" [w2_4096]="W2 B=4096"
	[w2_1m]="W2 B=2^20" [w3]="W3 cross-thread")
declare -A ROW_ARGS=([w1]="--workload w1" [w2_4096]="--workload w2 --batch 4096"
	[w2_1m]="--workload w2 --batch 1048576" [w3]="--workload w3")
declare -A ROW_METRIC=([w1]=ns_per_pair [w2_4096]=ns_per_op [w2_1m]=ns_per_op
	[w3]=mobj_per_s)
declare -A ROW_UNIT=([w1]=ns/pair [w2_4096]=ns/op [w2_1m]=ns/op [w3]=Mobj/s)
declare -A ROW_BETTER=([w1]=lower [w2_4096]=lower [w2_1m]=lower [w3]=higher)
declare -A ROW_RUNS=([w1]=5 [w2_4096]=5 [w2_1m]=5 [w3]=7)
# --count per row: w1 pairs, w2 timed operations, w3 objects (sheafbench's
# defaults, written out so that they can be divided per contender).
declare -A ROW_COUNT=([w1]=100000000 [w2_4096]=20000000 [w2_1m]=20000000
	[w3]=10000000)

# ---- contenders: name -> --alloc, LD_PRELOAD ----
ALL_CONTENDERS=(sheaf sheaf0 glibc jemalloc tcmalloc mimalloc)
PEERS=(glibc jemalloc tcmalloc mimalloc)
declare -A ALLOC=([sheaf]=sheaf [sheaf0]=sheaf0 [glibc]=malloc
	[jemalloc]=malloc [tcmalloc]=malloc [mimalloc]=malloc)
declare -A PRELOAD=([sheaf]="" [sheaf0]="" [glibc]="")
declare -A SONAMES=([jemalloc]="libjemalloc.so.2 libjemalloc.so"
	[tcmalloc]="libtcmalloc_minimal.so.4 libtcmalloc_minimal.so libtcmalloc.so.4"
	[mimalloc]="libmimalloc.so.2 libmimalloc.so")
# sheaf0 (every operation through the barn) is 10-20x slower per operation:
# it runs a tenth of the count, so that it takes no longer than the others.
declare -A COUNT_DIV=([sheaf0]=10)
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

NOTES=()
CONTENDERS=()
requested=$(select_names "${BENCH_CONTENDERS:-${ALL_CONTENDERS[*]}}" "${ALL_CONTENDERS[@]}")
for name in $requested; do
	if [ -n "${SONAMES[$name]:-}" ]; then
		# shellcheck disable=SC2086
		if lib=$(find_lib ${SONAMES[$name]}); then
			PRELOAD[$name]=$lib
		else
			NOTES+=("$name skipped: none of ${SONAMES[$name]} found")
			progress "note: ${NOTES[-1]}"
			continue
		fi
	fi
	CONTENDERS+=("$name")
done
read -r -a ROWS <<<"$(select_names "${BENCH_ROWS:-${ALL_ROWS[*]}}" "${ALL_ROWS[@]}")"
[ ${#CONTENDERS[@]} -gt 0 ] || die "no contender to run"
[ ${#ROWS[@]} -gt 0 ] || die "no row to run (BENCH_ROWS)"

EXTRA_ARGS="--size $SIZE"
[ "$QUICK" = 1 ] && EXTRA_ARGS+=" --quick"
TIMEOUT_CMD=()
command -v timeout >/dev/null && TIMEOUT_CMD=(timeout "$TIMEOUT")

# ---- running ----
declare -A VALUES=()     # row,contender -> "v1 v2 ..."
declare -A FAILS=()      # row,contender -> failed runs
declare -A CAPACITY=()   # contender -> sheaf capacity reported
declare -A COUNT=()      # row,contender -> count of the last good run
FAILED_ANY=0
TMP=$(mktemp -d) || die "mktemp failed"
trap 'rm -rf "$TMP"' EXIT

runs_for_row() {
	if [ -n "${BENCH_RUNS:-}" ]; then echo "$BENCH_RUNS"
	elif [ "$QUICK" = 1 ]; then echo 3
	else echo "${ROW_RUNS[$1]}"; fi
}

json_field() {  # json_field NAME < line: a number field of sheafbench's JSON
	sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p"
}

# Run one contender on one row once; record the value or the failure.
run_one() {
	local row=$1 name=$2 tag=$3 rc value cap count
	count=$(( ROW_COUNT[$row] / ${COUNT_DIV[$name]:-1} ))
	local preload=(-u LD_PRELOAD)   # glibc and sheaf: no preload at all
	[ -n "${PRELOAD[$name]}" ] && preload=("LD_PRELOAD=${PRELOAD[$name]}")
	# shellcheck disable=SC2086
	"${TIMEOUT_CMD[@]}" env "${preload[@]}" "$BIN" \
		--alloc "${ALLOC[$name]}" ${ROW_ARGS[$row]} --count "$count" \
		$EXTRA_ARGS --json \
		>"$TMP/out" 2>"$TMP/err"
	rc=$?
	value=$(json_field value <"$TMP/out")
	if [ $rc -ne 0 ] || [ -z "$value" ]; then
		FAILS[$row,$name]=$(( ${FAILS[$row,$name]:-0} + 1 ))
		FAILED_ANY=1
		progress "$tag $name: FAILED (exit $rc): $(tail -n 3 "$TMP/err" | tr '\n' ' ')"
		NOTES+=("${ROW_LABEL[$row]} / $name failed (exit $rc): $(tail -n 1 "$TMP/err")")
		return
	fi
	VALUES[$row,$name]+="$value "
	COUNT[$row,$name]=$(json_field count <"$TMP/out")
	cap=$(json_field capacity <"$TMP/out")
	[ -n "$cap" ] && CAPACITY[$name]=$cap
	progress "$tag $name: $value ${ROW_UNIT[$row]}"
}

run_row() {
	local row=$1 runs round name
	runs=$(runs_for_row "$row")
	for ((round = 1; round <= runs; round++)); do
		for name in "${CONTENDERS[@]}"; do
			run_one "$row" "$name" "[${ROW_LABEL[$row]} $round/$runs]"
		done
	done
}

START=$(date +%s)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
progress "sheaf bench: $BIN, size $SIZE, contenders: ${CONTENDERS[*]}$([ "$QUICK" = 1 ] && echo ', quick')"
for row in "${ROWS[@]}"; do
	run_row "$row"
done
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

declare -A MEDIAN=() MIN=() MAX=()
declare -A BEST_PEER=() RATIO=()
for row in "${ROWS[@]}"; do
	for name in "${CONTENDERS[@]}"; do
		# shellcheck disable=SC2086
		read -r m lo hi _ <<<"$(summary ${VALUES[$row,$name]:-})"
		[ -n "${m:-}" ] || continue
		MEDIAN[$row,$name]=$m MIN[$row,$name]=$lo MAX[$row,$name]=$hi
	done
	best=""
	for name in "${PEERS[@]}"; do
		m=${MEDIAN[$row,$name]:-}
		[ -n "$m" ] || continue
		if [ -z "$best" ] || awk -v a="$m" -v b="${MEDIAN[$row,$best]}" \
			-v dir="${ROW_BETTER[$row]}" \
			'BEGIN { exit !(dir == "lower" ? a < b : a > b) }'; then
			best=$name
		fi
	done
	BEST_PEER[$row]=$best
	if [ -n "$best" ] && [ -n "${MEDIAN[$row,sheaf]:-}" ]; then
		RATIO[$row]=$(awk -v s="${MEDIAN[$row,sheaf]}" \
			-v p="${MEDIAN[$row,$best]}" \
			'BEGIN { if (p > 0) printf "%.3f", s / p }')
	fi
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

print_table() {
	local row name ratio header
	printf '\nsheaf benchmark, %s-byte objects, median (min-max) of the runs%s\n' \
		"$SIZE" "$([ "$QUICK" = 1 ] && echo ', QUICK')"
	printf '%-28s' "workload [unit] x runs"
	for name in "${CONTENDERS[@]}"; do
		header=$name
		[ -n "${CAPACITY[$name]:-}" ] && header+=" (cap ${CAPACITY[$name]})"
		printf ' %-25s' "$header"
	done
	printf ' %s\n' "sheaf / best peer"
	for row in "${ROWS[@]}"; do
		printf '%-28s' "${ROW_LABEL[$row]} [${ROW_UNIT[$row]}] x$(runs_for_row "$row")"
		for name in "${CONTENDERS[@]}"; do
			printf ' %-25s' "$(cell "$row,$name")"
		done
		ratio=${RATIO[$row]:-}
		if [ -n "$ratio" ]; then
			printf ' %sx vs %s (%s is better)\n' "$ratio" \
				"${BEST_PEER[$row]}" "${ROW_BETTER[$row]}"
		else
			printf ' -\n'
		fi
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
	printf '    {"id":%s,"label":%s,"args":%s,"metric":%s,"unit":%s,' \
		"$(json_str "$row")" "$(json_str "${ROW_LABEL[$row]}")" \
		"$(json_str "${ROW_ARGS[$row]} $EXTRA_ARGS")" \
		"$(json_str "${ROW_METRIC[$row]}")" "$(json_str "${ROW_UNIT[$row]}")"
	printf '"better":%s,"rounds":%d,\n     "results":{' \
		"$(json_str "${ROW_BETTER[$row]}")" "$(runs_for_row "$row")"
	for name in "${CONTENDERS[@]}"; do
		printf '%s\n      %s:%s' "$sep" "$(json_str "$name")" \
			"$(json_result "$row,$name")"
		sep=","
	done
	printf '},\n     "best_peer":%s,"ratio_sheaf_to_best_peer":%s}' \
		"$([ -n "${BEST_PEER[$row]}" ] && json_str "${BEST_PEER[$row]}" || printf null)" \
		"$(json_num_or_null "${RATIO[$row]:-}")"
}

write_json() {
	local name row sep note
	printf '{\n  "timestamp":%s,"host":%s,"cpus":%s,"commit":%s,\n' \
		"$(json_str "$STAMP")" "$(json_str "$(uname -n)")" "$(nproc)" \
		"$(json_str "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")"
	printf '  "binary":%s,"size":%d,"quick":%s,"elapsed_s":%d,\n' \
		"$(json_str "$BIN")" "$SIZE" \
		"$([ "$QUICK" = 1 ] && echo true || echo false)" "$ELAPSED"
	printf '  "contenders":{'
	sep=""
	for name in "${CONTENDERS[@]}"; do
		printf '%s\n    %s:{"alloc":%s,"preload":%s,"peer":%s,"capacity":%s}' \
			"$sep" "$(json_str "$name")" "$(json_str "${ALLOC[$name]}")" \
			"$(json_str "${PRELOAD[$name]}")" \
			"$([[ " ${PEERS[*]} " == *" $name "* ]] && echo true || echo false)" \
			"$(json_num_or_null "${CAPACITY[$name]:-}")"
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
print_table
exit $FAILED_ANY
