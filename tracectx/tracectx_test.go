package tracectx_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/tracectx"
)

const (
	validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	validState  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

// TestParse: W3C traceparents are taken as the specification says, and
// malformed ones are refused, never half-read.
func TestParse(t *testing.T) {
	sc, ok := tracectx.Parse(validParent, validState)
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" ||
		!sc.IsSampled() || !sc.IsRemote() || sc.TraceState().String() != validState {
		t.Fatalf("Parse(%q, %q) = %v, %v", validParent, validState, sc, ok)
	}
	// A later version may carry more fields: its first four are read.
	if sc, ok := tracectx.Parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more", ""); !ok || sc.IsSampled() {
		t.Errorf("a version 01 traceparent with a field more: %v, %v", sc, ok)
	}
	// A malformed tracestate is dropped; the traceparent stands.
	if sc, ok := tracectx.Parse(validParent, "not a list member"); !ok || sc.TraceState().Len() != 0 {
		t.Errorf("malformed tracestate: %v, %v; want the traceparent without it", sc, ok)
	}
	for _, bad := range []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",                // no flags
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",             // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",             // zero trace ID
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",             // zero span ID
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",             // version ff
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",       // extra field in version 00
		"00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",             // not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" + "\n",      // trailing newline
		strings.Repeat("0", 2000),                                             // long junk
		"00-4bf92f3577b34da6a3ce929d0e0e47360-0f067aa0ba902b7-01",             // misplaced dash
		" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",            // leading space
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",              // short flags
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",             // reserved flags in version 00
		"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",             // wrong delimiter
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;foo=bar\x00", // junk after
	} {
		if sc, ok := tracectx.Parse(bad, validState); ok || sc.IsValid() || sc.TraceState().Len() != 0 {
			t.Errorf("Parse(%q) = %v, %v; want nothing", bad, sc, ok)
		}
	}
}

// TestParseBoundsTracestate: a tracestate longer than MaxTracestate is
// cut as the W3C specification lets a participant cut it (entries over
// 128 characters first, then from the end); a short one is kept whole.
func TestParseBoundsTracestate(t *testing.T) {
	var members []string
	for i := range 32 {
		v := strings.Repeat("v", 40)
		if i == 3 {
			v = strings.Repeat("w", 200) // the one over 128 characters
		}
		members = append(members, fmt.Sprintf("k%02d=%s", i, v))
	}
	sc, ok := tracectx.Parse(validParent, strings.Join(members, ","))
	got := sc.TraceState().String()
	if !ok || len(got) > tracectx.MaxTracestate || strings.Contains(got, "k03=") || !strings.HasPrefix(got, members[0]+","+members[1]+","+members[2]+","+members[4]) {
		t.Fatalf("tracestate kept: %d characters %q", len(got), got)
	}
	// Every member it kept is whole, in order, and no later one was kept
	// after one was dropped from the end.
	kept := strings.Split(got, ",")
	want := append(members[:3:3], members[4:]...)[:len(kept)]
	if strings.Join(kept, ",") != strings.Join(want, ",") || len(got)+1+len(want[0]) <= tracectx.MaxTracestate {
		t.Errorf("tracestate kept %q, want the first %d members but k03 (and no room for one more)", got, len(kept))
	}
	// A span context made elsewhere (a caller's own tracer) is cut
	// when formatted.
	long, err := trace.ParseTraceState(strings.Join(members, ","))
	if err != nil {
		t.Fatal(err)
	}
	if _, st := tracectx.Format(sc.WithTraceState(long)); st != got {
		t.Errorf("Format of a long tracestate: %q, want %q", st, got)
	}
	if sc, _ := tracectx.Parse(validParent, validState); sc.TraceState().String() != validState {
		t.Errorf("a short tracestate was changed: %q", sc.TraceState())
	}
}

// TestFormat: what Parse reads, Format writes back in version 00 form,
// whatever version came in; an invalid context formats as nothing.
func TestFormat(t *testing.T) {
	sc, _ := tracectx.Parse(validParent, validState)
	if p, s := tracectx.Format(sc); p != validParent || s != validState {
		t.Errorf("Format = %q, %q; want %q, %q", p, s, validParent, validState)
	}
	sc, _ = tracectx.Parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"+strings.Repeat("x", 500), "")
	if p, s := tracectx.Format(sc); p != validParent || s != "" {
		t.Errorf("Format of a version cc traceparent = %q, %q; want it in version 00 form", p, s)
	}
	if p, s := tracectx.Format(trace.SpanContext{}); p != "" || s != "" {
		t.Errorf("Format of no context = %q, %q", p, s)
	}
}

// TestUpstream: the context sent upstream is the caller's trace, flags and
// state, with the ledger's span of the call (CallIDs) as parent: a new
// one for every call ID.
func TestUpstream(t *testing.T) {
	session := uuid.MustParse("01a20252-0000-7000-8000-000000000001")
	caller, _ := tracectx.Parse(validParent, validState)
	p, s := tracectx.Upstream(caller, session, "c1")
	up, ok := tracectx.Parse(p, s)
	_, want := tracectx.CallIDs(session, "c1")
	if !ok || up.TraceID() != caller.TraceID() || up.SpanID() != want || !up.IsSampled() || s != validState {
		t.Fatalf("Upstream = %q, %q; want trace %s, parent %s", p, s, caller.TraceID(), want)
	}
	if p2, _ := tracectx.Upstream(caller, session, "c2"); p2 == p {
		t.Errorf("two calls were given the same parent: %s", p2)
	}
	unsampled, _ := tracectx.Parse(strings.TrimSuffix(validParent, "01")+"00", "")
	if p, _ := tracectx.Upstream(unsampled, session, "c1"); !strings.HasSuffix(p, "-00") {
		t.Errorf("an unsampled caller's call goes up as %q; the caller's decision stands", p)
	}
	if p, s := tracectx.Upstream(trace.SpanContext{}, session, "c1"); p != "" || s != "" {
		t.Errorf("Upstream without a caller's trace = %q, %q", p, s)
	}
}

// TestIDs: the derived IDs depend on every input and on nothing else, and
// calls and events never share them.
func TestIDs(t *testing.T) {
	s1 := uuid.MustParse("01a20252-0000-7000-8000-000000000001")
	s2 := uuid.MustParse("01a20252-0000-7000-8000-000000000002")
	t1, p1 := tracectx.CallIDs(s1, "c1")
	if tid, sid := tracectx.CallIDs(s1, "c1"); tid != t1 || sid != p1 {
		t.Error("CallIDs differ between two derivations")
	}
	seen := map[string]bool{t1.String() + p1.String(): true}
	for _, ids := range [][2]string{
		ids(tracectx.CallIDs(s2, "c1")), ids(tracectx.CallIDs(s1, "c2")), ids(tracectx.CallIDs(s1, "")),
		ids(tracectx.EventIDs(s1)), ids(tracectx.EventIDs(s2)),
	} {
		if seen[ids[0]+ids[1]] {
			t.Errorf("IDs %v derived twice", ids)
		}
		seen[ids[0]+ids[1]] = true
		if strings.Trim(ids[0], "0") == "" || strings.Trim(ids[1], "0") == "" {
			t.Errorf("IDs %v: an all-zero ID is invalid", ids)
		}
	}
}

func ids(t trace.TraceID, s trace.SpanID) [2]string { return [2]string{t.String(), s.String()} }
