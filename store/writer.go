package store

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// Append appends evs to session's stream and returns once the bbolt
// transaction holding them has committed (fsync'd, unless NoSync). The
// events get consecutive seqs after the session's last one and
// consecutive global positions; events with a zero ID get a fresh UUIDv7,
// and Session is set to session.
//
// exp is checked inside the commit against the session's last seq; a
// mismatch fails with [ErrConflict] and appends nothing. If every event's
// ID is already stored in session, in the same order, the append is a
// retry: nothing is appended and the result has Duplicate set and the
// original positions. Other errors: [ErrInvalid], [ErrFull], [ErrClosed],
// [ErrReadOnly], or ctx's error. When ctx ends after the append was
// handed to the writer, the append may still commit; give events IDs and
// retry to be sure.
//
// The caller must not modify the events' payloads until Append returns.
func (j *Journal) Append(ctx context.Context, session uuid.UUID, exp Expect, evs []events.Event) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, err
	}
	r, err := newRequest(session, exp, evs)
	if err != nil {
		return AppendResult{}, err
	}
	if !j.direct(r) {
		if err := j.enqueue(ctx, r); err != nil {
			return AppendResult{}, err
		}
	}
	return r.p.Wait(ctx)
}

// Submit hands an append to the writer without waiting for its commit
// ("relaxed" mode) and returns a [Pending] to wait on. It blocks only
// while the writer's queue is full. Validation, conflicts and commit
// errors are reported by the Pending, with the same semantics as
// [Journal.Append]. The caller must not modify the events' payloads until
// the Pending is done.
func (j *Journal) Submit(session uuid.UUID, exp Expect, evs []events.Event) *Pending {
	r, err := newRequest(session, exp, evs)
	if err != nil {
		return failed(err)
	}
	if err := j.enqueue(context.Background(), r); err != nil {
		return failed(err)
	}
	return r.p
}

