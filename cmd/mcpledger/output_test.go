package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestTextOutput: the text of tools, approvals, approve/reject and log
// after a real run: tools and approvals print a header row with their
// columns aligned under it, tools --server keeps the servers named
// (repeated or as a comma list), reject says "rejected", and a call's
// log line shows its duration in human units, not duration_ns; no line
// of run --once, approve or call ends in spaces.
func TestTextOutput(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	ws, _ := firstRunWorkspace(t, bin, "a", "b")
	for _, s := range [][]string{
		{"approve", "--trust", "--all", "--workspace", ws},
		{"run", "--once", "--workspace", ws},
		{"call", "mcp__a__echo", "--args", `{"message":"hi"}`, "--workspace", ws},
	} {
		r := runCLI(t, s...)
		if r.err != nil {
			t.Fatalf("%v: %v\n%s", s, r.err, r.stderr)
		}
		for _, l := range strings.Split(r.stdout+r.stderr, "\n") {
			if strings.HasSuffix(l, " ") {
				t.Errorf("%v: a line ends in spaces: %q", s, l)
			}
		}
	}

	tools := func(args ...string) []string {
		t.Helper()
		r := runCLI(t, append([]string{"tools"}, args...)...)
		if r.err != nil {
			t.Fatalf("tools %v: %v", args, r.err)
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if !regexp.MustCompile(`^TOOL +DESCRIPTION$`).MatchString(lines[0]) {
			t.Fatalf("tools %v: no header row:\n%s", args, r.stdout)
		}
		col := strings.Index(lines[0], "DESCRIPTION")
		for _, l := range lines[1:] {
			if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
				t.Errorf("tools %v: %q is not aligned under DESCRIPTION (column %d)", args, l, col)
			}
		}
		return lines[1:]
	}
	servers := func(lines []string) string {
		seen := map[string]bool{}
		for _, l := range lines {
			seen[strings.Split(l, "__")[1]] = true
		}
		return fmt.Sprint(len(seen), seen["a"], seen["b"])
	}
	if got := servers(tools()); got != "2 true true" {
		t.Errorf("tools lists servers %s, want a and b", got)
	}
	if got := servers(tools("--server", "b")); got != "1 false true" {
		t.Errorf("tools --server b lists %s, want b alone", got)
	}
	for _, args := range [][]string{{"--server", "a,b"}, {"--server", "a", "--server", "b"}} {
		if got := servers(tools(args...)); got != "2 true true" {
			t.Errorf("tools %v lists %s, want a and b", args, got)
		}
	}
	if r := runCLI(t, "tools", "--server", "nosuch"); r.err != nil || r.stdout != "no tools of nosuch\n" {
		t.Errorf("tools --server nosuch: %v %q", r.err, r.stdout)
	}

	r := runCLI(t, "reject", "b", "--workspace", ws)
	if r.err != nil || !strings.HasPrefix(r.stdout, "b: rejected by ") {
		t.Errorf("reject b: %v %q, want b: rejected by …", r.err, r.stdout)
	}
	r = runCLI(t, "approvals", "--workspace", ws)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.err != nil || len(lines) != 3 || !regexp.MustCompile(`^SERVER +STATE +CONFIG +LAST DECISION +NOTE$`).MatchString(lines[0]) {
		t.Fatalf("approvals: %v\n%s", r.err, r.stdout)
	}
	last := strings.Index(lines[0], "LAST DECISION")
	for _, l := range lines[1:] {
		if !strings.Contains(l[last:], "d by ") || !strings.Contains(l, " ago for ") {
			t.Errorf("approvals row %q: no decision under LAST DECISION (column %d)", l, last)
		}
	}
	if !strings.Contains(lines[2], "rejected") || !strings.Contains(lines[2], "rejected by ") {
		t.Errorf("approvals: b is not shown rejected: %q", lines[2])
	}

	r = runCLI(t, "log", "--kind", "call.finished")
	if r.err != nil || !regexp.MustCompile(` duration=[0-9.]+(µs|ms|s)\b`).MatchString(r.stdout) || strings.Contains(r.stdout, "duration_ns") {
		t.Errorf("log of a call: %v, want its duration in human units:\n%s", r.err, r.stdout)
	}
}

