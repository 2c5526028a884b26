#!/usr/bin/env bash
# idle_mem.sh - what an idle sheafd pool costs: start SHEAFD (default
# build/daemon/sheafd) with its default limits and no client, then print
# sheafd's VmRSS and, for each of its memfds (the pool's META and SHARED
# parts), the size and the bytes it has allocated (st_blocks * 512).
# Usage: tests/bench/idle_mem.sh [SHEAFD] [extra sheafd flags...]
set -euo pipefail
bin=${1:-build/daemon/sheafd}
shift || true
dir=$(mktemp -d /tmp/sheaf-idle-XXXXXX)
"$bin" --foreground --socket "$dir/s.sock" --nodes 1 --log-level warn "$@" >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
sleep 1
echo "sheafd $(grep VmRSS /proc/$pid/status)"
for fd in /proc/$pid/fd/*; do
	t=$(readlink "$fd" || true)
	case $t in /memfd:sheaf-pool*)
		printf '%-28s size %8d MiB  allocated %8d KiB\n' "${t#/memfd:}" \
			$(( $(stat -L -c %s "$fd") >> 20 )) $(( $(stat -L -c %b "$fd") / 2 ));;
	esac
done
