package projections

import (
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
)

// Catalog is the set of tools the agent can see in one session, named for
// the agent (see [ToolNames]) and sorted by name so that the rendered list,
// and with it a prompt cache, stays stable. It follows the session the way
// [Status] does.
//
// A server contributes, after its IncludeTools/ExcludeTools filters from
// the session's latest config.observed:
//
//   - while ready, and while handshaking once it listed its tools: the
//     tools of its last tools.listed;
//   - while reconnecting, and while launching and handshaking again, after
//     a live list in this session: that list, each entry Stale, until the
//     next tools.listed replaces it;
//   - while still connecting (configuring, launching, handshaking, or
//     reconnecting before any live list in this session): the tools the
//     [ToolCache] holds for its name and current config fingerprint, each
//     entry Deferred;
//   - while stopped or failed: nothing; [Catalog.Unavailable] says why.
//
// A Catalog is owned by one goroutine: Apply and every accessor must be
// called from it (accessors may rebuild a memoized view). Accessors return
// copies the caller owns.
type Catalog struct {
	fold     serverFold
	cache    *ToolCache
	ownCache bool

	// The view, memoized until an event or a cache change invalidates it.
	built       bool
	builtCache  uint64 // cache.version the view was built from
	entries     []Entry
	index       map[string]int // name → position in entries
	unavailable []UnavailableServer
	withheld    []WithheldTool
}

// Entry is one tool in the catalog.
type Entry struct {
	// Name is the catalog name the agent calls the tool by.
	Name string `json:"name"`
	// Server is the server that provides the tool.
	Server string `json:"server"`
	// Tool is the server's own name for the tool.
	Tool string `json:"tool"`
	// Title, Description, InputSchema, OutputSchema (canonical JSON text)
	// and Annotations are as the server listed them.
	Title        string                 `json:"title,omitempty"`
	Description  string                 `json:"description"`
	InputSchema  string                 `json:"input_schema,omitempty"`
	OutputSchema string                 `json:"output_schema,omitempty"`
	Annotations  events.ToolAnnotations `json:"annotations"`
	// DefHash is the definition hash the server's listing carried.
	DefHash string `json:"def_hash,omitempty"`
	// Deferred is true when the entry comes from the tool cache because
	// the server has not listed its tools in this session yet: a call must
	// wait for the server to connect.
	Deferred bool `json:"deferred"`
	// Stale is true when the entry is from the server's last live list and
	// the connection that listed it was lost: the server is reconnecting.
	Stale bool `json:"stale,omitempty"`
}

// UnavailableServer says why a server contributes no tools.
type UnavailableServer struct {
	Server string             `json:"server"`
	State  events.ServerState `json:"state"`
	Reason events.Reason      `json:"reason,omitempty"`
	Error  string             `json:"error,omitempty"`
}

// WithheldTool is a tool a server lists but the catalog withholds: its
// definition differs from what the server's approval pinned.
type WithheldTool struct {
	Server string        `json:"server"`
	Tool   string        `json:"tool"`
	Reason events.Reason `json:"reason"`
}

// CatalogView is a snapshot of a [Catalog].
type CatalogView struct {
	// Session is the session's ID, or "" before any event.
	Session string `json:"session"`
	// Tools are sorted by name.
	Tools []Entry `json:"tools"`
	// Unavailable lists stopped and failed servers, sorted by server.
	Unavailable []UnavailableServer `json:"unavailable"`
	// Withheld lists listed tools left out of Tools, sorted by server and
	// tool.
	Withheld []WithheldTool `json:"withheld,omitempty"`
}

// NewCatalog returns an empty catalog that takes deferred tools from cache.
//
// If cache is nil the catalog makes its own, and Apply folds every event
// into it before the catalog: fed the whole journal, earlier sessions fill
// the cache. Otherwise the caller owns cache and must apply each event to it
// before applying it to the catalog (as [Set] does); cache may then have
// been filled from earlier sessions beforehand.
func NewCatalog(cache *ToolCache) *Catalog {
	c := &Catalog{fold: newServerFold(), cache: cache}
	if cache == nil {
		c.cache, c.ownCache = NewToolCache(), true
	}
	return c
}

