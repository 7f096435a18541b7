package otlp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/tracectx"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// readJSONL reads a journal exported as JSONL (the repository's golden
// journals).
func readJSONL(t *testing.T, path string) []events.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []events.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e events.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	return out
}

// render writes spans and logs as text, one record a line, for golden
// files a reviewer can read.
func render(spans []otlp.Span, logs []otlp.Log) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "span %q trace=%s span=%s kind=%s %s +%s status=%s %q\n", s.Name, s.TraceID, s.SpanID, s.Kind,
			time.Unix(0, s.Start).UTC().Format(time.RFC3339Nano), time.Duration(s.End-s.Start), s.Status, s.StatusMsg)
		if s.Parent.IsValid() {
			fmt.Fprintf(&b, "  parent trace=%s span=%s state=%q\n", s.Parent.TraceID(), s.Parent.SpanID(), s.Parent.TraceState())
		}
		fmt.Fprintf(&b, "  attrs %s\n", attrs(s.Attrs))
		for _, l := range s.Links {
			fmt.Fprintf(&b, "  link trace=%s span=%s\n", l.TraceID(), l.SpanID())
		}
		for _, ev := range s.Events {
			fmt.Fprintf(&b, "  event %q +%s %s\n", ev.Name, time.Duration(ev.Time-s.Start), attrs(ev.Attrs))
		}
	}
	for _, l := range logs {
		fmt.Fprintf(&b, "log %s %s %s trace=%s span=%s %s\n  body %s\n", time.Unix(0, l.Time).UTC().Format(time.RFC3339Nano),
			l.Severity, l.EventName, l.TraceID, l.SpanID, attrs(l.Attrs), l.Body)
	}
	return b.String()
}

func attrs(kvs []attribute.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
	}
	return strings.Join(parts, " ")
}

func mapAll(evs []events.Event) ([]otlp.Span, []otlp.Log, *otlp.Mapper) {
	m := otlp.NewMapper()
	var spans []otlp.Span
	var logs []otlp.Log
	for _, e := range evs {
		s, l := m.Map(e)
		spans = append(spans, s...)
		logs = append(logs, l)
	}
	return spans, logs, m
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the mapping (go test -update rewrites it; review the diff):\n%s", path, got)
	}
}

// TestMappingGolden maps the repository's recorded journals (calls,
// approvals, a crash loop, a sign-in) and compares every span and log
// record with a golden file: names, attributes, times, IDs.
func TestMappingGolden(t *testing.T) {
	for _, name := range []string{"approvals", "crash-loop", "not-found", "sign-in"} {
		t.Run(name, func(t *testing.T) {
			evs := readJSONL(t, filepath.Join("..", "..", "testdata", "journals", name+".jsonl"))
			spans, logs, m := mapAll(evs)
			if len(logs) != len(evs) {
				t.Fatalf("%d log records of %d events", len(logs), len(evs))
			}
			golden(t, name, render(spans, logs)+fmt.Sprintf("open from %d\n", m.From()))
		})
	}
}

