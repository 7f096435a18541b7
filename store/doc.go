// Package store is mcpledger's durable event journal: one bbolt file that
// holds every event in one global log, and per session a summary with its
// hash-chain head and an index of where its events are in the log.
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
// first try (events.NewID) to make retries after a timeout safe. Retries
// are recognised among the journal's last [RetryWindow] events (16,384):
// the writer keeps their IDs in memory and rebuilds them from the end of
// the log at Open, so nothing is written for them. An ID older than that
// is not looked up: its retry is appended again, unless an Exact
// expectation refuses it.
//
// # Layout (format 2)
//
//	meta/format, meta/codec, meta/created   decimal versions, RFC 3339 time
//	log/<gpos 8B BE>                        record (package events codec)
//	sessions/<session 16B>                  head: summary, hash chain, open index segment
//	index/<session 16B ‖ seq 8B BE>         sealed index segment, from seq on
//
// Records are stored once, in commit order, under their global position
// (gpos, counted from 1 over the whole file; the log bucket's sequence is
// the last one). A record names its own session, seq and gpos. A commit
// appends its records at the right edge of log/ whatever sessions they
// belong to, so the pages it writes do not grow with the number of
// sessions in the batch, beyond the leaves of sessions/ holding their
// heads.
//
// A head is fixed-size (210 bytes): a version byte; LastSeq, FirstGPos,
// LastGPos, FirstTime and LastTime (8 bytes each, big endian); the 32-byte
// hash-chain head; then the session's open index segment: the first seq
// it covers (8 bytes), its length (1 byte) and up to 128 bytes of runs.
//
// A session's index is a list of runs: stretches of consecutive seqs
// stored at consecutive gpos, each a pair of uvarints (the gap from the
// end of the previous run, or the first gpos; the count). A session that
// has the journal to itself is one run; interleaved sessions have about
// one run per append. The runs since the last seal live in the head; when
// they no longer fit, the writer moves them to index/ under the session
// and their first seq, where they are never rewritten. ReadSession finds
// the segment holding its first seq, then reads each run from log/ with a
// cursor; ReadAll and Follow read log/ in order.
//
// FillPercent is 1.0 on log/ and sessions/ (both grow only at their right
// edge, and heads never change size) and bbolt's default 0.5 on index/
// (segments of many sessions interleave). The freelist is a hashmap, and
// db.Batch is never used.
//
// # Concurrency
//
// All methods are safe for concurrent use. Write transactions run one at
// a time. A goroutine started by Open and stopped by Close runs them for
// queued appends: it takes one, drains whatever else is queued (up to
// [Options.MaxBatch] events), checks and writes them all in one
// transaction, and acknowledges each only after the commit returned. A
// conflicting or invalid append fails alone; a failed commit (e.g.
// [ErrFull]) fails the whole batch. While the journal has a single
// appender (the last commit carried one append and none is queued), an
// Append commits in the caller's goroutine instead, saving the hand-off
// to the writer and back; an append queued earlier is always committed
// first. When the last commit carried several appends, the writer yields
// once, then waits at most [Options.Linger] (default 500 µs) for as many
// to gather, so that concurrent appenders keep sharing commits; a lone
// appender never waits.
//
// Reads copy a few hundred records per short read transaction, decode
// them outside it and call fn in the caller's goroutine, in order, so fn
// may block or append without stalling the writer. A read longer than
// one chunk decodes on GOMAXPROCS goroutines that the call starts and
// waits for before it returns. Followers sleep on a channel that the
// writer closes after each commit.
//
// Only one process may open a file for writing; a writer takes the intent
// lock ([IntentPath]) and then bbolt's lock, and keeps both until Close.
// [Options.ReadOnly] opens take a shared lock for as long as they are
// open, which excludes writers: they are for files no writer will want
// (archives, tests). Other processes read a live journal with a
// [Reader], which holds the file for a few milliseconds at a time and,
// while a writer holds it, reads through the writer ([ServeRead], on a
// transport the caller provides: [ReaderOptions.Remote]). [ErrLocked]
// names the process that holds a file when a wait for it ends.
//
// # Invariants
//
//   - A session's seqs run gapless from 1; gpos runs gapless from 1 across
//     the file, and the session's index points at every one of its
//     events' gpos, in seq order.
//   - Acknowledged means committed: bbolt commits atomically, so after a
//     crash every acknowledged event is present and nothing is half-written.
//   - Every record carries a CRC32C; each head carries the SHA-256 chain
//     h_n = SHA-256(h_{n-1} ‖ record_n), h_0 = 32 zero bytes. Verify
//     recomputes both, and checks every index against the records.
//   - Errors from bbolt are translated at this boundary: callers check
//     this package's sentinels and never import bbolt.
//   - A damaged file is reported, never a crash: bbolt's panics on a
//     damaged page, and the memory faults of a page that points past the
//     end of the file, become a [*CorruptError] (with
//     debug.SetPanicOnFault in each goroutine while it reads the memory
//     map: read transactions, commits, Open), keys and values are checked
//     to lie inside the file before they are copied, and Open checks the
//     file's size and freelist before bbolt reads them. A failed Open
//     leaves the file unlocked.
//   - A writer never writes into a damaged structure: a writable Open
//     first checks every branch page and the right edge of each bucket
//     (structure.go) and refuses a damaged file with [ErrDamaged]. What
//     still reads of a damaged file, [Salvage] copies into a new journal,
//     from a raw scan of its pages.
package store
