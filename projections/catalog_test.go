package projections

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

func renderCatalog(v CatalogView) string {
	rows := make([][]string, len(v.Tools))
	for i, e := range v.Tools {
		flags := ""
		if e.Deferred {
			flags += "deferred "
		}
		if e.Stale {
			flags += "stale "
		}
		rows[i] = []string{e.Name, e.Server, e.Tool, dash(strings.TrimSpace(flags)), events.ShortHash(e.DefHash)}
	}
	out := table("NAME\tSERVER\tTOOL\tFLAGS\tDEF", rows)
	if len(v.Unavailable) > 0 {
		urows := make([][]string, len(v.Unavailable))
		for i, u := range v.Unavailable {
			urows[i] = []string{u.Server, string(u.State), dash(string(u.Reason)), dash(u.Error)}
		}
		out += table("UNAVAILABLE\tSTATE\tREASON\tERROR", urows)
	}
	return out
}

func entryNames(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}

// twoSessions is a journal of two sessions. In the first, github, fs and
// web are configured; github and fs connect. The second starts with the
// same github config, a changed fs config (another fingerprint) and web
// still waiting for approval; it returns the second stream.
func twoSessions() (*journal, *stream) {
	j := newJournal()
	s1 := j.session(1)
	s1.start()
	web := stdio("web")
	web.Gated, web.Scope = true, events.ScopeProject
	s1.config(stdio("github"), stdio("fs", "/data"), web)
	s1.tr("web", events.StateConfiguring, events.StateStopped, events.ReasonPendingApproval, 0, nil)
	s1.connect("github", events.StateConfiguring, 1, 10, toolList("create_issue", "get_issue", "search"))
	s1.connect("fs", events.StateConfiguring, 1, 11, toolList("read", "write"))
	s1.in("", &events.StopRequested{Reason: events.ReasonShutdown})
	s1.tr("fs", events.StateReady, events.StateStopped, events.ReasonShutdown, 1, nil)
	s1.tr("github", events.StateReady, events.StateStopped, events.ReasonShutdown, 1, nil)
	s1.out("", &events.SessionStopped{Reason: events.ReasonShutdown})

	s2 := j.session(2)
	s2.start()
	s2.config(stdio("github"), stdio("fs", "/data", "--ro"), web)
	return j, s2
}

func TestCatalogGolden(t *testing.T) {
	j, s2 := twoSessions()
	s2.tr("web", events.StateConfiguring, events.StateStopped, events.ReasonPendingApproval, 0, nil)
	s2.tr("github", events.StateConfiguring, events.StateLaunching, "", 1, nil)
	s2.connect("fs", events.StateConfiguring, 1, 21, toolList("read", "write", "stat"))
	// github lists a changed set of tools this time.
	s2.in("github", &events.ProcessSpawned{Attempt: 1, PID: 20})
	s2.tr("github", events.StateLaunching, events.StateHandshaking, "", 1, nil)
	s2.in("github", &events.ToolsListed{Attempt: 1, Tools: toolList("create_issue", "search", "list_prs")})
	s2.tr("github", events.StateHandshaking, events.StateReady, "", 1, nil)
	s2.in("github", &events.TransportClosed{Attempt: 1, Error: events.ClassifiedError{Class: events.ErrTransportClosed, Message: "EOF"}})
	s2.tr("github", events.StateReady, events.StateReconnecting, "", 1, &events.ClassifiedError{Class: events.ErrTransportClosed, Message: "EOF"})
	s2.in("github", &events.TimerFired{TimerID: 1, Purpose: events.TimerBackoff, Attempt: 2})
	s2.tr("github", events.StateReconnecting, events.StateLaunching, "", 2, nil)
	s2.in("github", &events.ConnectFailed{Attempt: 2, Phase: "spawn", Error: events.ClassifiedError{Class: events.ErrSpawn, Message: "no such file"}})
	s2.tr("github", events.StateLaunching, events.StateReconnecting, "", 2, &events.ClassifiedError{Class: events.ErrSpawn, Message: "no such file"})
	s2.tr("github", events.StateReconnecting, events.StateFailed, events.ReasonExhausted, 2, nil)

	c := NewCatalog(nil)
	var b strings.Builder
	prev := ""
	for _, e := range j.evs {
		c.Apply(e)
		b.WriteString("== " + describe(e) + "\n")
		if got := renderCatalog(c.View()); got != prev {
			b.WriteString(got)
			prev = got
		}
	}
	golden(t, "catalog_sessions", b.String())
}