// enqueue hands r to the writer. It fails with ErrClosed once Close has
// begun, with ErrReadOnly on a read-only journal, or with ctx's error.
func (j *Journal) enqueue(ctx context.Context, r *request) error {
	if j.readOnly {
		return ErrReadOnly
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	j.queued.Add(1)
	select {
	case j.reqs <- r:
		return nil
	case <-j.quit:
	case <-ctx.Done():
	}
	j.queued.Add(-1)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return ErrClosed
}

// direct commits r in the calling goroutine, sparing it the two goroutine
// switches of a hand-off to the writer, when the journal has a single
// appender: the last commit carried one append, none is queued and no
// transaction is running. It reports whether it did; r is then finished.
// An append queued earlier (by Submit, say) is always committed first:
// it stays counted in queued until it is.
func (j *Journal) direct(r *request) bool {
	if j.readOnly || !j.solo.Load() || j.queued.Load() != 0 {
		return false
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed || !j.txMu.TryLock() {
		return false
	}
	defer j.txMu.Unlock()
	if j.queued.Load() != 0 {
		return false
	}
	j.one[0] = r
	j.run(j.one[:], false)
	j.one[0] = nil
	return true
}

// write is the writer goroutine: it runs every write transaction but the
// direct ones. It takes one request, drains whatever else is already
// queued (up to MaxBatch events), commits them all in one transaction,
// and only then acknowledges each. A lone appender pays one commit (and
// commits directly), and concurrent appenders share commits; only when
// the last commit carried several appends does the writer wait, at most
// Options.Linger, for as many to gather.
func (j *Journal) write() {
	defer close(j.writerDone)
	batch := make([]*request, 0, 64)
	acked := 0 // appends acknowledged by the last commit
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		var r *request
		select {
		case r = <-j.reqs:
		case <-j.quit:
			return
		}
		if acked > 1 {
			// The last commit acknowledged several appenders, who are now
			// runnable: yield once, so that those quick to append again
			// queue before the drain and share this commit rather than
			// wait for the next. (Measured with 64 producers: 42 events
			// per commit instead of 32; no timer is involved.)
			runtime.Gosched()
		}
		batch = append(batch[:0], r)
		n := len(r.evs)
	drain:
		for n < j.maxBatch {
			select {
			case r = <-j.reqs:
				batch = append(batch, r)
				n += len(r.evs)
			default:
				break drain
			}
		}
		if j.linger > 0 && len(batch) < acked && n < j.maxBatch {
			// Several appenders shared the last commit and not all of them
			// are back: wait a little for the rest (Options.Linger).
			linger.Reset(j.linger)
		wait:
			for len(batch) < acked && n < j.maxBatch {
				select {
				case r = <-j.reqs:
					batch = append(batch, r)
					n += len(r.evs)
				case <-linger.C:
					break wait
				}
			}
			linger.Stop()
		}
		j.txMu.Lock()
		j.run(batch, true)
		j.txMu.Unlock()
		acked = len(batch)
		clear(batch)
	}
}

// run commits batch in one transaction and acknowledges each append in
// it; queued says the appends came through the writer's queue. j.txMu is
// held.
func (j *Journal) run(batch []*request, queued bool) {
	j.results, j.errs = j.results[:0], j.errs[:0]
	n := 0
	for _, r := range batch {
		j.results = append(j.results, staged{})
		j.errs = append(j.errs, nil)
		n += len(r.evs)
	}
	stored, err := j.commit(j.st, j.w, batch, j.results, j.errs)
	if err != nil {
		j.log.Error("commit", logKeyRequests, len(batch), logKeyEvents, n, logKeyError, err)
	}
	if stored > 0 {
		j.notify()
	}
	if queued {
		j.queued.Add(-int64(len(batch)))
	}
	j.solo.Store(len(batch) == 1)
	for i, r := range batch {
		switch {
		case err != nil:
			r.p.finish(AppendResult{}, err)
		case j.errs[i] != nil:
			r.p.finish(AppendResult{}, j.errs[i])
		default:
			r.p.finish(j.results[i].res, nil)
		}
		j.results[i] = staged{}
	}
	if cap(j.st.arena) > 8<<20 {
		j.st.arena = nil // don't keep a huge batch's arena forever
	}
}

// commit stores batch in one write transaction. Per-request failures go
// into errs and skip only that request; a non-nil error means the whole
// transaction failed and nothing was stored. It returns the number of
// events stored.
func (j *Journal) commit(st *stager, w *txWriter, batch []*request, results []staged, errs []error) (int, error) {
	stored := 0
	var cp *Checkpoint // the checkpoint this commit took
	err := j.update(func(tx *bolt.Tx) error {
		st.arena = st.arena[:0]
		stored = 0
		if err := w.begin(tx); err != nil {
			return err
		}
		gpos := w.log.Sequence()
		for i, r := range batch {
			s, err := st.stage(w, r, gpos)
			if err != nil {
				errs[i] = err
				continue
			}
			results[i] = s
			if s.res.Duplicate {
				continue
			}
			if err := w.put(r, &s); err != nil {
				return err
			}
			gpos = s.res.LastGPos
			stored += len(s.recs)
		}
		if stored == 0 {
			return nil
		}
		if err := w.flush(st); err != nil {
			return err
		}
		var err error
		if cp, err = j.putCheckpoint(tx, gpos); err != nil {
			return err
		}
		return w.log.SetSequence(gpos)
	})
	w.end(err == nil)
	if err != nil {
		if cp != nil {
			j.pendingCP.CompareAndSwap(nil, cp) // for the next commit
		}
		// bbolt may fail a commit whose pages reached the file (a failed
		// fsync after the meta page was written), so what the writer
		// remembers is rebuilt from the file.
		w.forget()
		j.ids.reset()
		_ = j.read(func(tx *bolt.Tx) error { j.ids.load(tx); return nil }) // Open checked the end of the log
		return 0, fmt.Errorf("commit: %w", err)
	}
	j.ids.commit()
	j.commitN.Add(1)
	return stored, nil
}

// notify wakes every follower waiting for a commit.
func (j *Journal) notify() {
	j.commitMu.Lock()
	close(j.commits)
	j.commits = make(chan struct{})
	j.commitMu.Unlock()
}

// committed returns the channel the next commit closes.
func (j *Journal) committed() <-chan struct{} {
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	return j.commits
}

// txWriter is one write transaction's buckets and the heads of the
// sessions it touched. It implements view over the transaction, so
// staging sees what earlier requests of the batch wrote; heads are
// written once per transaction, by flush. Across transactions it keeps
// the committed heads of the sessions written lately, so that a session
// appended to in every commit is not read back from the file each time.
type txWriter struct {
	log, sessions, index *bolt.Bucket
	ids                  *recentIDs
	dec                  *events.Decoder
	heads                map[uuid.UUID]*txHead // sessions read or written in this transaction
	dirty                []*txHead             // those written, in first-write order
	cache                map[uuid.UUID]*txHead // heads as committed, of sessions written lately
	free                 []*txHead
}

// maxCachedHeads bounds txWriter.cache.
const maxCachedHeads = 1024

// txHead is a session's head as the transaction has it.
type txHead struct {
	head
	exists, dirty bool
}

func newTxWriter(ids *recentIDs) *txWriter {
	return &txWriter{ids: ids, dec: events.NewDecoder(),
		heads: make(map[uuid.UUID]*txHead), cache: make(map[uuid.UUID]*txHead)}
}

// begin starts a transaction: it finds the buckets.
func (w *txWriter) begin(tx *bolt.Tx) error {
	w.end(false)
	w.log, w.sessions, w.index = tx.Bucket(bucketLog), tx.Bucket(bucketSessions), tx.Bucket(bucketIndex)
	if w.log == nil || w.sessions == nil || w.index == nil {
		return fmt.Errorf("%w: missing top-level bucket", ErrNotJournal)
	}
	// FillPercent is not persisted: set it in every transaction.
	w.log.FillPercent, w.sessions.FillPercent, w.index.FillPercent = fillLog, fillSessions, fillIndex
	return nil
}

// end closes the transaction's books: when it committed, the heads it
// wrote become the cached ones.
func (w *txWriter) end(committed bool) {
	for sid, h := range w.heads {
		if !committed || !h.dirty {
			w.release(h)
			continue
		}
		if old := w.cache[sid]; old != nil {
			w.release(old)
		} else if len(w.cache) >= maxCachedHeads {
			w.forget()
		}
		h.dirty = false
		w.cache[sid] = h
	}
	clear(w.heads)
	w.dirty = w.dirty[:0]
}

// forget drops the cached heads.
func (w *txWriter) forget() {
	for _, c := range w.cache {
		w.release(c)
	}
	clear(w.cache)
}

func (w *txWriter) release(h *txHead) {
	if len(w.free) < maxCachedHeads {
		w.free = append(w.free, h)
	}
}

// load returns the session's head as this transaction has it.
func (w *txWriter) load(sid uuid.UUID) (*txHead, error) {
	if h, ok := w.heads[sid]; ok {
		return h, nil
	}
	var h *txHead
	if n := len(w.free); n > 0 {
		h, w.free = w.free[n-1], w.free[:n-1]
	} else {
		h = &txHead{}
	}
	runs := h.runs[:0]
	if c := w.cache[sid]; c != nil {
		*h = *c
		h.runs = append(runs, c.runs...)
	} else {
		*h = txHead{head: head{runs: runs}}
		ok, err := loadHead(w.sessions, sid, &h.head)
		if err != nil {
			w.release(h)
			return nil, err
		}
		if !ok {
			h.info, h.openSeq = SessionInfo{Session: sid}, 1
		}
		h.exists = ok
	}
	w.heads[sid] = h
	return h, nil
}

func (w *txWriter) head(sid uuid.UUID) (SessionInfo, bool, error) {
	h, err := w.load(sid)
	if err != nil {
		return SessionInfo{Session: sid}, false, err
	}
	return h.info, h.exists, nil
}

func (w *txWriter) stored(id uuid.UUID) (uuid.UUID, uint64, []byte, bool, error) {
	gpos, ok := w.ids.lookup(id)
	if !ok {
		return uuid.Nil, 0, nil, false, nil
	}
	var k [8]byte
	rec := w.log.Get(itob(&k, gpos))
	if rec == nil {
		return uuid.Nil, 0, nil, false, &CorruptError{GPos: gpos, Reason: "a recent event's record is missing"}
	}
	e, err := w.dec.DecodeHeader(rec)
	if err != nil {
		return uuid.Nil, 0, nil, false, &CorruptError{GPos: gpos, Reason: "undecodable record", Err: err}
	}
	return e.Session, e.Seq, rec, true, nil
}

// put writes a staged append's records to log/ and notes them in the
// session's head. Every record comes from the stager's arena and so stays
// valid until the commit.
func (w *txWriter) put(r *request, s *staged) error {
	h, err := w.load(r.session)
	if err != nil {
		return err
	}
	var k [8]byte
	for i, rec := range s.recs {
		e := &r.evs[i]
		if err := w.log.Put(itob(&k, e.GPos), rec); err != nil {
			return fmt.Errorf("put record: %w", err)
		}
		h.runs = addRun(h.runs, e.GPos)
		w.ids.add(e.ID, e.GPos)
	}
	h.info, h.exists = s.info, true
	if !h.dirty {
		h.dirty = true
		w.dirty = append(w.dirty, h)
	}
	return nil
}

// flush writes the head of every session the transaction appended to,
// first sealing its open index segment into index/ if the segment no
// longer fits in the head.
func (w *txWriter) flush(st *stager) error {
	for _, h := range w.dirty {
		sid := h.info.Session
		if !fitsHead(h.runs) {
			var kb [indexKeyLen]byte
			seg := appendRuns(st.alloc(runsLen(h.runs))[:0], h.runs)
			if err := w.index.Put(indexKey(&kb, sid, h.openSeq), seg); err != nil {
				return fmt.Errorf("put index segment: %w", err)
			}
			h.openSeq, h.runs = h.info.LastSeq+1, h.runs[:0]
		}
		v := appendHead(st.alloc(headLen)[:0], &h.head)
		if err := w.sessions.Put(sid[:], v); err != nil {
			return fmt.Errorf("put head: %w", err)
		}
	}
	return nil
}
