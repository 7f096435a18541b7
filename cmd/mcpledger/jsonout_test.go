package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// serverOut is a server's row of `status --json` (and `get --json`'s
// status) as a client decodes it: its times are RFC 3339 strings.
type serverOut struct {
	Name           string             `json:"name"`
	State          events.ServerState `json:"state"`
	Reason         events.Reason      `json:"reason"`
	Tools          int                `json:"tools"`
	Attempt        int                `json:"attempt"`
	Since          string             `json:"since"`
	ConnectedSince string             `json:"connected_since"`
	PID            int                `json:"pid"`
}

// statusOut is `status --json` as a client decodes it.
type statusOut struct {
	Session   string                 `json:"session"`
	Running   bool                   `json:"running"`
	LastEvent string                 `json:"last_event"`
	Ended     string                 `json:"ended"`
	Reason    string                 `json:"reason"`
	Servers   []serverOut            `json:"servers"`
	Config    projections.ConfigView `json:"config"`
}

// getOut is `get --json` as a client decodes it.
type getOut struct {
	Name     string               `json:"name"`
	Config   *events.ServerConfig `json:"config"`
	Shadowed []string             `json:"shadowed"`
	Status   *serverOut           `json:"status"`
	Running  bool                 `json:"running"`
	Session  string               `json:"session"`
}

// jsonShapes runs every command that prints --json against one real
// history: a workspace whose server a (the runtimetest MCP server) was
// trusted and approved, a run --once that brought it up, and a one-shot
// call of its echo tool. It returns each command's output by golden
// name.
func jsonShapes(t *testing.T) map[string]string {
	t.Helper()
	bin := runtimetest.BuildServer(t)
	ws, jp := firstRunWorkspace(t, bin, "a")
	remote := write(t, filepath.Join(ws, "remote.json"), `{"mcpServers": {"remote": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}`)
	steps := [][]string{
		{"approve", "--trust", "--workspace", ws, "a"},
		{"run", "--once", "--workspace", ws},
		{"call", "mcp__a__echo", "--args", `{"message":"hi"}`, "--workspace", ws, "--json"},
	}
	out := map[string]string{}
	for _, s := range steps {
		r := runCLI(t, s...)
		if r.err != nil {
			t.Fatalf("%v: %v\n%s%s", s, r.err, r.stdout, r.stderr)
		}
		out["call"] = r.stdout // the last step's
	}
	// Read-only commands (salvage writes a new journal, archive finds
	// nothing old enough), so their order does not matter.
	for name, args := range map[string][]string{
		"status":    {"status"},
		"tools":     {"tools", "--server", "a"},
		"approvals": {"approvals", "--workspace", ws},
		"sessions":  {"sessions"},
		"replay":    {"replay"},
		"why":       {"why", "mcp__a__echo"},
		"get":       {"get", "a", "--workspace", ws},
		"archive":   {"archive", "--older-than", "24h"},
		"version":   {"version"},
		"logout":    {"logout", "remote", "--mcp-config", remote},
		"salvage":   {"salvage", jp, "-o", filepath.Join(ws, "salvaged.db")},
		"log":       {"log", "--kind", "call.finished"},
	} {
		r := runCLI(t, append(args, "--json")...)
		if r.err != nil {
			t.Fatalf("%s --json: %v\n%s", name, r.err, r.stderr)
		}
		out[name] = strings.ReplaceAll(strings.ReplaceAll(r.stdout, ws, "$WS"), jp, "$JOURNAL")
	}
	return out
}

// TestJSONShapes: the --json output of every command, against the
// golden file of its shape (testdata/json/NAME.json; -update rewrites
// them), with what varies from run to run normalised (times, IDs,
// durations, hashes, pids, build info). Before that, every output but
// log's (the journal's events as the export format has them) must keep
// the one time format: no number that reads as unix nanoseconds, every
// time an RFC 3339 string in UTC, every duration a *_ms number.
func TestJSONShapes(t *testing.T) {
	for name, got := range jsonShapes(t) {
		if name != "log" { // the journal's events as recorded: the export format (duration_ns)
			checkJSONTimes(t, name, got)
		}
		goldenFile(t, filepath.Join("json", name+".json"), normaliseJSON(got))
	}
}

