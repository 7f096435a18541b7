package replay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

// why runs replay.Why on a journal holding evs.
func why(t *testing.T, evs []events.Event, tool string, seq uint64) *replay.Explanation {
	t.Helper()
	ex, err := replay.Why(context.Background(), load(t, evs), evs[0].Session, tool, seq)
	if err != nil {
		t.Fatalf("Why %s at seq %d: %v", tool, seq, err)
	}
	if ex.Tool != tool || seq != 0 && ex.Seq != seq {
		t.Fatalf("Why %s at seq %d explained %s at seq %d", tool, seq, ex.Tool, ex.Seq)
	}
	return ex
}

// Admission is blamed only while the server's latest admission verdict
// (the last admission.decided about it up to the seq asked) refuses it,
// and then with that verdict's seq: a verdict that admitted the server
// clears every refusal before it.
func TestWhyBlamesAdmissionOnlyWhileItsLatestVerdictRefuses(t *testing.T) {
	type refusal struct {
		from, to uint64 // seqs, inclusive
		seq      uint64 // the refusing verdict, 0: none is blamed
		text     string
	}
	for _, c := range []struct {
		journal, tool string
		refusals      []refusal
	}{
		// gh: refused at 4, admitted at 12 after the approval, refused
		// at 30 after the config changed.
		{"approvals.jsonl", "mcp__gh__echo", []refusal{{1, 3, 0, ""},
			{4, 11, 4, "admission refused it: pending_approval (never approved)"}, {12, 29, 0, ""},
			{30, 35, 30, "admission refused it: pending_approval (config changed since the last decision)"}}},
		// other: refused at 7 (pending) and again at 16 (rejected).
		{"approvals.jsonl", "mcp__other__echo", []refusal{{1, 6, 0, ""},
			{7, 15, 7, "admission refused it: pending_approval (never approved)"},
			{16, 35, 16, "admission refused it: rejected (rejected by alice)"}}},
		// pin: refused at 4, admitted at 9 and again at 20.
		{"tool-pinning.jsonl", "mcp__pin__t0000", []refusal{{1, 3, 0, ""},
			{4, 8, 4, "admission refused it: pending_approval (never approved)"}, {9, 32, 0, ""}}},
	} {
		evs := golden(t, c.journal)
		j := load(t, evs)
		for _, r := range c.refusals {
			for seq := r.from; seq <= r.to; seq++ {
				ex, err := replay.Why(context.Background(), j, evs[0].Session, c.tool, seq)
				if err != nil {
					t.Fatal(err)
				}
				var got []replay.Reason
				for _, re := range ex.Reasons {
					if strings.HasPrefix(re.Text, "admission") {
						got = append(got, re)
					}
				}
				var want []replay.Reason
				if r.seq != 0 {
					want = []replay.Reason{{Seq: r.seq, Text: r.text}}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: why %s at seq %d blames admission with %v, want %v", c.journal, c.tool, seq, got, want)
				}
			}
		}
	}
}

// An available tool is explained by the listing it comes from: the
// server's last, whichever server listed after it.
func TestWhyExplainsAnAvailableTool(t *testing.T) {
	for _, c := range []struct {
		journal, tool   string
		seq             uint64
		server          string
		deferred, stale bool
		reason          replay.Reason
	}{
		{"crash-loop.jsonl", "mcp__crashy__echo", 21, "crashy", false, false, replay.Reason{Seq: 20, Text: "echo was listed by crashy"}},
		// Listed again after the crash: the new listing.
		{"crash-loop.jsonl", "mcp__crashy__echo", 43, "crashy", false, false, replay.Reason{Seq: 42, Text: "echo was listed by crashy"}},
		// Between the crash and the new listing, the old listing stands.
		{"crash-loop.jsonl", "mcp__crashy__echo", 35, "crashy", false, true,
			replay.Reason{Seq: 20, Text: "echo was listed by crashy (stale: the server is reconnecting)"}},
		// Reconnecting on request: offered from the cache of its listing.
		{"tool-pinning.jsonl", "mcp__pin__add", 19, "pin", true, false,
			replay.Reason{Seq: 14, Text: "add is offered from the tool cache while pin connects (a call waits for it)"}},
		// dropped listed at 21; edited listed at 23.
		{"reload.jsonl", "mcp__dropped__add", 24, "dropped", false, false, replay.Reason{Seq: 21, Text: "add was listed by dropped"}},
	} {
		ex := why(t, golden(t, c.journal), c.tool, c.seq)
		want := []replay.Reason{c.reason}
		if !ex.Available || ex.Server != c.server || ex.Deferred != c.deferred || ex.Stale != c.stale || !slices.Equal(ex.Reasons, want) {
			t.Errorf("%s: why %s at seq %d = available %v server %q deferred %v stale %v %v,\nwant available on %q deferred %v stale %v %v",
				c.journal, c.tool, c.seq, ex.Available, ex.Server, ex.Deferred, ex.Stale, ex.Reasons, c.server, c.deferred, c.stale, want)
		}
	}
}

