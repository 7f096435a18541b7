package store

import (
	"context"
	"fmt"

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
	if err := j.enqueue(ctx, r); err != nil {
		return AppendResult{}, err
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
	select {
	case j.reqs <- r:
		return nil
	case <-j.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write is the writer goroutine: the only one that begins write
// transactions. It takes one request, drains whatever else is already
// queued (up to MaxBatch events), commits them all in one transaction,
// and only then acknowledges each. There is no timer: a lone appender
// pays one commit, and concurrent appenders share commits.
func (j *Journal) write() {
	defer close(j.writerDone)
	st := newStager()
	batch := make([]*request, 0, 64)
	results := make([]staged, 0, 64)
	errs := make([]error, 0, 64)
	for {
		var r *request
		select {
		case r = <-j.reqs:
		case <-j.quit:
			return
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
		results, errs = results[:0], errs[:0]
		for range batch {
			results = append(results, staged{})
			errs = append(errs, nil)
		}
		stored, err := j.commit(st, batch, results, errs)
		if err != nil {
			j.log.Error("commit", logKeyRequests, len(batch), logKeyEvents, n, logKeyError, err)
		}
		if stored > 0 {
			j.notify()
		}
		for i, r := range batch {
			switch {
			case err != nil:
				r.p.finish(AppendResult{}, err)
			case errs[i] != nil:
				r.p.finish(AppendResult{}, errs[i])
			default:
				r.p.finish(results[i].res, nil)
			}
			batch[i] = nil
		}
		if cap(st.arena) > 8<<20 {
			st.arena = nil // don't keep a huge batch's arena forever
		}
	}
}

// commit stores batch in one write transaction. Per-request failures go
// into errs and skip only that request; a non-nil error means the whole
// transaction failed and nothing was stored. It returns the number of
// events stored.
func (j *Journal) commit(st *stager, batch []*request, results []staged, errs []error) (int, error) {
	stored := 0
	err := j.db.Update(func(tx *bolt.Tx) error {
		st.arena = st.arena[:0]
		stored = 0
		w, err := newTxWriter(tx)
		if err != nil {
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
			if err := w.put(st, r, &s); err != nil {
				return err
			}
			gpos = s.res.LastGPos
			stored += len(s.recs)
		}
		if stored == 0 {
			return nil
		}
		return w.log.SetSequence(gpos)
	})
	if err != nil {
		return 0, fmt.Errorf("commit: %w", translate(err))
	}
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

// txWriter is one write transaction's buckets. It implements view over
// the transaction, so staging sees what earlier requests of the batch
// wrote.
type txWriter struct {
	streams, log, heads, ids *bolt.Bucket
	// the last stream bucket used, since batches often repeat a session
	sid    uuid.UUID
	stream *bolt.Bucket
}

func newTxWriter(tx *bolt.Tx) (*txWriter, error) {
	w := &txWriter{streams: tx.Bucket(bucketStreams), log: tx.Bucket(bucketLog),
		heads: tx.Bucket(bucketHeads), ids: tx.Bucket(bucketIDs)}
	if w.streams == nil || w.log == nil || w.heads == nil || w.ids == nil {
		return nil, fmt.Errorf("%w: missing top-level bucket", ErrNotJournal)
	}
	// FillPercent is not persisted: set it in every transaction.
	for _, b := range []*bolt.Bucket{w.streams, w.log, w.heads, w.ids} {
		b.FillPercent = fillPercent
	}
	return w, nil
}

func (w *txWriter) head(sid uuid.UUID) (SessionInfo, bool, error) {
	v := w.heads.Get(sid[:])
	if v == nil {
		return SessionInfo{Session: sid}, false, nil
	}
	info, ok := parseHead(sid, v)
	if !ok {
		return info, false, &CorruptError{Session: sid, Reason: "undecodable head"}
	}
	return info, true, nil
}

func (w *txWriter) position(id uuid.UUID) (uuid.UUID, uint64, bool) {
	return parsePos(w.ids.Get(id[:]))
}

func (w *txWriter) record(sid uuid.UUID, seq uint64) []byte {
	b := w.streams.Bucket(sid[:])
	if b == nil {
		return nil
	}
	var k [8]byte
	return b.Get(itob(&k, seq))
}

// put writes a staged append: its records, log and id entries, and the
// session's head. Every value comes from the stager's arena and so stays
// valid until the commit.
func (w *txWriter) put(st *stager, r *request, s *staged) error {
	if w.stream == nil || w.sid != r.session {
		b, err := w.streams.CreateBucketIfNotExists(r.session[:])
		if err != nil {
			return fmt.Errorf("stream bucket: %w", err)
		}
		b.FillPercent = fillPercent
		w.sid, w.stream = r.session, b
	}
	var k [8]byte
	for i, rec := range s.recs {
		e := &r.evs[i]
		if err := w.stream.Put(itob(&k, e.Seq), rec); err != nil {
			return fmt.Errorf("put record: %w", err)
		}
		pos := st.alloc(posLen)
		putPos(pos, r.session, e.Seq)
		if err := w.log.Put(itob(&k, e.GPos), pos); err != nil {
			return fmt.Errorf("put log entry: %w", err)
		}
		if err := w.ids.Put(e.ID[:], pos); err != nil {
			return fmt.Errorf("put id: %w", err)
		}
	}
	head := st.alloc(headLen)
	appendHead(head[:0], &s.info)
	if err := w.heads.Put(r.session[:], head); err != nil {
		return fmt.Errorf("put head: %w", err)
	}
	return nil
}