// callEvents is one session with a denied call, a call that fails with
// injection signals and is retried, and a server that fails: the cases
// the recorded journals lack.
func callEvents() []events.Event {
	sid := uuid.MustParse("01a20252-0000-7000-8000-000000000001")
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var out []events.Event
	add := func(ms int, server string, p events.Payload) {
		e := events.New(t0.Add(time.Duration(ms)*time.Millisecond), server, p)
		e.Session, e.Seq, e.GPos = sid, uint64(len(out)+1), uint64(len(out)+1)
		e.ID = uuid.MustParse(fmt.Sprintf("01a20252-0000-7000-8000-%012d", 100+len(out)))
		out = append(out, e)
	}
	add(0, "", &events.SessionStarted{Seed: 1, Version: "dev"})
	add(1, "gh", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1})
	add(5, "gh", &events.HandshakeCompleted{Attempt: 1, ProtocolVersion: "2025-11-25", ServerName: "gh-server", ServerVersion: "1.2.3", SessionID: "mcp-sess-1"})
	add(6, "gh", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "handshake", Attempt: 1})
	add(10, "gh", &events.CallDecided{CallID: "c1", Tool: "delete", Name: "mcp__gh__delete", Decision: events.CallDeny, By: "user:cli", Policy: "ask", Reason: "no"})
	add(20, "gh", &events.CallDecided{CallID: "c2", Tool: "read", Name: "mcp__gh__read", Decision: events.CallAllow, By: "approver", Policy: "ask"})
	add(21, "gh", &events.CallStarted{CallID: "c2", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Text: `{"p":"x"}`, Size: 9}, Policy: "ask", ApprovedBy: "approver", Attempt: 1})
	add(40, "gh", &events.CallFinished{CallID: "c2", Outcome: events.OutcomeLost, Error: "connection lost", Retrying: true, DurationNs: 19e6})
	add(41, "gh", &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting, Trigger: "transport_closed", Attempt: 1})
	add(45, "gh", &events.CallStarted{CallID: "c3", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Size: 9}, Policy: "ask", ApprovedBy: "approver", Attempt: 2, RetryOf: "c2", Caller: "claude-code/2.1"})
	add(60, "gh", &events.CallFinished{CallID: "c3", Outcome: events.OutcomeOK, Result: events.Blob{Size: 120}, Signals: []string{"ignore_previous"}, CutChars: 10, DurationNs: 15e6})
	add(70, "gh", &events.ServerTransitioned{From: events.StateReady, To: events.StateFailed, Trigger: "process_exited", Attempt: 2,
		Error: &events.ClassifiedError{Class: "crash", Message: "exit status 1"}})
	add(80, "fs", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1})
	add(90, "", &events.SessionStopped{})
	return out
}

// tracedEvents is one session whose calls were made in a caller's trace
// (their call.started, or call.decided, carries its traceparent): one
// that succeeds, one retried, one whose traceparent is malformed (the
// runtime never journals one; a Mapper reading one makes a span of the
// ledger's own), one denied in the trace, one denied outside any, and
// one approved in it.
func tracedEvents() []events.Event {
	sid := uuid.MustParse("01a20252-0000-7000-8000-000000000003")
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var out []events.Event
	add := func(ms int, server string, p events.Payload) {
		e := events.New(t0.Add(time.Duration(ms)*time.Millisecond), server, p)
		e.Session, e.Seq, e.GPos = sid, uint64(len(out)+1), uint64(len(out)+1)
		e.ID = uuid.MustParse(fmt.Sprintf("01a20252-0000-7000-8000-%012d", 300+len(out)))
		out = append(out, e)
	}
	add(0, "", &events.SessionStarted{Seed: 3, Version: "dev"})
	add(1, "gh", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1})
	add(6, "gh", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "handshake", Attempt: 1})
	add(10, "gh", &events.CallStarted{CallID: "t1", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Size: 2}, Attempt: 1,
		TraceParent: parent, TraceState: "congo=t61rcWkgMzE"})
	add(20, "gh", &events.CallFinished{CallID: "t1", Outcome: events.OutcomeOK, Result: events.Blob{Size: 10}, DurationNs: 10e6})
	add(30, "gh", &events.CallStarted{CallID: "t2", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Size: 2}, Attempt: 1, TraceParent: parent})
	add(40, "gh", &events.CallFinished{CallID: "t2", Outcome: events.OutcomeLost, Error: "connection lost", Retrying: true, DurationNs: 10e6})
	add(45, "gh", &events.CallStarted{CallID: "t3", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Size: 2}, Attempt: 2, RetryOf: "t2", TraceParent: parent})
	add(50, "gh", &events.CallFinished{CallID: "t3", Outcome: events.OutcomeOK, Result: events.Blob{Size: 10}, DurationNs: 5e6})
	add(60, "gh", &events.CallStarted{CallID: "t4", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Size: 2}, Attempt: 2,
		TraceParent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"})
	add(70, "gh", &events.CallFinished{CallID: "t4", Outcome: events.OutcomeOK, Result: events.Blob{Size: 10}, DurationNs: 10e6})
	add(72, "gh", &events.CallDecided{CallID: "t5", Tool: "delete", Name: "mcp__gh__delete", Decision: events.CallDeny, By: "policy",
		Policy: "never", Reason: "the call policy for this tool is never", TraceParent: parent, TraceState: "congo=t61rcWkgMzE"})
	add(74, "gh", &events.CallDecided{CallID: "t6", Tool: "delete", Name: "mcp__gh__delete", Decision: events.CallDeny, By: "approver:alice",
		Policy: "ask"})
	add(76, "gh", &events.CallDecided{CallID: "t7", Tool: "read", Name: "mcp__gh__read", Decision: events.CallAllow, By: "approver:alice",
		Policy: "ask", TraceParent: parent})
	add(77, "gh", &events.CallStarted{CallID: "t7", Tool: "read", Name: "mcp__gh__read", Args: events.Blob{Size: 2}, Attempt: 2,
		Policy: "ask", ApprovedBy: "approver:alice", TraceParent: parent})
	add(80, "gh", &events.CallFinished{CallID: "t7", Outcome: events.OutcomeOK, Result: events.Blob{Size: 10}, DurationNs: 3e6})
	add(90, "", &events.SessionStopped{})
	return out
}