// An unavailable tool is explained by its server's state, its admission,
// its approval and what became of the tool, each with the seq that made it
// so.
func TestWhyExplainsAnUnavailableTool(t *testing.T) {
	for _, c := range []struct {
		journal, tool string
		seq           uint64
		server        string
		reasons       []replay.Reason
	}{
		// Before any transition of the server.
		{"crash-loop.jsonl", "mcp__crashy__echo", 2, "crashy", []replay.Reason{{0, "server crashy was configuring"}}},
		// Its own transition (not dead's at 7).
		{"crash-loop.jsonl", "mcp__crashy__echo", 8, "crashy", []replay.Reason{{5, "server crashy was launching"}}},
		{"crash-loop.jsonl", "mcp__dead__echo", 31, "dead", []replay.Reason{{31, "server dead was failed (attempts_exhausted)"}}},
		// gh's approval request (6), not other's (9).
		{"approvals.jsonl", "mcp__gh__echo", 9, "gh", []replay.Reason{
			{5, "server gh was stopped (pending_approval)"},
			{4, "admission refused it: pending_approval (never approved)"},
			{6, "pending approval: config 9fa11fbbf3a3 was never approved (mcpledger approve gh)"}}},
		{"approvals.jsonl", "mcp__gh__echo", 10, "gh", []replay.Reason{
			{5, "server gh was stopped (pending_approval)"},
			{4, "admission refused it: pending_approval (never approved)"},
			{10, "approved by alice for config 9fa11fbbf3a3"}}},
		// gh's approval decision (10), not other's (14).
		{"approvals.jsonl", "mcp__gh__echo", 15, "gh", []replay.Reason{
			{13, "server gh was launching"},
			{10, "approved by alice for config 9fa11fbbf3a3"}}},
		{"approvals.jsonl", "mcp__other__echo", 17, "other", []replay.Reason{
			{17, "server other was stopped (rejected)"},
			{16, "admission refused it: rejected (rejected by alice)"},
			{14, "rejected by alice for config 1b3e317312bd"}}},
		// The approval binds to a config gh no longer has.
		{"approvals.jsonl", "mcp__gh__echo", 32, "gh", []replay.Reason{
			{31, "server gh was stopped (pending_approval)"},
			{30, "admission refused it: pending_approval (config changed since the last decision)"},
			{32, "pending approval: the last decision (approve by alice) was for config 9fa11fbbf3a3, now 852439e86e4d; changed: env:MCPTEST_NAME"}}},
		// Ready, but the tool is not in the listing.
		{"tool-pinning.jsonl", "mcp__pin__t0000", 15, "pin", []replay.Reason{
			{15, "server pin was ready"},
			{7, "approved by alice for config 778d9d9db6d2"},
			{14, "pin's last listing has no tool t0000"}}},
		// Ready, listed, but its definition is not the pinned one.
		{"tool-pinning.jsonl", "mcp__pin__t0000", 28, "pin", []replay.Reason{
			{27, "server pin was ready"},
			{7, "approved by alice for config 778d9d9db6d2"},
			{28, "tool t0000 changed its definition since the approval: withheld (tool_changed)"}}},
	} {
		ex := why(t, golden(t, c.journal), c.tool, c.seq)
		if ex.Available || ex.Server != c.server || !slices.Equal(ex.Reasons, c.reasons) {
			t.Errorf("%s: why %s at seq %d = available %v server %q\n%v,\nwant unavailable on %q\n%v",
				c.journal, c.tool, c.seq, ex.Available, ex.Server, ex.Reasons, c.server, c.reasons)
		}
	}
}

