// Package projections folds the journal into the views the runtime, the
// CLI and replay read: the per-server [Status] (with a remote server's
// OAuth authorization, [AuthStatus]), the tool [Catalog] the agent
// sees, the cross-session [ToolCache] behind deferred tools,
// [Approvals], and the [ConfigReport] (what the session's latest config
// reading skipped, and why). A projection changes only when an already journaled event is
// applied to it, so a live view and a replayed view come from the same code.
//
// # Usage
//
// Make the projections, apply every event of the journal in order, then read
// views; keep applying events as they are appended:
//
//	views := projections.NewSet()
//	for _, e := range journaled { // in journal (GPos) order
//		views.Apply(e)
//	}
//	for _, s := range views.Status.Servers() {
//		fmt.Println(s.Name, s.State, s.Tools)
//	}
//	if ent, ok := views.Catalog.Lookup("mcp__github__create_issue"); ok {
//		_ = ent.Server // route the call
//	}
//
// Each projection can also be used alone (NewStatus, NewCatalog,
// NewToolCache, NewApprovals). Status and Catalog describe one session: the
// one opened by the latest session.started they applied. ToolCache and
// Approvals span every session, which is why a catalog can offer a server's
// tools from an earlier session (marked Deferred) before the server has
// connected in this one. A catalog built with NewCatalog(nil) keeps its own
// cache; one built with a shared cache expects the caller to apply each event
// to the cache first, as [Set.Apply] does.
//
// Tool names follow "mcp__<server>__<tool>", sanitized and capped at 64
// bytes, with a hash suffix on overflow or collision: see [ToolName] and
// [ToolNames].
//
// # Concurrency
//
// Every projection is owned by one goroutine, which calls Apply and the
// accessors; nothing here locks. Accessors return copies the caller owns,
// which may be handed to other goroutines.
//
// # Determinism
//
// The package is pure: no I/O, clock, randomness, logging, goroutines or
// context. Views depend only on the events applied and their order, never on
// Go map iteration order: every list is sorted (servers and catalog entries
// by name, cache entries by server and fingerprint, approvals by workspace
// and server), and catalog names depend on the set of visible tools, not on
// the order they arrived in. Times in views are the events' recorded times.
//
// # Invariants
//
//   - A server's state changes only by server.transitioned, except that a
//     server a config names first (or again, after its removal) starts as
//     configuring.
//   - Catalog names are unique and at most [MaxToolNameLen] bytes of
//     [A-Za-z0-9_-].
//   - A tool filter that cannot be evaluated (a malformed pattern) excludes
//     the tool.
//   - An empty cached tool list is a cache miss.
package projections
