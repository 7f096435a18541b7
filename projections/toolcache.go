package projections

import (
	"maps"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
)

// ToolCache remembers the last tools each server listed under each config
// fingerprint, across sessions. The catalog serves them as deferred tools
// while a server with the same fingerprint is still connecting, so an agent
// sees a server's tools before the server is up.
//
// A ToolCache is owned by one goroutine: Apply and every accessor must be
// called from it. Accessors return copies the caller owns.
type ToolCache struct {
	// configs maps session → server → fingerprint of the server's config in
	// the session's most recent config.observed.
	configs map[sessionKey]map[string]string
	entries map[cacheKey]*cacheEntry
	// version counts changes, so a catalog can tell its build is current.
	version uint64
}

type cacheKey struct {
	server      string
	fingerprint string
}

type cacheEntry struct {
	tools []events.Tool
	// protocolVersion is the MCP version of the session that listed them.
	protocolVersion string
	session         sessionKey
	seq             uint64
	time            int64
}

// CacheEntry is one cached tool list, as [ToolCache.Entries] reports it.
type CacheEntry struct {
	// Server is the server that listed the tools.
	Server string `json:"server"`
	// Fingerprint is [events.Fingerprint] of the server's config when it
	// listed them.
	Fingerprint string `json:"fingerprint"`
	// Tools are the tools as listed, in the server's order; empty when the
	// server listed none (which [ToolCache.Get] treats as a miss).
	Tools []events.Tool `json:"tools"`
	// ProtocolVersion is the MCP version the server's session spoke when
	// it listed them ("" if the listing did not say: recorded before it
	// was kept).
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Session, Seq and Time locate the tools.listed event the list came
	// from (Time in unix nanoseconds).
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
	Time    int64  `json:"time"`
}

// NewToolCache returns an empty tool cache.
func NewToolCache() *ToolCache {
	return &ToolCache{configs: map[sessionKey]map[string]string{}, entries: map[cacheKey]*cacheEntry{}}
}

// Apply folds e into the cache. config.observed sets the fingerprints of the
// servers of e's session (replacing the session's previous reading);
// tools.listed stores the listed tools under (server, fingerprint of the
// server's config in that session), replacing what was cached there; a
// tools.listed for a server the session's config does not name is ignored.
// session.stopped forgets the session's fingerprints, not its tools. Other
// kinds are ignored. Apply must be called in journal order.
func (tc *ToolCache) Apply(e events.Event) {
	sk := sessionKey(e.Session)
	switch p := e.Payload.(type) {
	case *events.ConfigObserved:
		fps := make(map[string]string, len(p.Servers))
		for i := range p.Servers {
			if c := &p.Servers[i]; c.Name != "" {
				fps[c.Name] = events.Fingerprint(c)
			}
		}
		tc.configs[sk] = fps
	case *events.ToolsListed:
		fp, ok := tc.configs[sk][e.Server]
		if !ok {
			return
		}
		tc.entries[cacheKey{e.Server, fp}] = &cacheEntry{tools: cloneTools(p.Tools), protocolVersion: p.ProtocolVersion,
			session: sk, seq: e.Seq, time: e.Time}
		tc.version++
	case *events.SessionStopped:
		delete(tc.configs, sk)
	}
}

// Get returns a copy of the tools cached for server under config
// fingerprint (see [events.Fingerprint]). It reports false when nothing is
// cached, or when the cached list is empty: an empty list is a miss.
func (tc *ToolCache) Get(server, fingerprint string) ([]events.Tool, bool) {
	ts := tc.get(server, fingerprint)
	if len(ts) == 0 {
		return nil, false
	}
	return cloneTools(ts), true
}

// get returns the cached tools without copying them; callers must not keep
// or change the slice.
func (tc *ToolCache) get(server, fingerprint string) []events.Tool {
	if ent, ok := tc.entries[cacheKey{server, fingerprint}]; ok {
		return ent.tools
	}
	return nil
}

// ProtocolVersion returns the MCP version the server spoke when it last
// listed tools under config fingerprint, whether or not it listed any;
// "" when nothing is cached or the listing did not record it.
func (tc *ToolCache) ProtocolVersion(server, fingerprint string) string {
	if ent, ok := tc.entries[cacheKey{server, fingerprint}]; ok {
		return ent.protocolVersion
	}
	return ""
}

// Len returns the number of cached (server, fingerprint) lists, empty ones
// included.
func (tc *ToolCache) Len() int { return len(tc.entries) }

// Entries returns every cached list, sorted by server then fingerprint.
func (tc *ToolCache) Entries() []CacheEntry {
	keys := slices.SortedFunc(maps.Keys(tc.entries), func(a, b cacheKey) int {
		if c := strings.Compare(a.server, b.server); c != 0 {
			return c
		}
		return strings.Compare(a.fingerprint, b.fingerprint)
	})
	out := make([]CacheEntry, len(keys))
	for i, k := range keys {
		ent := tc.entries[k]
		out[i] = CacheEntry{Server: k.server, Fingerprint: k.fingerprint, Tools: cloneTools(ent.tools),
			ProtocolVersion: ent.protocolVersion, Session: ent.session.String(), Seq: ent.seq, Time: ent.time}
	}
	return out
}