// recording builds a session as the runtime journals one: each input
// followed by the decisions fsm.Decide makes of it, one second apart.
type recording struct {
	t   *testing.T
	sid uuid.UUID
	st  fsm.State
	evs []events.Event
}

func newRecording(t *testing.T) *recording {
	r := &recording{t: t, sid: events.NewID()}
	r.add("", &events.SessionStarted{Seed: 1})
	return r
}

// add journals input p about server and its decisions; it returns the
// input's seq.
func (r *recording) add(server string, p events.Payload) uint64 {
	r.t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(len(r.evs)) * time.Second)
	in := events.New(at, server, p)
	in.Session, in.Seq = r.sid, uint64(len(r.evs)+1)
	decs, err := fsm.Decide(r.st, in)
	if err != nil {
		r.t.Fatalf("decide %s: %v", in.Kind, err)
	}
	for _, e := range append([]events.Event{in}, decs...) {
		e.Seq, e.ID = uint64(len(r.evs)+1), events.NewID()
		r.st = fsm.Evolve(r.st, e)
		r.evs = append(r.evs, e)
	}
	return in.Seq
}

// ready takes a launching server through its first attempt to ready with
// tools listed.
func (r *recording) ready(server string, tools ...string) (listed uint64) {
	r.add(server, &events.ProcessSpawned{Attempt: 1, PID: 100})
	r.add(server, &events.HandshakeCompleted{Attempt: 1, ProtocolVersion: "2025-11-25"})
	var ts []events.Tool
	for _, name := range tools {
		ts = append(ts, events.Tool{Name: name, Description: name, DefHash: events.ToolDefHash(name, name, "")})
	}
	return r.add(server, &events.ToolsListed{Attempt: 1, Trigger: "initial", Tools: ts})
}

func servers(cs ...events.ServerConfig) *events.ConfigObserved {
	for i := range cs {
		cs[i].Transport, cs[i].Command = events.TransportStdio, "mcpserver"
		cs[i].Hash = events.ConfigHash(&cs[i])
	}
	return &events.ConfigObserved{Trigger: "start", Servers: cs}
}

// A catalog name belongs to the configured server with the longest name
// that prefixes it, and the rest is that server's tool; a ready server's
// tool a filter excludes is explained by the filter.
func TestWhyFindsTheServerOfACatalogName(t *testing.T) {
	r := newRecording(t)
	cfg := r.add("", servers(events.ServerConfig{Name: "fs", ExcludeTools: []string{"write"}}, events.ServerConfig{Name: "fs__extra"}))
	listed := r.ready("fs", "read", "write")
	fsReady := listed + 1 // the listing's decision
	if srv, _ := r.st.Server("fs"); srv.Phase != events.StateReady || uint64(len(r.evs)) != fsReady {
		t.Fatalf("fs is %s after %d events, want ready at seq %d", srv.Phase, len(r.evs), fsReady)
	}
	var extraLaunching uint64
	for _, e := range r.evs {
		if e.Server == "fs__extra" && e.Kind == events.KindServerTransitioned {
			extraLaunching = e.Seq
		}
	}
	for _, c := range []struct {
		tool, server string
		reasons      []replay.Reason
	}{
		{"mcp__fs__write", "fs", []replay.Reason{{fsReady, "server fs was ready"},
			{cfg, "a tool filter of fs excludes write (include [], exclude [write])"}}},
		{"mcp__fs__extra__read", "fs__extra", []replay.Reason{{extraLaunching, "server fs__extra was launching"}}},
		{"mcp__fs__nope", "fs", []replay.Reason{{fsReady, "server fs was ready"}, {listed, "fs's last listing has no tool nope"}}},
		{"mcp__nope__read", "", []replay.Reason{{0, fmt.Sprintf(`no configured server's name matches "mcp__nope__read" at seq %d`, len(r.evs))}}},
		{"fs__read", "", []replay.Reason{{0, fmt.Sprintf(`no configured server's name matches "fs__read" at seq %d`, len(r.evs))}}},
	} {
		ex := why(t, r.evs, c.tool, uint64(len(r.evs)))
		if ex.Available || ex.Server != c.server || !slices.Equal(ex.Reasons, c.reasons) {
			t.Errorf("why %s = available %v server %q %v, want unavailable on %q %v", c.tool, ex.Available, ex.Server, ex.Reasons, c.server, c.reasons)
		}
	}
	if ex := why(t, r.evs, "mcp__fs__read", 0); !ex.Available || ex.Seq != uint64(len(r.evs)) {
		t.Errorf("why mcp__fs__read at the end: %+v", ex)
	}
}

