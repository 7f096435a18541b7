// Package store is mcpledger's durable event journal: one bbolt file that
// holds every session's events, a global log across sessions, a summary
// and hash-chain head per session, and an index of event IDs.
// [MemJournal] is an in-memory twin for tests of other packages; both pass
// the conformance suite in store/storetest.
//
// # Usage
//
//	j, err := store.Open(path, &store.Options{Logger: logger})
//	if err != nil { … }            // ErrLocked, ErrNotJournal, ErrNewerFormat
//	defer j.Close()
//
//	sid := events.NewID()          // sessions are UUIDv7: ID order is start order
//	res, err := j.Append(ctx, sid, store.NoStream, []events.Event{
//		events.New(now, "", &events.SessionStarted{Seed: seed}),
//	})
//	// res.LastSeq is the session's version: pass store.Exact(res.LastSeq)
//	// to the next append to detect a concurrent writer (ErrConflict).
//
//	err = j.ReadSession(ctx, sid, 1, func(e events.Event) error { … })
//	err = j.ReadAll(ctx, 1, func(e events.Event) error { … })   // global order
//	err = j.Follow(ctx, 1, func(e events.Event) error { … })    // then live
//	rep, err := j.Verify(ctx)                                   // *CorruptError
//
// Append returns after the commit is durable. [Journal.Submit] hands an
// append to the writer and returns a [Pending] to wait on later, for
// events whose producer need not block on the disk.
//
// An Append whose events all carry IDs that are already stored in the
// session, in the same order, is a retry: it appends nothing and returns
// the original positions with Duplicate set. Give events IDs before the
// first try (events.NewID) to make retries after a timeout safe.
//
// # Layout
//
//	meta/format, meta/codec, meta/created   decimal versions, RFC 3339 time
//	streams/<session 16B>/<seq 8B BE>       record (package events codec)
//	log/<gpos 8B BE>                        session ‖ seq (24 bytes)
//	heads/<session 16B>                     SessionInfo, fixed 73-byte binary
//	ids/<event id 16B>                      session ‖ seq
//
// Seqs count from 1 per session; gpos counts from 1 over the whole file
// (the log bucket's sequence). FillPercent is 1.0 on every bucket, the
// freelist is a hashmap, and db.Batch is never used.
//
// # Concurrency
//
// All methods are safe for concurrent use. One goroutine, started by Open
// and stopped by Close, owns every write transaction: it takes a queued
// append, drains whatever else is queued (up to [Options.MaxBatch]
// events), checks and writes them all in one transaction, and acknowledges
// each only after the commit returned. A conflicting or invalid append
// fails alone; a failed commit (e.g. [ErrFull]) fails the whole batch.
// There is no timer, so a lone writer pays one commit per append and
// concurrent writers share commits.
//
// Reads copy a few hundred records per short read transaction, decode
// them outside it and call fn in the caller's goroutine, in order, so fn
// may block or append without stalling the writer. A read longer than
// one chunk decodes on GOMAXPROCS goroutines that the call starts and
// waits for before it returns. Followers sleep on a channel that the
// writer closes after each commit.
//
// Only one process may open a file for writing; [Options.ReadOnly] opens
// take a shared lock, which also excludes writers. [ErrLocked] says so.
//
// # Invariants
//
//   - A session's seqs run gapless from 1; gpos runs gapless from 1 across
//     the file, and every event's gpos is indexed in log/.
//   - Acknowledged means committed: bbolt commits atomically, so after a
//     crash every acknowledged event is present and nothing is half-written.
//   - Every record carries a CRC32C; heads/ carries the SHA-256 chain
//     h_n = SHA-256(h_{n-1} ‖ record_n), h_0 = 32 zero bytes. Verify
//     recomputes both.
//   - Errors from bbolt are translated at this boundary: callers check
//     this package's sentinels and never import bbolt.
package store
