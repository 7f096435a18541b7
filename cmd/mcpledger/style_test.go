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