func TestCatalogDeferred(t *testing.T) {
	// fresh returns the journal of twoSessions with github and fs launching
	// in the second session; subtests that append take their own.
	fresh := func() (*journal, *stream) {
		j, s2 := twoSessions()
		s2.tr("github", events.StateConfiguring, events.StateLaunching, "", 1, nil)
		s2.tr("fs", events.StateConfiguring, events.StateLaunching, "", 1, nil)
		return j, s2
	}
	j, _ := fresh()

	check := func(t *testing.T, c *Catalog) {
		t.Helper()
		got := c.Entries()
		want := []string{"mcp__github__create_issue", "mcp__github__get_issue", "mcp__github__search"}
		if !slices.Equal(entryNames(got), want) {
			t.Fatalf("entries = %v, want github's cached tools only (fs changed fingerprint)", entryNames(got))
		}
		for _, e := range got {
			if !e.Deferred || e.Stale || e.Server != "github" || e.Description != "does "+e.Tool {
				t.Errorf("entry %+v, want deferred from the cache", e)
			}
		}
		if c.Session() != "02020202-0202-0202-0202-020202020202" {
			t.Errorf("session = %s", c.Session())
		}
	}

	t.Run("own cache", func(t *testing.T) {
		c := NewCatalog(nil)
		for _, e := range j.evs {
			c.Apply(e)
		}
		check(t, c)
	})
	t.Run("shared cache", func(t *testing.T) {
		cache := NewToolCache()
		c := NewCatalog(cache)
		for _, e := range j.evs {
			cache.Apply(e)
			c.Apply(e)
		}
		check(t, c)
	})
	t.Run("set", func(t *testing.T) {
		set := NewSet()
		for _, e := range j.evs {
			set.Apply(e)
		}
		check(t, set.Catalog)
		if got, _ := set.Status.Server("github"); got.State != events.StateLaunching || got.Tools != 0 {
			t.Errorf("status counts only live tools: %+v", got)
		}
	})
	t.Run("cache filled later", func(t *testing.T) {
		// A cache that learns earlier sessions after the catalog was last
		// read invalidates the catalog's memoized view.
		cache := NewToolCache()
		c := NewCatalog(cache)
		second := slices.IndexFunc(j.evs, func(e events.Event) bool { return e.Session[0] == 2 })
		for _, e := range j.evs[second:] {
			c.Apply(e)
		}
		if n := c.Len(); n != 0 {
			t.Fatalf("len = %d before the cache knows anything", n)
		}
		for _, e := range j.evs[:second] {
			cache.Apply(e)
		}
		check(t, c)
	})
	t.Run("ready without a list", func(t *testing.T) {
		j, s2 := fresh()
		// A server that became ready without listing tools (no tools
		// capability) offers none: deferred tools are for servers still
		// connecting.
		c := NewCatalog(nil)
		for _, e := range j.evs {
			c.Apply(e)
		}
		c.Apply(s2.tr("github", events.StateLaunching, events.StateHandshaking, "", 1, nil))
		if c.Len() != 3 {
			t.Fatalf("len = %d while handshaking, want 3 deferred", c.Len())
		}
		c.Apply(s2.tr("github", events.StateHandshaking, events.StateReady, "", 1, nil))
		if got := c.Entries(); len(got) != 0 {
			t.Errorf("entries = %v, want none", entryNames(got))
		}
	})
	t.Run("live list replaces deferred", func(t *testing.T) {
		j, s2 := fresh()
		c := NewCatalog(nil)
		for _, e := range j.evs {
			c.Apply(e)
		}
		c.Apply(s2.in("github", &events.ToolsListed{Attempt: 1, Tools: toolList("only")}))
		c.Apply(s2.tr("github", events.StateHandshaking, events.StateReady, "", 1, nil))
		got := c.Entries()
		if len(got) != 1 || got[0].Name != "mcp__github__only" || got[0].Deferred || got[0].Stale {
			t.Errorf("entries = %+v, want the live list only", got)
		}
	})
}

