// Package replay reproduces recorded sessions: it folds a session to any
// point (status, catalog, approvals as they were after an event), verifies
// that the decider still decides what it decided then (Temporal-style
// replay of recorded inputs), explains why a tool (or a server) was or
// was not available (a server blocked on authorization included, with the
// sign-in that unblocks it), and renders timelines.
//
// # Usage
//
//	snap, err := replay.At(ctx, journal, session, seq)   // the state after event seq
//	err = replay.Verify(ctx, journal, session)           // *MismatchError on divergence
//	why, err := replay.Why(ctx, journal, session, "mcp__gh__search", seq)
//
// A snapshot and an explanation also list the calls recorded lost by then
// ([LostCalls]): in flight when their connection, or their mcpledger, died,
// with an outcome nobody knows. The next session closes the calls of a
// killed one that way, and the timeline marks them.
//
// # Determinism
//
// Replay never calls out: every nondeterministic value (time, jitter seed,
// process exits, tool lists) is read from the recorded events. Verify runs
// fsm.Decide on each recorded input, in order, against the state folded
// from the recorded events before it, and compares its decisions with the
// recorded decisions that name that input as their cause. The first
// difference is reported as a [*MismatchError] wrapping [ErrNondeterminism]:
// a missing decision, an extra one, or a different one, with both sides.
//
// # Exports
//
// [WriteExport] writes a session as sealed JSON lines: each event as `log
// --json` prints it with a digest chained over the lines (positions in the
// source journal aside), then a trailer with the head and the count, signed
// if asked ([WriteExportOptions]). [ReadExport] recomputes the chain and
// reports the first line that differs from what was exported as an
// *[ExportError]; [Export.Conflict] compares an export with the session a
// journal holds, naming the first event that differs (*[ConflictError]).
// The chain has no key: it catches every edit but a deliberate one that
// recomputes it; only a signature checked against a fingerprint the
// importer knows (ReadExportOptions.Signer) catches that.
//
// Re-enacting a session through the real runtime code (the Manager with
// its effects against recorded answers) lives in package runtime
// (runtime.Reenact), because replay may not import runtime.
package replay
