package projections

import "github.com/mcpledger/mcpledger/events"

// Set bundles the projections the runtime and replay keep, and applies each
// event to all of them in a fixed order: the tool cache first, so the
// catalog sees a cache that includes the event.
//
// A Set is owned by one goroutine, like its members.
type Set struct {
	// Status is the current session's status view.
	Status *Status
	// Cache is the cross-session tool cache the Catalog reads.
	Cache *ToolCache
	// Catalog is the current session's tool catalog.
	Catalog *Catalog
	// Approvals holds approval decisions across sessions.
	Approvals *Approvals
	// Config is what the current session's config reading left out.
	Config *ConfigReport
}

// NewSet returns a set of empty projections.
func NewSet() *Set {
	cache := NewToolCache()
	return &Set{Status: NewStatus(), Cache: cache, Catalog: NewCatalog(cache), Approvals: NewApprovals(), Config: NewConfigReport()}
}

// Apply folds e into every projection of the set. Events must be applied in
// journal order.
func (s *Set) Apply(e events.Event) {
	s.Cache.Apply(e)
	s.Catalog.Apply(e)
	s.Status.Apply(e)
	s.Approvals.Apply(e)
	s.Config.Apply(e)
}

// NewSetFrom returns projections that continue h: they share h's tool
// cache and approvals (so h must not be applied to any more), with the
// per-session Status, Catalog and Config empty, as they are before a new session
// starts.
func NewSetFrom(h *History) *Set {
	return &Set{Status: NewStatus(), Cache: h.Cache, Catalog: NewCatalog(h.Cache), Approvals: h.Approvals, Config: NewConfigReport()}
}
