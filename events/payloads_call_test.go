package events

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// callDecidedBefore20261127 is call.decided as journals before 2026-11-27
// hold it: without the caller's trace context.
type callDecidedBefore20261127 struct {
	CallID   string `msgpack:"call_id"`
	Tool     string `msgpack:"tool"`
	Name     string `msgpack:"name,omitempty"`
	Decision string `msgpack:"decision"`
	By       string `msgpack:"by"`
	Policy   string `msgpack:"policy"`
	DefHash  string `msgpack:"def_hash,omitempty"`
	Reason   string `msgpack:"reason,omitempty"`
}

// TestCallDecidedTraceContext: call.decided's trace context is optional
// both ways. A record written before it existed (a fixture, written once
// with -update, never changed) decodes without one; a decision made
// outside any trace encodes to that record's very payload bytes, so
// journals (and their digests) do not change; one made in a trace keeps
// its traceparent and tracestate through the binary and JSON codecs,
// under the same keys as call.started's.
func TestCallDecidedTraceContext(t *testing.T) {
	old := &callDecidedBefore20261127{CallID: "c9", Tool: "delete", Name: "mcp__gh__delete", Decision: CallDeny, By: "policy",
		Policy: "never", DefHash: "sha256:ab", Reason: "the call policy for this tool is never"}
	path := filepath.Join("testdata", "compat", "call.decided-before-trace.msgpack")
	if *update {
		if _, err := os.Stat(path); err != nil {
			if err := os.WriteFile(path, rawRecord(t, KindCallDecided, 1, old), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./events -update once to create it)", err)
	}
	e, err := Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	untraced := CallDecided{CallID: "c9", Tool: "delete", Name: "mcp__gh__delete", Decision: CallDeny, By: "policy",
		Policy: "never", DefHash: "sha256:ab", Reason: "the call policy for this tool is never"}
	if !reflect.DeepEqual(e.Payload, &untraced) {
		t.Errorf("a call.decided of before 2026-11-27 decodes to %+v, want %+v", e.Payload, &untraced)
	}
	if !bytes.Equal(rawRecord(t, KindCallDecided, 1, &untraced), rec) {
		t.Error("a call.decided without trace context no longer encodes as before 2026-11-27")
	}

	traced := untraced
	traced.TraceParent, traced.TraceState = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE"
	enc, dec := NewEncoder(), NewDecoder()
	b, err := enc.Append(nil, &Event{Kind: KindCallDecided, Seq: 1, Payload: &traced})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Payload, &traced) {
		t.Errorf("decoded %+v, want %+v", got.Payload, &traced)
	}
	j, err := json.Marshal(&traced)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"trace_parent":"00-4bf92f`, `"trace_state":"congo=`} {
		if !strings.Contains(string(j), key) {
			t.Errorf("JSON %s lacks %s", j, key)
		}
	}
	if j, _ := json.Marshal(&untraced); strings.Contains(string(j), "trace_") {
		t.Errorf("JSON of a call outside any trace names one: %s", j)
	}
}
