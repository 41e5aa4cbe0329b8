#!/usr/bin/env bash
# Times `ncclwiz explain` against `LC_ALL=C grep -E -c -f patterns.txt` on the
# same generated NCCL_DEBUG=INFO log, with the same patterns: the explainer's
# signature regexps, rewritten for grep -E by explain/internal/genlog.
#
#   scripts/bench-explain-vs-grep.sh [SIZE]      (default 256MiB; RUNS=3)
#
# grep only counts matching lines; ncclwiz also decodes, ranks and digests,
# so the comparison is generous to grep. Each tool runs RUNS times on a warm
# page cache and the best wall time is reported.
set -euo pipefail
cd "$(dirname "$0")/.."

size="${1:-256MiB}"
runs="${RUNS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "building ncclwiz and generating a ${size} log..."
go build -o "$work/ncclwiz" .
go run ./explain/internal/genlog -size "$size" -o "$work/info.log" -patterns "$work/patterns.txt"
bytes=$(stat -c %s "$work/info.log")
lines=$(wc -l < "$work/info.log")
npat=$(wc -l < "$work/patterns.txt")
cat "$work/info.log" > /dev/null # warm the page cache

now_ns() { date +%s%N; }

# best_ns CMD... runs CMD $runs times and prints the fastest wall time in ns.
# Output goes to a file, not /dev/null: GNU grep stops at the first match
# when its output is /dev/null.
best_ns() {
	local best=0 start end i
	for ((i = 0; i < runs; i++)); do
		start=$(now_ns)
		"$@" > "$work/out" 2>&1 || true
		end=$(now_ns)
		if ((best == 0 || end - start < best)); then
			best=$((end - start))
		fi
	done
	echo "$best"
}

explain_ns=$(best_ns "$work/ncclwiz" explain --no-color "$work/info.log")
root=$(grep -m1 'Root cause' "$work/out" || true)
grep_ns=$(best_ns env LC_ALL=C grep -E -c -f "$work/patterns.txt" "$work/info.log")
matches=$(cat "$work/out")

mbps() { awk -v b="$bytes" -v ns="$1" 'BEGIN { printf "%.0f", b / 1e6 / (ns / 1e9) }'; }
secs() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e9 }'; }

printf 'log:      %s bytes, %s lines, %s patterns (%s)\n' "$bytes" "$lines" "$npat" "$(grep --version | head -n1)"
printf 'ncclwiz:  %s s  %s MB/s   %s\n' "$(secs "$explain_ns")" "$(mbps "$explain_ns")" "$root"
printf 'grep -E:  %s s  %s MB/s   (%s matching lines)\n' "$(secs "$grep_ns")" "$(mbps "$grep_ns")" "$matches"
awk -v a="$explain_ns" -v b="$grep_ns" 'BEGIN { printf "ratio:    %.2f x grep (target <= 1.5)\n", a / b }'
