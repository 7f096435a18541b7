#!/bin/sh
# bench/tbxark.sh [SOURCE]: builds the gateway benchmark's peer,
# TBXark/mcp-proxy at commit 4f78891, and prints the binary's path.
#
# SOURCE is a git repository holding that commit (a clone or a bare
# mirror; the commit is exported, the work tree is left alone) or a
# directory holding its source (used as it is). Without SOURCE:
# $MCPLEDGER_TBXARK_SRC, else /work/.mirror/TBXark+mcp-proxy/repo.
# The module is not served by the Go module proxy; its dependencies
# (mark3labs/mcp-go v0.44.0, ...) are, and `go build` fetches them.
#
# The binary goes to ${XDG_CACHE_HOME:-~/.cache}/mcpledger/tbxark-4f78891/.
# Use it as the benchmark's peer:
#
#   MCPLEDGER_BENCH_TBXARK=$(bench/tbxark.sh) bench/gateway.sh
set -eu

commit=4f78891
src=${1:-${MCPLEDGER_TBXARK_SRC:-/work/.mirror/TBXark+mcp-proxy/repo}}
out=${XDG_CACHE_HOME:-$HOME/.cache}/mcpledger/tbxark-$commit
go=${GO:-go}

absent() {
	cat >&2 <<MSG
bench/tbxark.sh: $1
Get the source and run this script on it:
  git clone https://github.com/TBXark/mcp-proxy /tmp/mcp-proxy
  bench/tbxark.sh /tmp/mcp-proxy
(any git repository holding commit $commit will do; the script builds
that commit, whatever is checked out). Without the peer, the benchmark's
via-tbxark skips: MCPLEDGER_BENCH_TBXARK unset.
MSG
	exit 2
}

[ -d "$src" ] || absent "no source at $src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
isgit=false
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 && isgit=true
if $isgit && git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
	git -C "$src" archive "$commit" | tar -x -C "$tmp"
	build=$tmp
elif grep -qx 'module github.com/tbxark/mcp-proxy' "$src/go.mod" 2>/dev/null; then
	echo "bench/tbxark.sh: building $src as it is (no commit $commit to export there)" >&2
	build=$src
elif $isgit; then
	absent "the git repository at $src does not hold commit $commit (git -C $src fetch?)"
else
	absent "$src is neither a git repository nor the source of github.com/tbxark/mcp-proxy"
fi

mkdir -p "$out"
(cd "$build" && CGO_ENABLED=0 GOFLAGS=-mod=readonly "$go" build -trimpath \
	-ldflags "-X main.BuildVersion=$commit" -o "$out/mcp-proxy" .)
echo "$out/mcp-proxy"
