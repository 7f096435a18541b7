package main

// The official MCP conformance harness's client scenarios (the ones
// without OAuth, which oauth_conformance_test.go runs), with mcpledger as
// the client under test: for each scenario the harness starts a server
// and runs conformanceClientScript with its URL; the script writes the
// server into a config file and drives mcpledger as a user would
// (`run --once` to connect and list, `tools --json` to read the catalog,
// `call` for each tool call). The harness checks what it saw on the wire:
// the 2026-07-28 request _meta and version negotiation, the MCP standard
// and x-mcp-header headers, tools with invalid x-mcp-header annotations
// left uncalled, JSON Schema keywords kept and no network $ref fetched.
// mcpledger's protocolVersion is left at auto, so the same script speaks
// 2026-07-28 to the 2026 scenarios and 2025-11-25 to the 2025 ones.

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// conformance2026CLI is the harness's pre-release that tests 2026-07-28
// (@modelcontextprotocol/conformance 0.2.0-alpha.12), beside the stable one.
const conformance2026CLI = "conformance-2026/node_modules/@modelcontextprotocol/conformance/dist/index.js"

// clientRun is one harness run of one client scenario: which harness and
// which spec version (empty: the harness's default). mcpledger must speak
// 2026-07-28 to a 2026-07-28 scenario and an older version to the others.
type clientRun struct {
	harness, spec, scenario string
}

// harnessVersion names the run's harness.
func (r clientRun) harnessVersion() string {
	if r.harness == conformance2026CLI {
		return "0.2.0-alpha.12"
	}
	return "stable"
}

// clientRuns are the client scenarios: the 2026-07-28 ones the issue
// names, and the 2025-11-25 ones, with both harnesses.
var clientRuns = func() []clientRun {
	var rs []clientRun
	for _, s := range []string{"tools_call", "request-metadata", "http-standard-headers", "http-custom-headers",
		"http-invalid-tool-headers", "json-schema-ref-no-deref", "json-schema-2020-12-preservation"} {
		rs = append(rs, clientRun{conformance2026CLI, "2026-07-28", s})
	}
	for _, s := range []string{"initialize", "tools_call", "sse-retry", "json-schema-2020-12-preservation"} {
		rs = append(rs, clientRun{conformance2026CLI, "2025-11-25", s})
	}
	for _, s := range []string{"initialize", "tools_call", "sse-retry"} {
		rs = append(rs, clientRun{conformanceCLI, "", s})
	}
	return rs
}()

// conformanceClientScript is the client command the harness runs, with
// the server's URL as its argument, the scenario in
// MCP_CONFORMANCE_SCENARIO and its context (the tool calls to make) in
// MCP_CONFORMANCE_CONTEXT. Every run gets its own HOME and journal; it
// leaves there the scenario's name, `status --json` and, for the
// invalid-tool scenario, `why` of an excluded tool.
//
// A tool call's arguments are checked against the tool's input schema
// before anything is sent: a null where the schema says boolean is
// refused. The custom-headers scenario asks for a call with a null
// argument, to see its Mcp-Param header omitted; the script leaves such
// an argument out, which the spec treats alike (omitted when null or not
// provided).
const conformanceClientScript = `set -eu
url="$1"
work="$(mktemp -d "$CONF_WORK/run.XXXXXX")"
export HOME="$work" XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config"
export MCPLEDGER_JOURNAL="$work/journal.db"
exec 2>"$work/client.log"
printf '%s\n%s\n' "$MCP_CONFORMANCE_SCENARIO" "$CONF_SPEC" >"$work/scenario"
cfg="$work/servers.json"
"$NODE22" -e 'require("fs").writeFileSync(process.argv[2], JSON.stringify({mcpServers: {conf: {type: "http", url: process.argv[1]}}}))' "$url" "$cfg"
ml() { "$MCPLEDGER_BIN" "$@" --mcp-config "$cfg" --workspace "$work" </dev/null; }
# json EXPR: the value of EXPR over the JSON on stdin (d); strings as is.
json() { "$NODE22" -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const d=JSON.parse(s);const r=(0,eval)("(d)=>("+process.argv[1]+")")(d);if(r!==undefined)process.stdout.write(typeof r==="string"?r:JSON.stringify(r))})' "$1"; }
case "$MCP_CONFORMANCE_SCENARIO" in
tools_call)
  ml call mcp__conf__add_numbers --args '{"a":5,"b":3}' ;;
sse-retry)
  ml call mcp__conf__test_reconnection --args '{}' ;;
initialize|request-metadata|json-schema-ref-no-deref)
  ml run --once ;;
json-schema-2020-12-preservation)
  ml run --once
  schema="$("$MCPLEDGER_BIN" tools --json | json 'd.find(t=>t.tool==="json_schema_2020_12_tool").input_schema')"
  ml call mcp__conf__json_schema_echo --args "{\"schema\":$schema}" ;;
http-standard-headers)
  ml run --once
  first="$("$MCPLEDGER_BIN" tools --json | json 'd.length?d[0].name:""')"
  [ -z "$first" ] || ml call "$first" --args '{}' ;;
http-custom-headers)
  ml run --once
  printf '%s' "${MCP_CONFORMANCE_CONTEXT:-{\}}" |
    json '(d.toolCalls||[]).map(c=>JSON.stringify({name:c.name,args:Object.fromEntries(Object.entries(c.arguments||{}).filter(([k,v])=>v!==null))})+"\n").join("")' |
  while IFS= read -r c; do
    ml call "mcp__conf__$(printf '%s' "$c" | json 'd.name')" --args "$(printf '%s' "$c" | json 'JSON.stringify(d.args)')"
  done ;;
http-invalid-tool-headers)
  ml run --once
  for name in $("$MCPLEDGER_BIN" tools --json | json 'd.map(t=>t.name).join(" ")'); do
    ml call "$name" --args '{"region":"us-west1"}'
  done
  "$MCPLEDGER_BIN" why mcp__conf__invalid_empty_header >"$work/why.txt" || true ;;
*)
  echo "no steps for scenario $MCP_CONFORMANCE_SCENARIO" >&2; exit 2 ;;
esac
"$MCPLEDGER_BIN" status --json >"$work/status.json"
`