// TestLogLineUnits: a payload's unix-ns instants read as times and its
// *_ns and *_ms durations in human units, named without the unit.
func TestLogLineUnits(t *testing.T) {
	at := time.Date(2026, 11, 22, 14, 2, 0, 0, time.UTC)
	line := formatEvent(events.New(at, "a", &events.TimerScheduled{TimerID: 3, DelayMs: 1200, FireAt: at.Add(1200 * time.Millisecond).UnixNano()}))
	for _, want := range []string{" delay=1.2s", " fire_at=2026-11-22T14:02:01.200Z"} {
		if !strings.Contains(line, want) {
			t.Errorf("%s\nwant %q in it", line, want)
		}
	}
	line = formatEvent(events.New(at, "a", &events.CallFinished{DurationNs: 815514}))
	if !strings.Contains(line, " duration=816µs") || regexp.MustCompile(`=\d{6,}`).MatchString(line) {
		t.Errorf("%s\nwant duration=816µs and no raw number", line)
	}
	for d, want := range map[time.Duration]string{
		815 * time.Nanosecond: "815ns", 815514 * time.Nanosecond: "816µs", 12345678: "12.3ms", 1234567890: "1.23s",
		12345678901: "12.3s", 123456789012: "2m3s", -1500 * time.Millisecond: "-1.5s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%d) = %s, want %s", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{45 * time.Second: "45s", 192 * time.Second: "3m12s", 2*time.Hour + 5*time.Minute + 20*time.Second: "2h5m"} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%v) = %s, want %s", d, got, want)
		}
	}
}

// TestErrorText: a printed error loses the package prefixes of the
// sentinel errors it wraps, and keeps a command's own name; a real
// failed command, run as a process, prints no runtime: on stderr.
func TestErrorText(t *testing.T) {
	for in, want := range map[string]string{
		"runtime: unknown tool: \"x\"":                      "unknown tool: \"x\"",
		"call x: runtime: store: the journal is closed":     "call x: the journal is closed",
		"replay: unexpected argument \"extra\"":             "replay: unexpected argument \"extra\"",
		"import f: session s: replay: the export is sealed": "import f: session s: the export is sealed",
		"remove x: config: no server of that name there":    "remove x: no server of that name there",
		"status: nothing wrong: here":                       "status: nothing wrong: here",
	} {
		if got := errorText(errors.New(in)); got != want {
			t.Errorf("errorText(%q) = %q, want %q", in, got, want)
		}
	}
	dir, _ := configEnv(t)
	code, stderr := runCLIProcess(t, nil, "call", "mcp__nosuch__x", "--workspace", dir)
	if code != 1 || !strings.HasPrefix(stderr, "mcpledger: unknown tool") || strings.Contains(stderr, "runtime:") {
		t.Errorf("call of an unknown tool: exit %d, stderr %q", code, stderr)
	}
}

// TestRunningOutput: against a running mcpledger (the control socket),
// a control command's confirmation names the command and its server,
// with no space before the colon when there is none (reload: done), and
// status and tools --json keep the format of the offline reading: RFC
// 3339 times, tools with their input schemas, filtered by --server.
func TestRunningOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger in a process of its own")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := dir + "/journal.db"
	startRun(t, jp, cfg, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reload"}, "reload: done\n"},
		{[]string{"refresh", "good"}, "refresh good: done\n"},
	} {
		if r := runCLI(t, append(c.args, "--journal", jp)...); r.err != nil || r.stdout != c.want {
			t.Errorf("%v: %v %q, want %q", c.args, r.err, r.stdout, c.want)
		}
	}
	r := runCLI(t, "status", "--json", "--journal", jp)
	checkJSONTimes(t, "status (running)", r.stdout)
	var st statusOut
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Running || len(st.Servers) != 1 || st.Servers[0].Since == "" {
		t.Errorf("status --json of the running mcpledger: %v %s", err, r.stdout)
	}
	var tools []toolRow
	r = runCLI(t, "tools", "--json", "--server", "good", "--journal", jp)
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil || len(tools) == 0 {
		t.Fatalf("tools --json of the running mcpledger: %v %s", err, r.stdout)
	}
	for _, tl := range tools {
		if tl.Server != "good" || !json.Valid(tl.InputSchema) || !strings.Contains(string(tl.InputSchema), `"type":"object"`) {
			t.Errorf("tool %s of %s: input schema %s", tl.Name, tl.Server, tl.InputSchema)
		}
	}
	if r := runCLI(t, "tools", "--json", "--server", "other", "--journal", jp); r.stdout != "[]\n" {
		t.Errorf("tools --json --server other: %q, want []", r.stdout)
	}
}
