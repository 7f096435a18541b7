package projections

import (
	"fmt"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// benchServers returns n server configs and a list of m tools for each.
func benchServers(n, m int) ([]events.ServerConfig, [][]events.Tool) {
	cfgs := make([]events.ServerConfig, n)
	lists := make([][]events.Tool, n)
	for i := range cfgs {
		cfgs[i] = stdio(fmt.Sprintf("server-%03d", i), "--port", fmt.Sprint(9000+i))
		names := make([]string, m)
		for k := range names {
			names[k] = fmt.Sprintf("tool_%02d", k)
		}
		lists[i] = toolList(names...)
	}
	return cfgs, lists
}

// BenchmarkCatalog measures building the catalog of a new session from a
// cache filled by an earlier one: 100 servers × 20 tools, all deferred.
func BenchmarkCatalog(b *testing.B) {
	cfgs, lists := benchServers(100, 20)
	j := newJournal()
	s1 := j.session(1)
	s1.start()
	s1.config(cfgs...)
	for i, c := range cfgs {
		s1.in(c.Name, &events.ToolsListed{Tools: lists[i]})
	}
	cache := NewToolCache()
	for _, e := range j.evs {
		cache.Apply(e)
	}
	s2 := j.session(2)
	start, cfg := s2.start(), s2.config(cfgs...)

	b.ReportAllocs()
	for b.Loop() {
		c := NewCatalog(cache)
		c.Apply(start)
		c.Apply(cfg)
		if n := c.Len(); n != 2000 {
			b.Fatalf("len = %d, want 2000", n)
		}
	}
}

// BenchmarkCatalogRebuild measures the rebuild after one server of 100
// relists its 20 tools.
func BenchmarkCatalogRebuild(b *testing.B) {
	cfgs, lists := benchServers(100, 20)
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(cfgs...)
	for i, c := range cfgs {
		s.connect(c.Name, events.StateConfiguring, 1, 100+i, lists[i])
	}
	c := NewCatalog(nil)
	for _, e := range j.evs {
		c.Apply(e)
	}
	relist := s.in(cfgs[0].Name, &events.ToolsListed{Trigger: "list_changed", Tools: lists[0]})

	b.ReportAllocs()
	for b.Loop() {
		c.Apply(relist)
		if n := c.Len(); n != 2000 {
			b.Fatalf("len = %d, want 2000", n)
		}
	}
}