// TestMappingTraced: a call made in a caller's trace is a span of that
// trace, child of the caller's span, with the span ID the runtime told
// the upstream server (tracectx.Upstream); its retry joins the same trace
// and links the first try; its events' log records carry that trace. A
// malformed traceparent is ignored. The golden file holds the rest.
func TestMappingTraced(t *testing.T) {
	evs := tracedEvents()
	spans, logs, _ := mapAll(evs)
	golden(t, "traced", render(spans, logs))
	caller, _ := tracectx.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	byID := map[string]otlp.Span{}
	for _, s := range spans {
		byID[s.SpanID.String()] = s
	}
	for _, id := range []string{"t1", "t2", "t3"} {
		up, _ := tracectx.Parse(tracectx.Upstream(caller, evs[0].Session, id))
		s, ok := byID[up.SpanID().String()]
		if !ok || s.TraceID != caller.TraceID() || s.Parent.SpanID() != caller.SpanID() {
			t.Errorf("call %s: span %+v; want the span the upstream was told (%s) in the caller's trace, child of its span", id, s, up.SpanID())
		}
	}
	_, t4 := tracectx.CallIDs(evs[0].Session, "t4")
	if s := byID[t4.String()]; s.Parent.IsValid() || s.TraceID == caller.TraceID() {
		t.Errorf("a malformed traceparent was followed: %+v", s)
	}
	for _, l := range logs[3:9] {
		if l.TraceID != caller.TraceID() {
			t.Errorf("log record %s: trace %s, want the caller's", l.EventName, l.TraceID)
		}
	}
}

// TestMappingDeniedInCallersTrace: a call denied in a caller's trace
// (its call.decided carries the traceparent; it has no call.started) is
// a span of that trace, a child of the caller's span, as a started call
// is; one denied outside any trace keeps the ledger's own IDs. The log
// record of a decision made in the trace, allowed or denied, carries the
// caller's trace.
func TestMappingDeniedInCallersTrace(t *testing.T) {
	evs := tracedEvents()
	spans, logs, _ := mapAll(evs)
	caller, _ := tracectx.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE")
	sid := evs[0].Session
	byCall := map[string]otlp.Span{}
	for _, s := range spans {
		for _, a := range s.Attrs {
			if a.Key == "gen_ai.tool.call.id" {
				byCall[a.Value.AsString()] = s
			}
		}
	}
	_, t5 := tracectx.CallIDs(sid, "t5")
	s := byCall["t5"]
	if s.TraceID != caller.TraceID() || s.SpanID != t5 || s.Parent.TraceID() != caller.TraceID() ||
		s.Parent.SpanID() != caller.SpanID() || s.Parent.TraceState().String() != "congo=t61rcWkgMzE" {
		t.Errorf("call denied in the caller's trace: span trace=%s span=%s parent %s/%s; want trace %s, span %s, parent %s",
			s.TraceID, s.SpanID, s.Parent.TraceID(), s.Parent.SpanID(), caller.TraceID(), t5, caller.SpanID())
	}
	tid6, sid6 := tracectx.CallIDs(sid, "t6")
	if s := byCall["t6"]; s.TraceID != tid6 || s.SpanID != sid6 || s.Parent.IsValid() {
		t.Errorf("call denied outside any trace: span trace=%s span=%s parent %v; want the ledger's own %s/%s, no parent",
			s.TraceID, s.SpanID, s.Parent.IsValid(), tid6, sid6)
	}
	_, t7 := tracectx.CallIDs(sid, "t7")
	if s := byCall["t7"]; s.TraceID != caller.TraceID() || s.SpanID != t7 || s.Parent.SpanID() != caller.SpanID() {
		t.Errorf("call approved in the caller's trace: span trace=%s span=%s parent %s", s.TraceID, s.SpanID, s.Parent.SpanID())
	}
	for i, e := range evs {
		d, ok := e.Payload.(*events.CallDecided)
		if !ok {
			continue
		}
		want := caller.TraceID()
		if d.CallID == "t6" {
			want = tid6
		}
		if logs[i].TraceID != want {
			t.Errorf("log record of %s's call.decided: trace %s, want %s", d.CallID, logs[i].TraceID, want)
		}
	}
}