// conformanceClientSuite runs in a private network namespace (the
// harness's servers bind every interface): each run in turn, its checks
// saved under $CONF_WORK/results-N.
const conformanceClientSuite = `set -u
ip link set lo up
i=0
while IFS='|' read -r harness spec scenario; do
  i=$((i+1))
  flags=""
  [ -z "$spec" ] || flags="--spec-version $spec"
  CONF_SPEC="$spec" "$NODE22" "$harness" client --command "bash $CONF_WORK/client.sh" --scenario "$scenario" $flags \
    --timeout 60000 -o "$CONF_WORK/results-$i" >"$CONF_WORK/harness-$i.txt" 2>&1
done <"$CONF_WORK/runs"
exit 0
`

// TestClientConformance runs the harness's client scenarios against the
// CLI. Every check of every run must succeed (a warning fails too), each
// run must have negotiated the version its spec names, and `why` must name
// the reason a tool with an invalid x-mcp-header annotation is not in the
// catalog. It needs the pinned peers (.ci/peers.sh: folder
// conformance-2026 beside the stable harness) and root for a private
// network namespace.
func TestClientConformance(t *testing.T) {
	peers := peersDir(t, conformance2026CLI, conformanceCLI, node22)
	needNetns(t)
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	var runs strings.Builder
	for _, r := range clientRuns {
		runs.WriteString(filepath.Join(peers, r.harness) + "|" + r.spec + "|" + r.scenario + "\n")
	}
	for name, body := range map[string]string{"client.sh": conformanceClientScript, "runs": runs.String()} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-n", "bash", "-c", conformanceClientSuite)
	cmd.Env = append(os.Environ(), "MCPLEDGER_BIN="+bin, "CONF_WORK="+work, "NODE22="+filepath.Join(peers, node22))
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "Operation not permitted") {
		t.Skipf("no private network namespace here: %s", trim(string(out)))
	}
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, trim(string(out)))
	}
	clients := clientRunDirs(t, work)
	var summary []string
	reported := false // the first failing run's output is logged
	for i, r := range clientRuns {
		n := i + 1
		label := r.scenario + " (harness " + r.harnessVersion() + ", spec " + cmp.Or(r.spec, "default") + ")"
		res, ok := harnessResults(t, filepath.Join(work, "results-"+strconv.Itoa(n)))[r.scenario]
		switch {
		case !ok || res.passed == 0:
			t.Errorf("%s: no checks passed", label)
		case len(res.failed) > 0:
			t.Errorf("%s: %d checks passed, failed: %s", label, res.passed, strings.Join(res.failed, "; "))
		}
		run, ok := clients[r.scenario+"\n"+r.spec]
		switch {
		case !ok:
			t.Errorf("%s: the client never ran", label)
		case r.spec == "2026-07-28" && run.negotiated != "2026-07-28",
			r.spec != "2026-07-28" && (run.negotiated == "" || run.negotiated >= "2026-07-28"):
			// A 2025 scenario's server may answer an older version
			// (sse-retry's says 2025-03-26): anything before 2026.
			t.Errorf("%s: mcpledger spoke %q (status: %s)", label, run.negotiated, run.status)
		}
		if failed := t.Failed(); failed && !reported {
			reported = true
			log, _ := os.ReadFile(filepath.Join(work, "harness-"+strconv.Itoa(n)+".txt"))
			t.Logf("%s harness output:\n%s\nclient log:\n%s", label, trim(string(log)), trim(run.log))
		}
		summary = append(summary, label+": "+strconv.Itoa(res.passed)+" passed, "+strconv.Itoa(len(res.failed))+" failed")
		if r.scenario == "http-invalid-tool-headers" &&
			!strings.Contains(run.why, "conf listed invalid_empty_header, but it was left out of the catalog: ") {
			t.Errorf("why of a tool with an invalid x-mcp-header does not name the reason:\n%s", run.why)
		}
	}
	t.Logf("conformance client scenarios:\n%s", strings.Join(summary, "\n"))
}

// clientRunDir is what one run of the client script left.
type clientRunDir struct {
	negotiated, status, log, why string
}

// clientRunDirs reads the client runs' directories, by scenario and spec.
func clientRunDirs(t *testing.T, work string) map[string]clientRunDir {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(work, "run.*"))
	out := map[string]clientRunDir{}
	for _, d := range dirs {
		key, err := os.ReadFile(filepath.Join(d, "scenario"))
		if err != nil {
			continue
		}
		var r clientRunDir
		st, _ := os.ReadFile(filepath.Join(d, "status.json"))
		r.status = string(st)
		var s struct {
			Servers []struct {
				ProtocolVersion string `json:"protocol_version"`
			} `json:"servers"`
		}
		if json.Unmarshal(st, &s) == nil && len(s.Servers) == 1 {
			r.negotiated = s.Servers[0].ProtocolVersion
		}
		lg, _ := os.ReadFile(filepath.Join(d, "client.log"))
		why, _ := os.ReadFile(filepath.Join(d, "why.txt"))
		r.log, r.why = string(lg), string(why)
		out[strings.TrimSuffix(string(key), "\n")] = r
	}
	return out
}