func TestCatalogStaleWhileReconnecting(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(stdio("a"))
	s.connect("a", events.StateConfiguring, 1, 10, toolList("x", "y"))
	c := NewCatalog(nil)
	for _, e := range j.evs {
		c.Apply(e)
	}
	flags := func() string {
		var out []string
		for _, e := range c.Entries() {
			out = append(out, fmt.Sprintf("%s:deferred=%v,stale=%v", e.Tool, e.Deferred, e.Stale))
		}
		return strings.Join(out, " ")
	}
	steps := []struct {
		e    events.Event
		want string
	}{
		{s.tr("a", events.StateReady, events.StateReconnecting, "", 1, errExit(1)), "x:deferred=false,stale=true y:deferred=false,stale=true"},
		{s.tr("a", events.StateReconnecting, events.StateLaunching, "", 2, nil), "x:deferred=false,stale=true y:deferred=false,stale=true"},
		{s.tr("a", events.StateLaunching, events.StateHandshaking, "", 2, nil), "x:deferred=false,stale=true y:deferred=false,stale=true"},
		{s.in("a", &events.ToolsListed{Attempt: 2, Tools: toolList("y", "z")}), "y:deferred=false,stale=false z:deferred=false,stale=false"},
		{s.tr("a", events.StateHandshaking, events.StateReady, "", 2, nil), "y:deferred=false,stale=false z:deferred=false,stale=false"},
		{s.tr("a", events.StateReady, events.StateReconnecting, "", 2, errExit(1)), "y:deferred=false,stale=true z:deferred=false,stale=true"},
		{s.tr("a", events.StateReconnecting, events.StateFailed, events.ReasonExhausted, 2, nil), ""},
	}
	for i, st := range steps {
		c.Apply(st.e)
		if got := flags(); got != st.want {
			t.Errorf("step %d (%s): %q, want %q", i, describe(st.e), got, st.want)
		}
	}
	un := c.Unavailable()
	if len(un) != 1 || un[0] != (UnavailableServer{Server: "a", State: events.StateFailed, Reason: events.ReasonExhausted, Error: "exit: exit status 1"}) {
		t.Errorf("unavailable = %+v", un)
	}
}

// A server whose first attempt fails before any live list keeps offering
// its cached tools while it retries.
func TestCatalogDeferredWhileRetrying(t *testing.T) {
	j, s2 := twoSessions()
	s2.tr("github", events.StateConfiguring, events.StateLaunching, "", 1, nil)
	s2.tr("github", events.StateLaunching, events.StateReconnecting, "", 1, &events.ClassifiedError{Class: events.ErrSpawn})
	c := NewCatalog(nil)
	for _, e := range j.evs {
		c.Apply(e)
	}
	got := c.Entries()
	if len(got) != 3 || !got[0].Deferred {
		t.Errorf("entries = %+v, want github's 3 deferred tools", got)
	}
}

func TestCatalogFilters(t *testing.T) {
	tools := toolList("get_user", "get_secret", "list", "delete_all", "get.x")
	tests := []struct {
		name             string
		include, exclude []string
		want             []string // tool names, in catalog order
	}{
		{"none", nil, nil, []string{"delete_all", "get_secret", "get_user", "get.x", "list"}}, // sorted by catalog name: get.x is get_x
		{"include glob", []string{"get_*", "list"}, nil, []string{"get_secret", "get_user", "list"}},
		{"exclude", nil, []string{"get_secret", "delete_*"}, []string{"get_user", "get.x", "list"}},
		{"include and exclude", []string{"get*"}, []string{"get_secret"}, []string{"get_user", "get.x"}},
		{"literal name with dot", []string{"get.x"}, nil, []string{"get.x"}},
		{"include matches nothing", []string{"nope"}, nil, nil},
		{"broken exclude pattern excludes", nil, []string{"[", "delete_all"}, nil},
		{"broken include pattern excludes", []string{"get_*", "[a-"}, nil, nil},
		{"question mark", []string{"lis?"}, nil, []string{"list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := stdio("s")
			cfg.IncludeTools, cfg.ExcludeTools = tt.include, tt.exclude
			// Live tools, and the same tools deferred from a cache.
			j := newJournal()
			s1 := j.session(1)
			s1.start()
			s1.config(cfg)
			s1.connect("s", events.StateConfiguring, 1, 10, tools)
			live := NewCatalog(nil)
			for _, e := range j.evs {
				live.Apply(e)
			}
			s2 := j.session(2)
			deferred := NewCatalog(live.cache)
			deferred.Apply(s2.start())
			deferred.Apply(s2.config(cfg))
			for name, c := range map[string]*Catalog{"live": live, "deferred": deferred} {
				var got []string
				for _, e := range c.Entries() {
					got = append(got, e.Tool)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("%s: tools = %v, want %v", name, got, tt.want)
				}
			}
		})
	}
}