// TestMappingCalls: denied, retried and signalled calls, and connection
// spans ended by a failure and by the session's end, against a golden
// file.
func TestMappingCalls(t *testing.T) {
	spans, logs, m := mapAll(callEvents())
	if m.From() != 0 {
		t.Errorf("From after every span ended = %d, want 0", m.From())
	}
	golden(t, "calls", render(spans, logs))
}

// TestMappingResume: a Mapper fed the log from another's From keeps the
// same open spans: the spans ending after any cut are the same, IDs and
// all, whether mapped in one go or after a restart at the cut.
func TestMappingResume(t *testing.T) {
	for _, evs := range [][]events.Event{callEvents(), tracedEvents()} {
		resume(t, evs)
	}
}

func resume(t *testing.T, evs []events.Event) {
	all, _, _ := mapAll(evs)
	for cut := 1; cut < len(evs); cut++ {
		m := otlp.NewMapper()
		var before []otlp.Span
		for _, e := range evs[:cut] {
			s, _ := m.Map(e)
			before = append(before, s...)
		}
		from := m.From()
		if from == 0 {
			from = uint64(cut) + 1
		}
		r := otlp.NewMapper()
		var after []otlp.Span
		for _, e := range evs[from-1:] {
			s, _ := r.Map(e)
			if e.GPos > uint64(cut) {
				after = append(after, s...)
			}
		}
		if got, want := render(append(before, after...), nil), render(all, nil); got != want {
			t.Errorf("cut after %d (From %d): spans differ from one pass:\n%s\nwant\n%s", cut, from, got, want)
		}
	}
}

// TestMappingNoSecrets: a call's arguments and result text never reach a
// span; the log records carry them only as the journal holds them.
func TestMappingNoSecrets(t *testing.T) {
	evs := callEvents()
	spans, _, _ := mapAll(evs)
	if out := render(spans, nil); bytes.Contains([]byte(out), []byte(`"p":"x"`)) {
		t.Errorf("a span carries the call's arguments:\n%s", out)
	}
}

// TestMappingKilledSession: a session killed with its servers connected
// (no session.stopped) has its connection spans ended, at its last
// event, when the next session starts; nothing stays open, so a restart
// does not read the killed session again.
func TestMappingKilledSession(t *testing.T) {
	killed := callEvents()[:4] // gh ready, then nothing
	next := uuid.MustParse("01a20252-0000-7000-8000-000000000002")
	start := events.New(time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC), "", &events.SessionStarted{Seed: 2})
	start.Session, start.Seq, start.GPos, start.ID = next, 1, 5, uuid.MustParse("01a20252-0000-7000-8000-000000000200")
	m := otlp.NewMapper()
	for _, e := range killed {
		if s, _ := m.Map(e); len(s) != 0 {
			t.Fatalf("span ended by %s", e.Kind)
		}
	}
	if m.From() != 2 {
		t.Fatalf("From = %d with gh's connection open since gpos 2", m.From())
	}
	spans, _ := m.Map(start)
	if len(spans) != 1 || spans[0].Name != "connection gh" || spans[0].End != killed[3].Time || spans[0].Status != 0 {
		t.Fatalf("spans at the next session's start: %s", render(spans, nil))
	}
	if m.From() != 0 {
		t.Errorf("From = %d after the next session started, want 0 (nothing open)", m.From())
	}
}
