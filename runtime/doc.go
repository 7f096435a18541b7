// Package runtime is mcpledger's supervisor: the [Manager] launches and
// supervises MCP servers (stdio, Streamable HTTP, SSE, in-process), exposes
// their tools, and writes every lifecycle transition, observation and tool
// call to the journal before acting on it.
//
// # Usage
//
//	m, err := runtime.New(journal, &runtime.Options{Config: loader})
//	report, err := m.Start(ctx)       // returns after the startup gate (250 ms)
//	tools := m.Tools()                 // catalog: live and deferred tools
//	res, err := m.CallTool(ctx, "mcp__files__read", args)
//	m.Close()                          // fails pending calls, stops every server
//
// # Data flow
//
// One goroutine (the loop) owns the decider state (fsm.State) and the
// projections. Commands from callers and observations from effects arrive
// on one channel; the loop drains what is waiting, runs fsm.Decide on each
// input, appends the inputs and their decisions to the journal in one
// commit, applies them to the projections, publishes a read-only snapshot,
// then starts the effects the decisions call for (spawn, connect, kill,
// timers) in goroutines it owns. Effects never touch state: they report
// back as observations. The journal is the only commit point: nothing is
// visible to callers or acted on before it is durable.
//
// One exception keeps audited calls off two goroutine hand-offs: a
// durable call record (call.started, call.finished), which decides nothing
// and starts no effect, is decided and journaled on the caller's
// goroutine when nothing is queued for the loop, under the same lock the
// loop holds while it works (see submitDirect). The order is the same as
// through the loop: nothing queued before the record is overtaken.
//
// An append that fails (a full disk) degrades the Manager (degraded.go):
// the batch is not applied, commands and calls are refused with a
// *DegradedError, observations are kept, and the loop retries the journal
// with backoff; when an append succeeds again it journals
// journal.resumed, then what it kept, and carries on. View.Journal says
// which.
//
// A remote server's requests carry its stored OAuth sign-in when
// Options.OAuthStore is set (oauth_conn.go, package runtime/oauth): a
// refresh is journaled as auth.refreshed, a 401 that no sign-in answers
// makes the attempt fail with class auth (failed/needs_auth, no retry),
// and RecordAuth journals a sign-in made beside the session, which
// relaunches such a server. Tokens reach neither the journal nor a log.
//
// # Concurrency
//
// Every goroutine is started through the Manager's wait group and ends by
// Close. Every MCP request carries a deadline. No server process outlives
// Close: stdio servers run in their own process group, and shutdown
// escalates close-stdin → SIGTERM → SIGKILL to the whole group. None
// outlives this process either: each server gets SIGKILL when it dies
// (parent-death signal), and with Options.ShimPath one reaper process per
// Manager kills the rest of each group (see RunShimIfRequested); Close
// ends the reaper too.
//
// # What lives where
//
// runtime keeps the supervisor and the one place that does the ledger's
// I/O: the Manager and its loop, connections, processes and the reaper,
// the call path (policy, frames, outcome, retry), re-enactment and the
// View. Beside it: runtime/config reads and watches the configuration,
// runtime/guard checks and rewrites a call's values (validation,
// redaction, rendering), runtime/gateway fronts a Manager as an MCP server
// (`mcpledger serve`) and runtime/control serves it on the control socket.
// runtime imports config and guard and never gateway or control: they use
// its exported API (ARCHITECTURE.md has the map).
package runtime
