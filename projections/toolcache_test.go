package projections

import (
	"slices"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

func toolNames(ts []events.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func fp(c events.ServerConfig) string { return events.Fingerprint(&c) }

func TestToolCache(t *testing.T) {
	gh, fs := stdio("github"), stdio("fs", "/tmp")
	ghV2 := stdio("github", "--read-only") // another fingerprint

	j := newJournal()
	s1 := j.session(1)
	s1.start()
	s1.config(gh, fs)
	s1.in("github", &events.ToolsListed{Tools: toolList("a", "b")})
	s1.in("fs", &events.ToolsListed{Tools: toolList("read")})
	s1.in("fs", &events.ToolsListed{Tools: nil}) // lists nothing now
	s1.in("stray", &events.ToolsListed{Tools: toolList("x")})
	s1.out("", &events.SessionStopped{Reason: events.ReasonShutdown})

	s2 := j.session(2)
	s2.start()
	// No config in session 2 yet: a list cannot be attributed.
	s2.in("github", &events.ToolsListed{Tools: toolList("lost")})
	s2.config(ghV2)
	last := s2.in("github", &events.ToolsListed{Tools: toolList("c")})
	// A session-1 straggler uses session 1's config, which session.stopped
	// forgot: ignored.
	s1.in("github", &events.ToolsListed{Tools: toolList("late")})

	tc := NewToolCache()
	for _, e := range j.evs {
		tc.Apply(e)
	}

	tests := []struct {
		name   string
		server string
		fp     string
		want   []string // nil: miss
	}{
		{"hit", "github", fp(gh), []string{"a", "b"}},
		{"other fingerprint", "github", fp(ghV2), []string{"c"}},
		{"empty list is a miss", "fs", fp(fs), nil},
		{"unknown fingerprint", "github", "sha256:nope", nil},
		{"server not in config", "stray", fp(stdio("stray")), nil},
		{"other server's fingerprint", "fs", fp(gh), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tc.Get(tt.server, tt.fp)
			if ok != (tt.want != nil) || !slices.Equal(toolNames(got), tt.want) {
				t.Errorf("Get(%s) = %v, %v; want %v", tt.server, toolNames(got), ok, tt.want)
			}
		})
	}

	entries := tc.Entries()
	if len(entries) != 3 || tc.Len() != 3 {
		t.Fatalf("entries = %+v, want 3 (github×2, fs empty)", entries)
	}
	for i := 1; i < len(entries); i++ {
		a, b := entries[i-1], entries[i]
		if a.Server > b.Server || a.Server == b.Server && a.Fingerprint >= b.Fingerprint {
			t.Errorf("entries not sorted: %s/%s before %s/%s", a.Server, a.Fingerprint, b.Server, b.Fingerprint)
		}
	}
	for _, e := range entries {
		if e.Server == "github" && e.Fingerprint == fp(ghV2) {
			if e.Session != "02020202-0202-0202-0202-020202020202" || e.Seq != last.Seq || e.Time != last.Time {
				t.Errorf("entry provenance = %s #%d @%d, want session 2 #%d @%d", e.Session, e.Seq, e.Time, last.Seq, last.Time)
			}
		}
	}
}

// A later list under the same fingerprint, in any session, replaces the
// cached one.
func TestToolCacheReplaces(t *testing.T) {
	gh := stdio("github")
	j := newJournal()
	s1 := j.session(1)
	s1.start()
	s1.config(gh)
	s1.in("github", &events.ToolsListed{Tools: toolList("a", "b")})
	s2 := j.session(2)
	s2.start()
	s2.config(gh)
	s2.in("github", &events.ToolsListed{Tools: toolList("b", "c")})
	tc := NewToolCache()
	for _, e := range j.evs {
		tc.Apply(e)
	}
	got, _ := tc.Get("github", fp(gh))
	if !slices.Equal(toolNames(got), []string{"b", "c"}) {
		t.Errorf("got %v, want the later list", toolNames(got))
	}
}

func TestToolCacheCopies(t *testing.T) {
	gh := stdio("github")
	ro := true
	listed := toolList("a")
	listed[0].Annotations.ReadOnly = &ro

	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(gh)
	s.in("github", &events.ToolsListed{Tools: listed})
	tc := NewToolCache()
	for _, e := range j.evs {
		tc.Apply(e)
	}
	// Changing the event's payload after Apply does not reach the cache.
	listed[0].Name = "changed"
	ro = false

	got, _ := tc.Get("github", fp(gh))
	got[0].Description = "mutated"
	*got[0].Annotations.ReadOnly = false
	again, _ := tc.Get("github", fp(gh))
	if again[0].Name != "a" || again[0].Description != "does a" || again[0].Annotations.ReadOnly == nil || !*again[0].Annotations.ReadOnly {
		t.Errorf("cache shares memory with its input or its callers: %+v", again[0])
	}
	ents := tc.Entries()
	*ents[0].Tools[0].Annotations.ReadOnly = false
	if again, _ := tc.Get("github", fp(gh)); !*again[0].Annotations.ReadOnly {
		t.Error("Entries shares memory with the cache")
	}
}

// TestToolCacheProtocolVersion: the cache keeps the protocol version of the
// listing it holds, even an empty one, per (server, fingerprint); a later
// listing that does not say replaces it.
func TestToolCacheProtocolVersion(t *testing.T) {
	gh, fs, db := stdio("github"), stdio("fs"), stdio("db")
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(gh, fs, db)
	s.in("github", &events.ToolsListed{Tools: toolList("a"), ProtocolVersion: "2026-07-28"})
	s.in("fs", &events.ToolsListed{ProtocolVersion: "2025-11-25"}) // lists nothing
	s.in("db", &events.ToolsListed{Tools: toolList("q"), ProtocolVersion: "2025-11-25"})
	s.in("db", &events.ToolsListed{Tools: toolList("q")})
	tc := NewToolCache()
	for _, e := range j.evs {
		tc.Apply(e)
	}
	for _, c := range []struct{ server, fp, want string }{
		{"github", fp(gh), "2026-07-28"},
		{"fs", fp(fs), "2025-11-25"},
		{"db", fp(db), ""},
		{"github", "sha256:nope", ""},
		{"nobody", fp(gh), ""},
	} {
		if got := tc.ProtocolVersion(c.server, c.fp); got != c.want {
			t.Errorf("ProtocolVersion(%s, %s) = %q, want %q", c.server, c.fp[:12], got, c.want)
		}
	}
	if ents := tc.Entries(); len(ents) != 3 || ents[1].Server != "fs" || ents[1].ProtocolVersion != "2025-11-25" {
		t.Errorf("Entries: %+v", ents)
	}
}
