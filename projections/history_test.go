package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// historyJournal is three sessions: the first approves and lists tools,
// launches a server twice and stops; the second interleaves with the
// third, changes the config (a new fingerprint, a new request) and never
// stops; the third stops.
func historyJournal() []events.Event {
	web := stdio("web")
	web2 := stdio("web", "--port", "9")
	j := newJournal()
	s1 := j.session(1)
	s1.start()
	s1.config(web, stdio("git"))
	s1.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: web.Hash, Scope: events.ScopeProject})
	s1.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: web.Hash, By: "alice",
		Scope: events.ScopeProject, Config: &web})
	s1.connect("web", events.StateConfiguring, 1, 100, toolList("search", "fetch"))
	s1.out("web", &events.ToolsPinned{Workspace: "/ws", Hash: web.Hash, Tools: []events.KV{{Key: "search", Value: "sha256:aa"}}})
	s1.crash("web", events.StateReady, 1)
	s1.connect("web", events.StateReconnecting, 2, 101, toolList("search"))
	s1.crash("git", events.StateLaunching, 1)
	s1.connect("git", events.StateConfiguring, 1, 102, toolList("log"))
	s1.out("", &events.SessionStopped{Reason: events.ReasonShutdown})

	s2, s3 := j.session(2), j.session(3)
	s2.start()
	s3.start()
	s2.config(web2)
	s3.config(stdio("git"))
	s2.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: web2.Hash, Previous: web.Hash, Changed: []string{"args"}})
	s3.connect("git", events.StateConfiguring, 1, 200, toolList("log", "blame"))
	s2.tr("web", events.StateConfiguring, events.StateLaunching, "", 1, nil)
	s3.out("", &events.SessionStopped{Reason: events.ReasonShutdown})
	s2.in("web", &events.ToolsListed{Attempt: 1, Trigger: "initial", Tools: toolList("search", "crawl"), ProtocolVersion: "2026-07-28"})
	s2.crash("web", events.StateLaunching, 1)
	return j.evs
}

func foldHistory(evs []events.Event) *History {
	h := NewHistory()
	for _, e := range evs {
		h.Apply(e)
	}
	return h
}