func TestWhyOfAnUnknownSessionOrSeq(t *testing.T) {
	evs := golden(t, "crash-loop.jsonl")
	j := load(t, evs)
	if _, err := replay.Why(context.Background(), j, uuid.New(), "mcp__crashy__echo", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Why in an unknown session: %v", err)
	}
	if _, err := replay.Why(context.Background(), j, evs[0].Session, "mcp__crashy__echo", 49); !errors.Is(err, replay.ErrNoSuchEvent) {
		t.Errorf("Why after the last event: %v", err)
	}
}

// A catalog name spells a server's name with one '_' for each character
// outside [A-Za-z0-9_-]: the server it belongs to is the one whose name,
// so spelled, is the longest prefix, however many bytes its name has.
func TestWhyComparesServerNamesAsCatalogNamesSpellThem(t *testing.T) {
	r := newRecording(t)
	// "日本" (6 bytes) is spelled "__", a prefix of "____x" (5 bytes).
	r.add("", servers(events.ServerConfig{Name: "日本"}, events.ServerConfig{Name: "____x"}))
	for _, c := range []struct{ tool, server string }{
		{"mcp______x__echo", "____x"},
		{"mcp______echo", "日本"},
	} {
		ex := why(t, r.evs, c.tool, 0)
		if ex.Server != c.server || len(ex.Reasons) != 1 || !strings.HasPrefix(ex.Reasons[0].Text, "server "+c.server+" was ") {
			t.Errorf("why %s = server %q %v, want %q", c.tool, ex.Server, ex.Reasons, c.server)
		}
	}
}

// A tool the server listed but the client left out of the catalog (an
// invalid x-mcp-header annotation) is explained by the reason its listing
// journaled, as long as the server's last listing left it out.
func TestWhyNamesAToolLeftOutOfTheCatalog(t *testing.T) {
	r := newRecording(t)
	r.add("", servers(events.ServerConfig{Name: "web"}))
	ready := r.ready("web", "good") + 1 // the listing's decision: ready
	why1 := "property \"q\": x-mcp-header must be a non-empty string"
	relisted := r.add("web", &events.ToolsListed{Attempt: 1, Trigger: "list_changed",
		Tools:    []events.Tool{{Name: "good", Description: "good", DefHash: events.ToolDefHash("good", "good", "")}},
		Excluded: []events.ExcludedTool{{Name: "other", Reason: "duplicate"}, {Name: "bad", Reason: why1}}})
	ex := why(t, r.evs, "mcp__web__bad", 0)
	want := []replay.Reason{{ready, "server web was ready"}, {relisted, "web listed bad, but it was left out of the catalog: " + why1}}
	if ex.Available || !slices.Equal(ex.Reasons, want) {
		t.Errorf("why mcp__web__bad = available %v %v, want %v", ex.Available, ex.Reasons, want)
	}
	// A later listing that does not name it: not listed, no exclusion.
	last := r.add("web", &events.ToolsListed{Attempt: 1, Trigger: "list_changed"})
	ex = why(t, r.evs, "mcp__web__bad", 0)
	want = []replay.Reason{{ready, "server web was ready"}, {last, "web's last listing has no tool bad"}}
	if !slices.Equal(ex.Reasons, want) {
		t.Errorf("after a listing without it: %v, want %v", ex.Reasons, want)
	}
	// Another server's exclusion of the same name does not count.
	r.add("", servers(events.ServerConfig{Name: "web"}, events.ServerConfig{Name: "db"}))
	r.add("db", &events.ToolsListed{Attempt: 1, Trigger: "initial", Excluded: []events.ExcludedTool{{Name: "bad", Reason: why1}}})
	if ex = why(t, r.evs, "mcp__web__bad", 0); len(ex.Reasons) != 2 || !strings.Contains(ex.Reasons[1].Text, "last listing has no tool bad") {
		t.Errorf("db's exclusion explains web's tool: %v", ex.Reasons)
	}
}