func TestCatalogNamingIndependentOfOrder(t *testing.T) {
	// Servers whose names sanitize alike, with a shared tool name, plus a
	// server with an overlong tool name.
	servers := []string{"a.b", "a_b", "a b", "c"}
	listFor := func(server string) []events.Tool {
		ts := toolList("x", "only_"+strings.Map(func(r rune) rune {
			if r == '.' {
				return 'D'
			} else if r == ' ' {
				return 'S'
			}
			return r
		}, server))
		if server == "c" {
			ts = append(ts, toolList(strings.Repeat("long", 20))...)
		}
		return ts
	}
	build := func(order []string) []Entry {
		j := newJournal()
		s := j.session(1)
		s.start()
		cfgs := make([]events.ServerConfig, len(order))
		for i, n := range order {
			cfgs[i] = stdio(n)
		}
		s.config(cfgs...)
		for i, n := range order {
			s.connect(n, events.StateConfiguring, 1, 10+i, listFor(n))
		}
		c := NewCatalog(nil)
		for _, e := range j.evs {
			c.Apply(e)
		}
		return c.Entries()
	}
	want := build(servers)
	if len(want) != 9 {
		t.Fatalf("got %d entries, want 9", len(want))
	}
	seen := map[string]bool{}
	suffixed := 0
	for _, e := range want {
		if seen[e.Name] || len(e.Name) > MaxToolNameLen || !validName.MatchString(e.Name) {
			t.Errorf("bad or duplicate name %q", e.Name)
		}
		seen[e.Name] = true
		if strings.HasSuffix(e.Name, "_"+hash8(e.Server, e.Tool)) {
			suffixed++
		}
		if e.Tool == "x" && e.Server != "c" && e.Name == ToolName(e.Server, e.Tool) {
			t.Errorf("colliding tool %s/%s kept its plain name", e.Server, e.Tool)
		}
	}
	if suffixed != 4 { // three x's that collide and the overlong one
		t.Errorf("%d names suffixed, want 4", suffixed)
	}
	for seed := uint64(1); seed <= 12; seed++ {
		order := slices.Clone(servers)
		shuffle(order, seed)
		got := build(order)
		if !slices.EqualFunc(got, want, func(a, b Entry) bool {
			return a.Name == b.Name && a.Server == b.Server && a.Tool == b.Tool
		}) {
			t.Fatalf("order %v: %v, want %v", order, entryNames(got), entryNames(want))
		}
	}
}

func TestCatalogLookupAndCopies(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(stdio("gh"))
	ro := true
	tools := toolList("get", "get")
	tools[0].Annotations.ReadOnly = &ro
	tools[1].Description = "a second definition under the same name"
	s.connect("gh", events.StateConfiguring, 1, 10, tools)
	c := NewCatalog(nil)
	for _, e := range j.evs {
		c.Apply(e)
	}
	e, ok := c.Lookup("mcp__gh__get")
	if !ok || e.Server != "gh" || e.Tool != "get" || e.Description != "does get" || e.DefHash != tools[0].DefHash {
		t.Fatalf("Lookup = %+v, %v; want the first definition", e, ok)
	}
	if c.Len() != 1 {
		t.Errorf("len = %d, want 1: a duplicated name counts once", c.Len())
	}
	if _, ok := c.Lookup("mcp__gh__nope"); ok {
		t.Error("found a tool that is not there")
	}
	*e.Annotations.ReadOnly = false
	all := c.Entries()
	all[0].Name = "changed"
	*all[0].Annotations.ReadOnly = false
	if again, _ := c.Lookup("mcp__gh__get"); again.Annotations.ReadOnly == nil || !*again.Annotations.ReadOnly {
		t.Error("caller's change reached the catalog")
	}
	v := c.View()
	v.Unavailable = append(v.Unavailable, UnavailableServer{Server: "x"})
	if len(c.Unavailable()) != 0 {
		t.Error("caller's append reached the catalog")
	}
}

func TestCatalogUnavailable(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(stdio("b"), stdio("a"), stdio("c"), stdio("d"))
	s.tr("b", events.StateConfiguring, events.StateStopped, events.ReasonNotAllowed, 0, nil)
	s.tr("a", events.StateConfiguring, events.StateStopped, events.ReasonUntrusted, 0, nil)
	s.connect("c", events.StateConfiguring, 1, 10, toolList("t"))
	s.tr("c", events.StateReady, events.StateReconnecting, "", 1, errExit(3))
	s.tr("c", events.StateReconnecting, events.StateFailed, events.ReasonExhausted, 1, nil)
	c := NewCatalog(nil)
	for _, e := range j.evs {
		c.Apply(e)
	}
	want := []UnavailableServer{
		{Server: "a", State: events.StateStopped, Reason: events.ReasonUntrusted},
		{Server: "b", State: events.StateStopped, Reason: events.ReasonNotAllowed},
		{Server: "c", State: events.StateFailed, Reason: events.ReasonExhausted, Error: "exit: exit status 3"},
	}
	if got := c.Unavailable(); !slices.Equal(got, want) {
		t.Errorf("unavailable = %+v\nwant %+v", got, want)
	}
	if c.Len() != 0 {
		t.Errorf("entries = %v, want none (d is configuring with an empty cache)", entryNames(c.Entries()))
	}
}
