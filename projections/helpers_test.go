package projections

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/mcpledger/mcpledger/events"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// t0 is the time of the first event of every test journal: 2026-01-02T03:04:05Z.
const t0 = int64(1767323045) * 1e9

// journal builds event sequences by hand, the way the runtime stamps them:
// inputs get a fresh seq and time, decisions carry Cause = the last input's
// seq and the input's time. GPos is global across sessions.
type journal struct {
	gpos uint64
	time int64
	evs  []events.Event
}

// stream is one session of a journal.
type stream struct {
	j     *journal
	id    [16]byte
	seq   uint64
	input uint64 // seq of the last input
}

func newJournal() *journal { return &journal{time: t0} }

// session opens a stream whose session ID is n repeated in every byte.
func (j *journal) session(n byte) *stream {
	s := &stream{j: j}
	for i := range s.id {
		s.id[i] = n
	}
	return s
}

func (s *stream) append(server string, p events.Payload) events.Event {
	s.seq++
	s.j.gpos++
	e := events.Event{Session: s.id, Seq: s.seq, GPos: s.j.gpos, Time: s.j.time, Kind: p.Kind(),
		V: p.Kind().Version(), Server: server, Payload: p}
	if p.Kind().IsInput() {
		s.input = s.seq
	} else {
		e.Cause = s.input
	}
	s.j.evs = append(s.j.evs, e)
	return e
}

// in appends an input 1 ms after the previous input.
func (s *stream) in(server string, p events.Payload) events.Event {
	if !p.Kind().IsInput() {
		panic(fmt.Sprintf("%s is not an input", p.Kind()))
	}
	s.j.time += 1e6
	return s.append(server, p)
}

// out appends a decision of the last input, at the input's time.
func (s *stream) out(server string, p events.Payload) events.Event {
	if p.Kind().IsInput() {
		panic(fmt.Sprintf("%s is an input", p.Kind()))
	}
	return s.append(server, p)
}

func (s *stream) start() events.Event {
	return s.in("", &events.SessionStarted{Seed: 1, Build: "test", Version: "v0.0.0", Command: "run"})
}

func (s *stream) config(servers ...events.ServerConfig) events.Event {
	return s.in("", &events.ConfigObserved{Trigger: "start", Workspace: "/ws", Trusted: true, Servers: servers})
}

// tr appends a transition decision.
func (s *stream) tr(server string, from, to events.ServerState, reason events.Reason, attempt int, err *events.ClassifiedError) events.Event {
	return s.out(server, &events.ServerTransitioned{From: from, To: to, Trigger: "test", Reason: reason, Attempt: attempt, Error: err})
}

// crash appends a failure of server's attempt (trigger fail, as the
// decider makes it).
func (s *stream) crash(server string, from events.ServerState, attempt int) events.Event {
	return s.out(server, &events.ServerTransitioned{From: from, To: events.StateReconnecting, Trigger: "fail", Attempt: attempt, Error: errExit(1)})
}

// connect appends a clean launch: launching, spawned, handshaking,
// handshake, tools listed, ready.
func (s *stream) connect(server string, from events.ServerState, attempt, pid int, tools []events.Tool) {
	s.tr(server, from, events.StateLaunching, "", attempt, nil)
	s.in(server, &events.ProcessSpawned{Attempt: attempt, PID: pid})
	s.tr(server, events.StateLaunching, events.StateHandshaking, "", attempt, nil)
	s.in(server, &events.HandshakeCompleted{Attempt: attempt, ProtocolVersion: "2025-06-18", ServerName: server + "-mcp", ServerVersion: "1.0.0"})
	s.in(server, &events.ToolsListed{Attempt: attempt, Trigger: "initial", Tools: tools})
	s.tr(server, events.StateHandshaking, events.StateReady, "", attempt, nil)
}

// stdio returns a stdio server config with its hash filled in.
func stdio(name string, args ...string) events.ServerConfig {
	c := events.ServerConfig{Name: name, Scope: events.ScopeUser, Transport: events.TransportStdio,
		Command: "npx", Args: args, Env: []events.KV{{Key: "TOKEN", Value: events.HashValue("secret")}}}
	c.Hash = events.ConfigHash(&c)
	return c
}

// toolList returns tools with the given names, described and hashed.
func toolList(names ...string) []events.Tool {
	ts := make([]events.Tool, len(names))
	for i, n := range names {
		d, schema := "does "+n, `{"type":"object"}`
		ts[i] = events.Tool{Name: n, Description: d, InputSchema: schema, DefHash: events.ToolDefHash(n, d, schema)}
	}
	return ts
}

func errExit(code int) *events.ClassifiedError {
	return &events.ClassifiedError{Class: events.ErrExit, Message: fmt.Sprintf("exit status %d", code), ExitCode: code}
}

// describe renders an event as one line for golden files.
func describe(e events.Event) string {
	s := fmt.Sprintf("s%d#%d %s", e.Session[0], e.Seq, e.Kind)
	if e.Server != "" {
		s += " " + e.Server
	}
	switch p := e.Payload.(type) {
	case *events.ServerTransitioned:
		s += fmt.Sprintf(" %s→%s", p.From, p.To)
		if p.Reason != "" {
			s += " (" + string(p.Reason) + ")"
		}
	case *events.ToolsListed:
		s += fmt.Sprintf(" %d tools", len(p.Tools))
	case *events.ConfigObserved:
		names := make([]string, len(p.Servers))
		for i, c := range p.Servers {
			names[i] = c.Name
		}
		s += " [" + strings.Join(names, " ") + "]"
	}
	return s
}

// table renders rows as aligned columns.
func table(header string, rows [][]string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(w, header)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ms renders a unix-ns time as milliseconds since t0.
func ms(t int64) string {
	if t == 0 {
		return "-"
	}
	return fmt.Sprintf("+%dms", (t-t0)/1e6)
}

func renderStatus(v StatusView) string {
	rows := make([][]string, len(v.Servers))
	for i, s := range v.Servers {
		rows[i] = []string{s.Name, string(s.State), dash(string(s.Reason)), dash(string(s.Transport)),
			fmt.Sprint(s.Tools), fmt.Sprint(s.Attempt), dash(s.Error), ms(s.Since), ms(s.ConnectedSince),
			dash(s.ProtocolVersion), dash(s.ServerName), dash(s.ServerVersion), fmt.Sprint(s.PID)}
	}
	return "session " + dash(v.Session) + "\n" +
		table("NAME\tSTATE\tREASON\tTRANSPORT\tTOOLS\tATTEMPT\tERROR\tSINCE\tCONNECTED\tPROTOCOL\tSERVER\tVERSION\tPID", rows)
}

// golden compares got with testdata/name.golden, or rewrites the file
// under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden (run go test -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing line of want and got, with context.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, wl, gl)
		}
	}
	return "(no line differs)"
}