// Apply folds e into the catalog (and first into its own cache, if it made
// one). Events must be applied in journal order. Kinds that do not bear on
// the catalog are ignored.
func (c *Catalog) Apply(e events.Event) {
	if c.ownCache {
		c.cache.Apply(e)
	}
	if c.fold.apply(e) {
		c.built = false
	}
}

// Session returns the ID of the session the catalog describes, or "" before
// any event.
func (c *Catalog) Session() string { return c.fold.sess.session() }

// Entries returns the catalog's tools, sorted by name.
func (c *Catalog) Entries() []Entry {
	c.build()
	out := make([]Entry, len(c.entries))
	for i := range c.entries {
		out[i] = c.entries[i].clone()
	}
	return out
}

// Lookup returns the entry called name, and false if the catalog has none.
func (c *Catalog) Lookup(name string) (Entry, bool) {
	c.build()
	i, ok := c.index[name]
	if !ok {
		return Entry{}, false
	}
	return c.entries[i].clone(), true
}

// Len returns the number of entries.
func (c *Catalog) Len() int {
	c.build()
	return len(c.entries)
}

// Unavailable returns the servers that are stopped or failed, sorted by
// server name, with the reason and last error of their latest transition.
func (c *Catalog) Unavailable() []UnavailableServer {
	c.build()
	return slices.Clone(c.unavailable)
}

// View returns a snapshot of the whole catalog.
func (c *Catalog) View() CatalogView {
	c.build()
	return CatalogView{Session: c.Session(), Tools: c.Entries(), Unavailable: c.Unavailable(), Withheld: slices.Clone(c.withheld)}
}

// build recomputes the view if an event or the cache changed since the
// last build.
func (c *Catalog) build() {
	if c.built && c.builtCache == c.cache.version {
		return
	}
	// Pick each server's source list first, so entries is sized once.
	type source struct {
		s               *server
		tools           []events.Tool
		stale, deferred bool
	}
	var sources []source
	c.unavailable = c.unavailable[:0]
	c.withheld = c.withheld[:0]
	total := 0
	for _, n := range c.fold.sortedNames() {
		s := c.fold.servers[n]
		src := source{s: s}
		switch {
		case s.visibleLive():
			src.tools, src.stale = s.live, s.liveStale
		case s.state == events.StateStopped || s.state == events.StateFailed:
			c.unavailable = append(c.unavailable, UnavailableServer{Server: n, State: s.state, Reason: s.reason, Error: s.err})
			continue
		case s.state != events.StateReady && s.fingerprint != "": // connecting, no live list yet
			src.tools, src.deferred = c.cache.get(n, s.fingerprint), true
		}
		sources = append(sources, src)
		total += len(src.tools)
	}
	entries := slices.Grow(c.entries[:0], total)
	refs := make([]ToolRef, 0, total)
	seen := map[string]struct{}{}
	for _, src := range sources {
		src.s.filter.eachTool(src.tools, seen, func(t *events.Tool) {
			if _, withheld := slices.BinarySearch(src.s.withheld, t.Name); withheld && !src.deferred {
				c.withheld = append(c.withheld, WithheldTool{Server: src.s.name, Tool: t.Name, Reason: events.ReasonToolChanged})
				return
			}
			entries = append(entries, Entry{Server: src.s.name, Tool: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations,
				DefHash: t.DefHash, Deferred: src.deferred, Stale: src.stale})
			refs = append(refs, ToolRef{src.s.name, t.Name})
		})
	}
	for i, name := range nameRefs(refs) {
		entries[i].Name = name
	}
	slices.SortFunc(c.withheld, func(a, b WithheldTool) int {
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	if c.index == nil {
		c.index = make(map[string]int, len(entries))
	}
	clear(c.index)
	for i := range entries {
		c.index[entries[i].Name] = i
	}
	c.entries, c.built, c.builtCache = entries, true, c.cache.version
}

// clone returns a copy of e sharing no pointers with it.
func (e Entry) clone() Entry {
	e.Annotations = cloneAnnotations(e.Annotations)
	return e
}