// checkJSONTimes fails unless out, a command's --json output, keeps the
// time format: no integer large enough to be unix ns (a time from 1973
// on), no *_ns field, and every string that starts like a date parses as
// RFC 3339 with nanoseconds, in UTC.
func checkJSONTimes(t *testing.T, name, out string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s --json is not JSON: %v\n%s", name, err, out)
		}
		walkJSON(v, "", func(key string, v any) {
			switch v := v.(type) {
			case json.Number:
				if n, err := v.Int64(); err == nil && n > 1e17 {
					t.Errorf("%s --json: %s=%s reads as unix ns, want an RFC 3339 string", name, key, v)
				}
				if strings.HasSuffix(key, "_ns") {
					t.Errorf("%s --json: %s is a duration in ns, want *_ms", name, key)
				}
			case string:
				if dateLike.MatchString(v) {
					if ts, err := time.Parse(time.RFC3339Nano, v); err != nil || ts.Location() != time.UTC {
						t.Errorf("%s --json: %s=%q is not RFC 3339 in UTC", name, key, v)
					}
				}
			}
		})
	}
}

var dateLike = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:`)

// walkJSON calls fn on every scalar of v with the key it is under.
func walkJSON(v any, key string, fn func(key string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !opaqueKeys[k] {
				walkJSON(x, k, fn)
			}
		}
	case []any:
		for _, x := range v {
			walkJSON(x, key, fn)
		}
	default:
		fn(key, v)
	}
}

// normaliseJSON replaces what differs between runs with placeholders and
// indents the result, one golden line per field.
func normaliseJSON(out string) string {
	ids := map[string]string{}
	out = uuidRE.ReplaceAllStringFunc(out, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("<session-%d>", len(ids)+1)
		}
		return ids[id]
	})
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`), `"<time>"`},
		{regexp.MustCompile(`"([a-z_]+_ms)":\s*[0-9.e+-]+`), `"$1":"<ms>"`},
		{regexp.MustCompile(`"(events_per_s|pid|bytes_before|bytes_after|seq|gpos|events|started|kept|head_seq|leaf_pages|duration_ns|cause)":\s*[0-9.e+-]+`), `"$1":"<n>"`},
		{regexp.MustCompile(`sha256:[0-9a-f]+`), `sha256:<hash>`},
		{regexp.MustCompile(`config [0-9a-f]{12}\b`), `config <hash>`},
		{regexp.MustCompile(`"(version|commit|go|platform|commit_time|command|source|server_version|by|store)":\s*"[^"]*"`), `"$1":"<$1>"`},
		{regexp.MustCompile(`(by )[^"]* \(cli\)`), `$1<user> (cli)`},
		{regexp.MustCompile(`"dirty":\s*(true|false)`), `"dirty":"<dirty>"`},
	} {
		out = r.re.ReplaceAllString(out, r.with)
	}
	var b strings.Builder
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, raw, "", "  "); err != nil {
			return out
		}
		b.Write(ind.Bytes())
		b.WriteByte('\n')
	}
	return b.String()
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestJSONTimes: the rewrite of a marshaled value: unix-ns instants (and
// time.Time values in any zone) become RFC 3339 in UTC, an unknown one
// (0, the zero time) is left out, a *_ns duration becomes *_ms, fields
// keep their order, and a tool's schema and a server's config pass
// untouched, whatever their fields are called.
func TestJSONTimes(t *testing.T) {
	at := time.Date(2026, 11, 22, 14, 2, 3, 456789012, time.FixedZone("CET", 3600))
	v := map[string]any{ // marshaled with sorted keys: the order below
		"a_first":         1,
		"at":              at.UnixNano(),
		"config":          map[string]any{"time": 5},
		"connected_since": 0,
		"duration_ns":     815514,
		"input_schema":    map[string]any{"at": 1795693656360361471},
		"list":            []any{map[string]any{"since": at}, map[string]any{"next_retry": time.Time{}}},
		"seq":             1795693656360361471,
		"time":            "not a time",
	}
	var out bytes.Buffer
	if err := writeJSON(&out, v, false); err != nil {
		t.Fatal(err)
	}
	want := `{"a_first":1,"at":"2026-11-22T13:02:03.456789012Z","config":{"time":5},"duration_ms":0.815514,` +
		`"input_schema":{"at":1795693656360361471},"list":[{"since":"2026-11-22T13:02:03.456789012Z"},{}],` +
		`"seq":1795693656360361471,"time":"not a time"}` + "\n"
	if out.String() != want {
		t.Errorf("writeJSON:\n got %s\nwant %s", out.String(), want)
	}
	out.Reset()
	if err := writeJSON(&out, []int{1}, true); err != nil || out.String() != "[\n  1\n]\n" {
		t.Errorf("indented: %q %v", out.String(), err)
	}
	for d, want := range map[time.Duration]string{time.Millisecond: "1", 1500 * time.Microsecond: "1.5", 1: "0.000001", 0: "0"} {
		if got := formatMs(d); got != want {
			t.Errorf("formatMs(%v) = %s, want %s", d, got, want)
		}
	}
}
