package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// runStyled runs args with the environment vars, its stdout a terminal
// when term (the env's terminal check faked), else a pipe-like buffer.
func runStyled(t *testing.T, vars map[string]string, term bool, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return vars[k] }, openJournal: store.Open,
		terminal: func(w io.Writer) bool { return term && w == &out }}
	if err := e.run(t.Context(), args); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// TestColourOnTerminalOnly: status and approvals show colours and ✓/✗
// marks when stdout is a terminal, and not a single escape code when it
// is piped, when NO_COLOR is set (to anything but ""), when TERM is dumb,
// or with --json, even on a terminal.
func TestColourOnTerminalOnly(t *testing.T) {
	f := newFixture(t)
	j, err := store.Open(f.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, f.live, events.New(t0.Add(12*time.Second), "github", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "handshake_ok", Attempt: 1}))
	j.Close()
	vars := map[string]string{"MCPLEDGER_JOURNAL": f.path}
	term := runStyled(t, vars, true, "status")
	if !strings.Contains(term, sgrGreen+"✓ ready"+sgrReset) {
		t.Errorf("status on a terminal: no green ✓ ready:\n%q", term)
	}
	for name, c := range map[string]struct {
		vars map[string]string
		term bool
		args []string
	}{
		"piped":    {vars, false, []string{"status"}},
		"NO_COLOR": {map[string]string{"MCPLEDGER_JOURNAL": f.path, "NO_COLOR": "1"}, true, []string{"status"}},
		"dumb":     {map[string]string{"MCPLEDGER_JOURNAL": f.path, "TERM": "dumb"}, true, []string{"status"}},
		"json":     {vars, true, []string{"status", "--json"}},
	} {
		out := runStyled(t, c.vars, c.term, c.args...)
		if strings.Contains(out, "\x1b") || strings.ContainsAny(out, "✓✗○…") {
			t.Errorf("%s: escape codes or marks in\n%q", name, out)
		}
		if name != "json" && sgrRE.ReplaceAllString(term, "") == out {
			t.Errorf("%s: the terminal's text without its escapes is the plain text: no marks on the terminal?", name)
		}
	}
	if got, want := isTerminal(&bytes.Buffer{}), false; got != want {
		t.Errorf("isTerminal(buffer) = %v", got)
	}
	if r, w, err := os.Pipe(); err == nil {
		defer r.Close()
		defer w.Close()
		if isTerminal(w) {
			t.Error("isTerminal(pipe) = true")
		}
	}
}

// TestStyledTableAligned: colour escapes take no room: a styled status
// table's columns line up as the plain one's do, once the escapes are
// removed.
func TestStyledTableAligned(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rows := []projections.ServerStatus{
		{Name: "a", State: events.StateReady, Transport: events.TransportStdio, Tools: 3, Attempt: 1},
		{Name: "b", State: events.StateFailed, Reason: events.ReasonExhausted, Transport: events.TransportHTTP, Attempt: 5, Error: "exit: exit status 1"},
		{Name: "c", State: events.StateReconnecting, Transport: events.TransportSSE, Attempt: 2},
		{Name: "d", State: events.StateStopped, Transport: events.TransportSSE},
	}
	var styled strings.Builder
	printStatus(&styled, style{on: true}, rows, now, "STATE")
	if !strings.Contains(styled.String(), "\x1b[") {
		t.Fatalf("no colour in a styled table:\n%s", styled.String())
	}
	lines := strings.Split(strings.TrimSuffix(sgrRE.ReplaceAllString(styled.String(), ""), "\n"), "\n")
	header := []rune(lines[0])
	for _, col := range []string{"REASON", "TRANSPORT", "ERROR"} {
		at := len([]rune(lines[0][:strings.Index(lines[0], col)]))
		for _, l := range lines[1:] {
			r := []rune(l)
			if len(r) > at && (r[at-1] != ' ' || r[at] == ' ') {
				t.Errorf("%s does not start under its header (%d):\n%s\n%s", col, at, string(header), l)
			}
		}
	}
}

// TestProgressLine: on a terminal's stderr, an operation that lasts
// shows one line, rewritten in place (\r, clear) with its current stage,
// and cleared at its end; an operation that ends first shows nothing;
// off a terminal nothing is ever written and end returns at once.
func TestProgressLine(t *testing.T) {
	var w lockedBuffer
	e := &env{stderr: &w, terminal: func(io.Writer) bool { return true }}
	p := e.progress("reading", time.Millisecond)
	for !strings.Contains(w.String(), "\r\x1b[Kreading (") {
		time.Sleep(time.Millisecond)
	}
	p.set("writing")
	p.end()
	p.end() // twice is harmless
	out := w.String()
	if !strings.HasSuffix(out, "\r\x1b[K") || strings.Contains(out, "\n") {
		t.Errorf("progress line: %q, want rewritten in place and cleared at the end", out)
	}

	var quick lockedBuffer
	e = &env{stderr: &quick, terminal: func(io.Writer) bool { return true }}
	e.progress("quick", time.Hour).end()
	var piped lockedBuffer
	e = &env{stderr: &piped}
	p = e.progress("piped", 0)
	time.Sleep(5 * time.Millisecond)
	p.end()
	if quick.String() != "" || piped.String() != "" {
		t.Errorf("quick %q, piped %q: want nothing", quick.String(), piped.String())
	}
}

// TestVerifyPipedHasNoProgress: verify, its stderr piped, writes nothing
// there (the progress line is for terminals only).
func TestVerifyPipedHasNoProgress(t *testing.T) {
	ws, _ := firstRunWorkspace(t, runtimetest.BuildServer(t), "a")
	for _, s := range [][]string{{"approve", "--trust", "--all", "--workspace", ws}, {"run", "--once", "--workspace", ws}} {
		if r := runCLI(t, s...); r.err != nil {
			t.Fatalf("%v: %v", s, r.err)
		}
	}
	r := runCLI(t, "verify")
	if r.err != nil || !strings.HasPrefix(r.stdout, "OK ") || r.stderr != "" {
		t.Errorf("verify: %v\nstdout %q\nstderr %q", r.err, r.stdout, r.stderr)
	}
}
