#!/usr/bin/env bash
# Times `ncclwiz explain` against ripgrep (`rg -c -f patterns`) running the
# explainer's own signature regexps on the same generated NCCL_DEBUG=INFO
# logs: one 128 MB log of a 2-node 16-rank torchrun job (loggen's realistic
# mode), 8 rank files of 16 MB given together, a 128 MB log of that job's
# communicator set-up under NCCL_DEBUG_SUBSYS=ALL (loggen's init-heavy mode:
# ENV, bootstrap, NET/IB, topology, graph, ring/tree and connection lines),
# and the worst case of the INFO digest: only the init-heavy log's lines the
# digest parses (ENV, Bootstrap, NET/IB, GPU Direct RDMA, Using network,
# comm and Init START/COMPLETE lines) repeated to 128 MB. Prints wall time
# (best of RUNS on a warm page cache), throughput and max RSS of each.
#
#   scripts/bench-explain-vs-rg.sh [SIZE]      (default 128MB; RUNS=3)
#
# The patterns are Explainer.Patterns() as Go writes them, each behind
# (?-u): ripgrep's regex crate reads this RE2 syntax unchanged, and (?-u)
# makes \d, \w and (?i) ASCII as in Go. rg only counts matching lines;
# ncclwiz also decodes prefixes, ranks and the INFO digest, so the
# comparison is generous to rg. Needs rg (apt-get install ripgrep) and
# /usr/bin/time (GNU time) for RSS.
set -euo pipefail
cd "$(dirname "$0")/.."

size="${1:-128MB}"
runs="${RUNS:-3}"
command -v rg >/dev/null || { echo "rg not found: apt-get install ripgrep" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time not found: apt-get install time" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
echo "building ncclwiz and generating the logs (${size}; 8 x 16MB; init-heavy and digest-only ${size})..."
go build -o "$work/ncclwiz.new" .
# A binary the linker has just written maps into a process with a few MB
# more resident pages than the same file copied (page-cache folios), which
# would inflate max RSS by 5-8 MB; measure a copy, as an installed binary is.
cat "$work/ncclwiz.new" > "$work/ncclwiz" && chmod +x "$work/ncclwiz" && rm "$work/ncclwiz.new"
go build -o "$work/genlog" ./explain/internal/genlog
"$work/genlog" -realistic -size "$size" -o "$work/job.log" -rg-patterns "$work/rg.txt"
"$work/genlog" -init-heavy -size "$size" -o "$work/init.log"
# The digest's worst case: the same keys as BenchmarkAnalyzeDigestLines.
grep -E 'set by environment|Bootstrap|Init (START|COMPLETE)| nRanks |GPU Direct|Using network|nvls channels|NCCL version|cudaDriver|NET/IB : Using' \
	"$work/init.log" > "$work/digest.unit"
want=$(stat -c %s "$work/init.log")
while [ "$(stat -c %s "$work/digest.log" 2>/dev/null || echo 0)" -lt "$want" ]; do cat "$work/digest.unit" >> "$work/digest.log"; done
tail -n 20 "$work/init.log" >> "$work/digest.log" # the ending (a watchdog timeout)
rm "$work/digest.unit"
for r in 0 1 2 3 4 5 6 7; do
	"$work/genlog" -realistic -size 16MB -seed $((r + 1)) -o "$work/rank$r.log"
done
cat "$work"/*.log > /dev/null # warm the page cache

# best CMD... runs CMD $runs times; prints "<best ns> <max RSS KiB of that run>".
# Output goes to a file, not /dev/null (grep-like tools may stop early).
best() {
	local best=0 rss=0 start end i
	for ((i = 0; i < runs; i++)); do
		start=$(date +%s%N)
		/usr/bin/time -f %M -o "$work/rss" "$@" > "$work/out" 2>&1 || true
		end=$(date +%s%N)
		if ((best == 0 || end - start < best)); then
			best=$((end - start))
			rss=$(tail -n1 "$work/rss")
		fi
	done
	echo "$best $rss"
}

row() { # label bytes ns rss
	awk -v l="$1" -v b="$2" -v ns="$3" -v rss="$4" \
		'BEGIN { printf "  %-8s %6.2f s  %5.0f MB/s  max RSS %3.0f MB\n", l, ns / 1e9, b / 1e6 / (ns / 1e9), rss / 1024 }'
}

compare() { # title bytes files...
	local title="$1" bytes="$2" ens erss rns rrss root
	shift 2
	read -r ens erss < <(best "$work/ncclwiz" explain --no-color "$@")
	root=$(grep -m1 'Root cause' "$work/out" | sed 's/^ *//' || true)
	read -r rns rrss < <(best rg -c -f "$work/rg.txt" "$@")
	echo "$title"
	row ncclwiz "$bytes" "$ens" "$erss"
	row rg "$bytes" "$rns" "$rrss"
	awk -v a="$ens" -v b="$rns" 'BEGIN { printf "  ratio    %.2f x rg (target <= 1.5)\n", a / b }'
	echo "  ncclwiz: ${root:-no root cause line}"
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(rg --version | sed -n 1p); $(wc -l < "$work/rg.txt") patterns"
compare "one log: $(stat -c %s "$work/job.log") bytes, $(wc -l < "$work/job.log") lines" \
	"$(stat -c %s "$work/job.log")" "$work/job.log"
total=$(cat "$work"/rank?.log | wc -c)
compare "8 rank files: $total bytes" "$total" "$work"/rank?.log
for f in init digest; do
	compare "$f log: $(stat -c %s "$work/$f.log") bytes, $(wc -l < "$work/$f.log") lines" \
		"$(stat -c %s "$work/$f.log")" "$work/$f.log"
done