// TestHistoryResumesExactly: a History decoded from the checkpoint of any
// prefix of the journal, then fed the rest, is the History of the whole
// journal: same encoding, same approvals, cache, sessions and launches.
func TestHistoryResumesExactly(t *testing.T) {
	evs := historyJournal()
	whole := foldHistory(evs)
	want := whole.Encode()
	for k := 0; k <= len(evs); k++ {
		h, err := DecodeHistory(foldHistory(evs[:k]).Encode())
		if err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		for _, e := range evs[k:] {
			h.Apply(e)
		}
		if got := h.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("k=%d: resumed history differs:\n got %s\nwant %s", k, got, want)
		}
		if !reflect.DeepEqual(h.Approvals.List(), whole.Approvals.List()) || !reflect.DeepEqual(h.Approvals.Pending(), whole.Approvals.Pending()) {
			t.Fatalf("k=%d: approvals differ", k)
		}
		if !reflect.DeepEqual(h.Cache.Entries(), whole.Cache.Entries()) {
			t.Fatalf("k=%d: cache differs", k)
		}
		if !reflect.DeepEqual(h.Sessions(), whole.Sessions()) || !reflect.DeepEqual(h.Launches("web"), whole.Launches("web")) ||
			!reflect.DeepEqual(h.Crashes("web"), whole.Crashes("web")) {
			t.Fatalf("k=%d: sessions, launches or crashes differ", k)
		}
		// The catalog a new session builds on the resumed cache serves the
		// same deferred tools.
		fp := events.Fingerprint(ptr(stdio("web", "--port", "9")))
		a, _ := h.Cache.Get("web", fp)
		b, _ := whole.Cache.Get("web", fp)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("k=%d: cached tools differ: %v vs %v", k, a, b)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestHistoryFold(t *testing.T) {
	h := foldHistory(historyJournal())
	ss := h.Sessions()
	if len(ss) != 3 {
		t.Fatalf("Sessions = %+v, want 3", ss)
	}
	if s := ss[0]; !s.Stopped || s.Reason != events.ReasonShutdown || !slices.Equal(s.Servers, []string{"git", "web"}) || s.FirstGPos != 1 {
		t.Errorf("session 1 = %+v", s)
	}
	if s := ss[1]; s.Stopped || !slices.Equal(s.Servers, []string{"web"}) || s.Command != "run" {
		t.Errorf("session 2 = %+v, want not stopped, web, run", s)
	}
	if last, ok := h.Last(); !ok || last.Session != ss[2].Session || !last.Stopped {
		t.Errorf("Last = %+v (the session whose first event came last)", last)
	}
	if got := h.Launches("web"); len(got) != 3 {
		t.Errorf("Launches(web) = %v, want 3 (two in session 1, one in session 2)", got)
	}
	if s, ok := h.Session(ss[1].Session2()); !ok || s.Session != ss[1].Session {
		t.Errorf("Session(%s) = %+v, %v", ss[1].Session, s, ok)
	}
	if _, ok := NewHistory().Last(); ok {
		t.Error("an empty History has a last session")
	}
	if d, ok := h.Approvals.Lookup("/ws", "web"); !ok || len(d.ToolHashes) != 1 {
		t.Errorf("approval = %+v, %v: want the pinned tools", d, ok)
	}
	if p := h.Approvals.Pending(); len(p) != 1 || p[0].Previous == "" {
		t.Errorf("pending = %+v, want session 2's request", p)
	}
}

func (s SessionSummary) Session2() [16]byte {
	k, err := parseSessionKey(s.Session)
	if err != nil {
		panic(err)
	}
	return k
}

func TestHistoryKeepsLatestLaunches(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	for i := range MaxLaunches + 5 {
		s.tr("web", events.StateReconnecting, events.StateLaunching, "", i+1, nil)
		s.in("web", &events.ProcessSpawned{Attempt: i + 1, PID: 10})
	}
	h := foldHistory(j.evs)
	got := h.Launches("web")
	if len(got) != MaxLaunches {
		t.Fatalf("kept %d launches, want %d", len(got), MaxLaunches)
	}
	if got[0] != j.evs[1+2*5].Time || got[len(got)-1] != j.evs[len(j.evs)-2].Time {
		t.Errorf("kept %d..%d, want the newest %d", got[0], got[len(got)-1], MaxLaunches)
	}
}

func TestDecodeHistoryRefuses(t *testing.T) {
	good := foldHistory(historyJournal()).Encode()
	var doc map[string]any
	if err := json.Unmarshal(good, &doc); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(map[string]any)) []byte {
		var d map[string]any
		_ = json.Unmarshal(good, &d)
		f(d)
		b, _ := json.Marshal(d)
		return b
	}
	sessions := doc["sessions"].([]any)
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"not JSON", []byte("{"), ErrHistoryEncoding},
		{"empty", nil, ErrHistoryEncoding},
		{"other version", edit(func(d map[string]any) { d["version"] = HistoryVersion + 1 }), ErrHistoryVersion},
		{"no version", edit(func(d map[string]any) { delete(d, "version") }), ErrHistoryVersion},
		{"unknown field", edit(func(d map[string]any) { d["extra"] = 1 }), ErrHistoryEncoding},
		{"bad session id", edit(func(d map[string]any) { d["sessions"] = []any{map[string]any{"session": "nope"}} }), ErrHistoryEncoding},
		{"upper-case session id", edit(func(d map[string]any) {
			d["sessions"] = []any{map[string]any{"session": "0A0A0A0A-0A0A-0A0A-0A0A-0A0A0A0A0A0A"}}
		}), ErrHistoryEncoding},
		{"session twice", edit(func(d map[string]any) { d["sessions"] = []any{sessions[0], sessions[0]} }), ErrHistoryEncoding},
		{"bad cache session", edit(func(d map[string]any) {
			d["cache"].([]any)[0].(map[string]any)["session"] = "x"
		}), ErrHistoryEncoding},
		{"bad config session", edit(func(d map[string]any) {
			d["configs"].([]any)[0].(map[string]any)["session"] = "x"
		}), ErrHistoryEncoding},
	} {
		if _, err := DecodeHistory(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

// TestResume: the newest usable checkpoint below the bound wins; damaged,
// other-version and malformed ones are passed over and reported.
func TestResume(t *testing.T) {
	evs := historyJournal()
	at := func(k int) Stored { return Stored{GPos: uint64(k), Data: foldHistory(evs[:k]).Encode()} }
	damaged := Stored{GPos: 20, Err: errors.New("damaged")}
	wrongPos := at(15)
	wrongPos.GPos = 16
	other := Stored{GPos: 18, Data: []byte(`{"version":999}`)}
	cps := []Stored{at(5), at(10), wrongPos, other, damaged}

	h, skipped, err := Resume(cps, 0)
	if err != nil || h.GPos != 10 || len(skipped) != 3 {
		t.Fatalf("Resume(0) = gpos %d, skipped %v; want 10 after three skipped", h.GPos, skipped)
	}
	if !errors.Is(skipped[1], ErrHistoryVersion) || !errors.Is(skipped[2], ErrHistoryEncoding) || skipped[0] != damaged.Err {
		t.Errorf("skipped = %v", skipped)
	}
	if h, skipped, _ := Resume(cps, 10); h.GPos != 5 || len(skipped) != 0 {
		t.Errorf("Resume(10) = gpos %d, skipped %v; want 5 (below 10)", h.GPos, skipped)
	}
	if h, _, _ := Resume(cps, 5); h.GPos != 0 || len(h.Sessions()) != 0 {
		t.Errorf("Resume(5) = gpos %d, want an empty History", h.GPos)
	}
	if h, skipped, err := Resume(nil, 0); err != nil || h.GPos != 0 || skipped != nil {
		t.Errorf("Resume(nil) = %d, %v, %v", h.GPos, skipped, err)
	}

	// A journal whose first records were archived: its base state is the
	// fold it cannot do without.
	base := at(5)
	base.Base = true
	withBase := []Stored{base, at(10)}
	if h, _, err := Resume(withBase, 0); err != nil || h.GPos != 10 {
		t.Errorf("with a base: gpos %d, %v; want the newest checkpoint", h.GPos, err)
	}
	if h, _, err := Resume(withBase, 10); err != nil || h.GPos != 5 {
		t.Errorf("with a base, below 10: gpos %d, %v; want the base", h.GPos, err)
	}
	if _, _, err := Resume(withBase, 5); !errors.Is(err, ErrNoBase) {
		t.Errorf("below the base: %v, want ErrNoBase", err)
	}
	damagedBase := Stored{GPos: 5, Base: true, Err: errors.New("crc")}
	if _, skipped, err := Resume([]Stored{damagedBase, {GPos: 10, Err: errors.New("crc")}}, 0); !errors.Is(err, ErrNoBase) || len(skipped) != 2 {
		t.Errorf("a damaged base: %v (skipped %v), want ErrNoBase", err, skipped)
	}
	badBase := Stored{GPos: 5, Base: true, Data: []byte("{")}
	if _, _, err := Resume([]Stored{badBase}, 0); !errors.Is(err, ErrNoBase) || !errors.Is(err, ErrHistoryEncoding) {
		t.Errorf("a malformed base: %v, want ErrNoBase and ErrHistoryEncoding", err)
	}
}

func TestNewSetFrom(t *testing.T) {
	evs := historyJournal()
	h := foldHistory(evs)
	s := NewSetFrom(h)
	if s.Cache != h.Cache || s.Approvals != h.Approvals {
		t.Error("the set does not share the history's cache and approvals")
	}
	if s.Status.Session() != "" || len(s.Catalog.View().Tools) != 0 {
		t.Error("a new set's status or catalog is not empty")
	}
}

// TestHistoryForgetsArchivedSessions: journal.archived drops the summaries
// of the sessions it moved out, and only those; approvals and the tool
// cache stay.
func TestHistoryForgetsArchivedSessions(t *testing.T) {
	j := newJournal()
	evs := historyJournal()
	h := foldHistory(evs)
	before := h.Sessions()
	approvals, cache := h.Approvals.List(), h.Cache.Entries()
	j.gpos = uint64(len(evs))
	a := j.session(9)
	a.start()
	e := a.in("", &events.JournalArchived{File: "a.db", Through: 10, Sessions: []events.ArchivedSession{
		{Session: before[0].Session}, {Session: before[2].Session}, {Session: "not-a-session"},
		{Session: "0b0b0b0b-0b0b-0b0b-0b0b-0b0b0b0b0b0b"}}})
	for _, x := range j.evs {
		h.Apply(x)
	}
	got := h.Sessions()
	if len(got) != 2 || got[0].Session != before[1].Session || got[1].Session != e.Session.String() {
		t.Errorf("after archiving sessions 1 and 3: %+v", got)
	}
	if _, ok := h.Session(before[0].Session2()); ok {
		t.Error("Session finds an archived session")
	}
	if !reflect.DeepEqual(h.Approvals.List(), approvals) || !reflect.DeepEqual(h.Cache.Entries(), cache) {
		t.Error("archiving changed approvals or the tool cache")
	}
	d, err := DecodeHistory(h.Encode())
	if err != nil || !reflect.DeepEqual(d.Sessions(), got) {
		t.Errorf("decoded: %v, %+v", err, d.Sessions())
	}
}

// TestBaseOfVersion1: a base state written before version 2 (no session
// commands) is still read, as the base of an archived journal must be;
// an ordinary checkpoint of version 1 is refused (the fold rebuilds it);
// BaseIs compares a fold with a base in the base's own version.
func TestBaseOfVersion1(t *testing.T) {
	h := foldHistory(historyJournal())
	v1 := h.encode(1)
	if bytes.Contains(v1, []byte(`"command":"run"`)) || !bytes.Contains(h.Encode(), []byte(`"command":"run"`)) {
		t.Fatalf("version 1 encoding has commands, or version 2 has none:\n%s", v1)
	}
	if _, err := DecodeHistory(v1); !errors.Is(err, ErrHistoryVersion) {
		t.Errorf("DecodeHistory(version 1) = %v, want ErrHistoryVersion", err)
	}
	b, err := DecodeBase(v1)
	if err != nil {
		t.Fatal(err)
	}
	if ss := b.Sessions(); len(ss) != 3 || ss[0].Command != "" || !ss[0].Stopped {
		t.Errorf("sessions of a version 1 base: %+v", ss)
	}
	if !BaseIs(v1, h) || !BaseIs(h.Encode(), h) {
		t.Error("BaseIs does not recognise the fold in the base's version")
	}
	if BaseIs(v1, foldHistory(historyJournal()[:5])) {
		t.Error("BaseIs matched another fold")
	}
	cps := []Stored{{GPos: h.GPos, Data: v1, Base: true}}
	if r, _, err := Resume(cps, 0); err != nil || r.GPos != h.GPos {
		t.Errorf("Resume from a version 1 base: %v", err)
	}
	cps[0].Base = false
	if r, skipped, err := Resume(cps, 0); err != nil || r.GPos != 0 || len(skipped) != 1 {
		t.Errorf("Resume from a version 1 checkpoint: gpos %d, skipped %v, %v; want it passed over", r.GPos, skipped, err)
	}
	if _, err := DecodeBase([]byte(fmt.Sprintf(`{"version":%d}`, HistoryVersion+1))); !errors.Is(err, ErrHistoryVersion) {
		t.Errorf("DecodeBase(version %d) = %v", HistoryVersion+1, err)
	}
	if _, err := DecodeBase([]byte(`{"version":0}`)); !errors.Is(err, ErrHistoryVersion) {
		t.Errorf("DecodeBase(version 0) = %v", err)
	}
}

// TestHistoryCrashes: History keeps each server's crash times (transitions
// by fail), never its launches or expected stops, and forgets them at an
// explicit reconnect: one that names the server (offline or not), or the
// reconnect transition a reconnect of every failed server causes.
func TestHistoryCrashes(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(stdio("web"), stdio("git"), stdio("db"))
	s.connect("web", events.StateConfiguring, 1, 10, nil)
	s.tr("web", events.StateReady, events.StateStopped, events.ReasonShutdown, 1, nil) // expected: no crash
	w1 := s.crash("web", events.StateLaunching, 2)
	w2 := s.crash("web", events.StateLaunching, 3)
	g1 := s.crash("git", events.StateLaunching, 1)
	d1 := s.crash("db", events.StateLaunching, 1)
	h := foldHistory(j.evs)
	if got := h.Crashes("web"); !slices.Equal(got, []int64{w1.Time, w2.Time}) || len(h.Launches("web")) != 1 {
		t.Fatalf("Crashes(web) = %v (launches %v), want %d %d", got, h.Launches("web"), w1.Time, w2.Time)
	}
	// A reconnect of every failed server names none: only the transitions
	// it causes forget crashes. A failed-only reconnect of a server does not.
	s.in("", &events.ReconnectRequested{FailedOnly: true})
	s.in("git", &events.ReconnectRequested{FailedOnly: true})
	s.out("db", &events.ServerTransitioned{From: events.StateFailed, To: events.StateLaunching, Trigger: "reconnect", Attempt: 2})
	h = foldHistory(j.evs)
	if len(h.Crashes("web")) != 2 || !slices.Equal(h.Crashes("git"), []int64{g1.Time}) || h.Crashes("db") != nil {
		t.Errorf("after a reconnect of every failed server (db): web %v git %v db %v (crashed at %d)", h.Crashes("web"), h.Crashes("git"), h.Crashes("db"), d1.Time)
	}
	// An offline reconnect: a session of its own naming the server.
	o := j.session(2)
	o.start()
	o.in("web", &events.ReconnectRequested{By: "cli"})
	h = foldHistory(j.evs)
	if h.Crashes("web") != nil || len(h.Crashes("git")) != 1 {
		t.Errorf("after reconnect web: web %v git %v", h.Crashes("web"), h.Crashes("git"))
	}
	d, err := DecodeHistory(h.Encode())
	if err != nil || !reflect.DeepEqual(d.Crashes("git"), h.Crashes("git")) || d.Crashes("web") != nil {
		t.Errorf("decoded: %v, git %v web %v", err, d.Crashes("git"), d.Crashes("web"))
	}
}

func TestHistoryKeepsLatestCrashes(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	var times []int64
	for i := range MaxLaunches + 3 {
		times = append(times, s.crash("web", events.StateLaunching, i+1).Time)
	}
	if got := foldHistory(j.evs).Crashes("web"); !slices.Equal(got, times[3:]) {
		t.Errorf("kept %d crashes %v, want the newest %d", len(got), got, MaxLaunches)
	}
}

// TestBaseOfVersion2: a version 2 base state (no crashes) is read as a
// base with no crashes and everything else as it was; BaseIs compares a
// fold with it in version 2; an ordinary version 2 checkpoint is refused.
func TestBaseOfVersion2(t *testing.T) {
	h := foldHistory(historyJournal())
	if len(h.Crashes("web")) != 2 || len(h.Crashes("git")) != 1 {
		t.Fatalf("crashes web %v git %v, want 2 and 1", h.Crashes("web"), h.Crashes("git"))
	}
	v2 := h.encode(2)
	if bytes.Contains(v2, []byte(`"crashes"`)) || !bytes.Contains(h.Encode(), []byte(`"crashes"`)) || !bytes.Contains(v2, []byte(`"command":"run"`)) {
		t.Fatalf("version 2 encoding has crashes or no commands, or version 3 has no crashes:\n%s", v2)
	}
	if _, err := DecodeHistory(v2); !errors.Is(err, ErrHistoryVersion) {
		t.Errorf("DecodeHistory(version 2) = %v, want ErrHistoryVersion", err)
	}
	b, err := DecodeBase(v2)
	if err != nil {
		t.Fatal(err)
	}
	if b.Crashes("web") != nil || !reflect.DeepEqual(b.Sessions(), h.Sessions()) || !reflect.DeepEqual(b.Launches("web"), h.Launches("web")) {
		t.Errorf("version 2 base: crashes %v, sessions %+v, launches %v", b.Crashes("web"), b.Sessions(), b.Launches("web"))
	}
	if !BaseIs(v2, h) || BaseIs(v2, foldHistory(historyJournal()[:5])) {
		t.Error("BaseIs does not compare a fold with a version 2 base in version 2")
	}
}

// TestBaseOfVersion3: a version 3 base state (no protocol versions in the
// tool cache) is read with the cache's lists and no versions; BaseIs
// compares a fold with it in version 3; a version 3 checkpoint is refused.
func TestBaseOfVersion3(t *testing.T) {
	h := foldHistory(historyJournal())
	fpWeb2 := fp(stdio("web", "--port", "9"))
	if v := h.Cache.ProtocolVersion("web", fpWeb2); v != "2026-07-28" {
		t.Fatalf("the fold's cache has version %q for web, want 2026-07-28", v)
	}
	v3 := h.encode(3)
	if bytes.Contains(v3, []byte(`"protocol_version"`)) || !bytes.Contains(h.Encode(), []byte(`"protocol_version":"2026-07-28"`)) || !bytes.Contains(v3, []byte(`"crashes"`)) {
		t.Fatalf("version 3 encoding has protocol versions or no crashes, or version 4 has none:\n%s", v3)
	}
	if _, err := DecodeHistory(v3); !errors.Is(err, ErrHistoryVersion) {
		t.Errorf("DecodeHistory(version 3) = %v, want ErrHistoryVersion", err)
	}
	b, err := DecodeBase(v3)
	if err != nil {
		t.Fatal(err)
	}
	if v := b.Cache.ProtocolVersion("web", fpWeb2); v != "" {
		t.Errorf("a version 3 base has protocol version %q", v)
	}
	if got, _ := b.Cache.Get("web", fpWeb2); !slices.Equal(toolNames(got), []string{"search", "crawl"}) {
		t.Errorf("a version 3 base lost the cached tools: %v", toolNames(got))
	}
	d, err := DecodeHistory(h.Encode())
	if err != nil || d.Cache.ProtocolVersion("web", fpWeb2) != "2026-07-28" {
		t.Errorf("version 4 round trip: %v, version %q", err, d.Cache.ProtocolVersion("web", fpWeb2))
	}
	if !BaseIs(v3, h) || BaseIs(v3, foldHistory(historyJournal()[:5])) {
		t.Error("BaseIs does not compare a fold with a version 3 base in version 3")
	}
}
