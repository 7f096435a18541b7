#!/bin/sh
# bench/gateway.sh [ROUNDS] [BENCHTIME] [PATHS]: runs BenchmarkGateway
# (runtime/gateway) ROUNDS times (default 5) and prints the medians
# (bench/gwtable). Each round runs every sub-benchmark once, so the paths
# alternate. BENCHTIME is go test's -benchtime (default 2000x). PATHS, a
# regular expression, runs only the sub-benchmarks it matches whole
# (default: all), e.g. 'direct-stdio|via-serve-relaxed|via-tbxark'.
#
# The peer, via-tbxark, runs when MCPLEDGER_BENCH_TBXARK names its binary
# (bench/tbxark.sh builds it); without it, it skips and no target is
# judged:
#
#   MCPLEDGER_BENCH_TBXARK=$(bench/tbxark.sh) bench/gateway.sh
#
# The raw output of the rounds is kept in a file whose path is printed.
set -eu

rounds=${1:-5}
benchtime=${2:-2000x}
paths=${3:-}
pattern='^BenchmarkGateway$'
[ -z "$paths" ] || pattern="^BenchmarkGateway\$/^($paths)\$"
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ -z "${MCPLEDGER_BENCH_TBXARK:-}" ]; then
	echo "bench/gateway.sh: MCPLEDGER_BENCH_TBXARK is unset: via-tbxark skips (bench/tbxark.sh builds the peer)" >&2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/gateway-bench.XXXXXX")
raw=$dir/rounds.txt
"$go" test -c -o "$dir/gateway.test" ./runtime/gateway # one binary for every round
{
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (modified)')"
	echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
} | tee "$raw" >&2
i=1
while [ "$i" -le "$rounds" ]; do
	echo "bench/gateway.sh: round $i of $rounds" >&2
	(cd runtime/gateway && "$dir/gateway.test" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime") >>"$raw" ||
		{ echo "bench/gateway.sh: round $i failed; its output: $raw" >&2; exit 1; }
	i=$((i + 1))
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" | tee -a "$raw" >&2
"$go" run ./bench/gwtable <"$raw"
echo "raw output: $raw" >&2
