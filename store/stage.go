package store

import (
	"crypto/sha256"
	"fmt"
	"hash"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// view is what staging needs to read from a backend's current state,
// including what earlier requests of the same batch wrote. Both the bbolt
// transaction and the in-memory journal provide it.
type view interface {
	// head returns the session's summary, and false if it has no events.
	head(sid uuid.UUID) (SessionInfo, bool, error)
	// stored returns the session, seq and record of the stored event with
	// id, if the backend finds it: the bbolt journal looks among the last
	// RetryWindow events, the in-memory one among all.
	stored(id uuid.UUID) (sid uuid.UUID, seq uint64, rec []byte, ok bool, err error)
}

// staged is one request validated against the current state, with its
// events positioned and encoded, ready for the backend to store.
type staged struct {
	recs [][]byte    // encoded records in seq order; nil for a duplicate
	info SessionInfo // the session's summary after the append
	res  AppendResult
}

// stager turns requests into staged appends: it puts the envelopes around
// the payloads newRequest encoded. It owns a decoder, a hash and an arena,
// so it is used by one goroutine at a time.
type stager struct {
	dec *events.Decoder
	sum hash.Hash
	// arena holds every encoded value of the current transaction. bbolt's
	// Put does not copy values, so a value must stay unchanged until the
	// commit: the arena is only ever appended to (a reallocation leaves the
	// old array, and the slices into it, untouched) and is reset only
	// between transactions.
	arena []byte
}

func newStager() *stager {
	return &stager{dec: events.NewDecoder(), sum: sha256.New()}
}

// alloc returns n bytes of the arena that nothing else will write.
func (s *stager) alloc(n int) []byte {
	start := len(s.arena)
	s.arena = append(s.arena, make([]byte, n)...)
	return s.arena[start:len(s.arena):len(s.arena)]
}

// stage checks r against v and encodes its events, the first of which
// gets global position gpos+1. It writes nothing: errors (all of them
// specific to r: [ErrConflict], [ErrInvalid], [*CorruptError]) leave the
// backend untouched, so the rest of the batch goes on.
func (s *stager) stage(v view, r *request, gpos uint64) (staged, error) {
	sid := r.session
	info, exists, err := v.head(sid)
	if err != nil {
		return staged{}, err
	}
	if dup, ok, err := s.duplicate(v, r); ok || err != nil {
		return dup, err
	}
	if !r.exp.allows(info.LastSeq) {
		return staged{}, fmt.Errorf("%w: session %s is at seq %d, append expected %s", ErrConflict, sid, info.LastSeq, r.exp)
	}
	if !exists {
		info = SessionInfo{Session: sid}
	}
	out := staged{recs: make([][]byte, len(r.evs))}
	for i := range r.evs {
		e := &r.evs[i]
		e.Session, e.Seq, e.GPos, e.V = sid, info.LastSeq+1, gpos+1, kindVersion(e.Kind)
		start := len(s.arena)
		if s.arena, err = events.AppendRecord(s.arena, e, r.payload(i)); err != nil {
			return staged{}, fmt.Errorf("%w: event %d: %w", ErrInvalid, i, err)
		}
		rec := s.arena[start:len(s.arena):len(s.arena)]
		out.recs[i] = rec
		s.chain(&info.Head, rec)
		if info.FirstGPos == 0 {
			info.FirstGPos, info.FirstTime = e.GPos, e.Time
		}
		info.LastSeq, info.LastGPos, info.LastTime = e.Seq, e.GPos, e.Time
		gpos++
	}
	first, last := &r.evs[0], &r.evs[len(r.evs)-1]
	out.info = info
	out.res = AppendResult{FirstSeq: first.Seq, LastSeq: last.Seq, FirstGPos: first.GPos, LastGPos: last.GPos, Events: r.evs}
	return out, nil
}

// chain advances a hash-chain head over one record.
func (s *stager) chain(head *[32]byte, rec []byte) {
	s.sum.Reset()
	s.sum.Write(head[:])
	s.sum.Write(rec)
	s.sum.Sum(head[:0])
}

// duplicate detects a retry: ok is true when every event's ID is already
// stored in r's session, in order and contiguous, and the result then
// holds the original positions. Any other overlap is [ErrConflict].
func (s *stager) duplicate(v view, r *request) (staged, bool, error) {
	var first uint64
	var recs [][]byte
	for i := range r.evs {
		psid, pseq, rec, ok, err := v.stored(r.evs[i].ID)
		if err != nil {
			return staged{}, false, err
		}
		if !ok {
			continue
		}
		if psid != r.session {
			return staged{}, false, fmt.Errorf("%w: event id %s is already in session %s", ErrConflict, r.evs[i].ID, psid)
		}
		if i == 0 {
			first = pseq
		}
		if len(recs) != i || pseq != first+uint64(i) {
			return staged{}, false, fmt.Errorf("%w: events overlap earlier events of session %s only in part", ErrConflict, r.session)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return staged{}, false, nil
	}
	if len(recs) != len(r.evs) {
		return staged{}, false, fmt.Errorf("%w: events overlap earlier events of session %s only in part", ErrConflict, r.session)
	}
	evs := make([]events.Event, len(recs))
	for i, rec := range recs {
		seq := first + uint64(i)
		e, err := s.dec.Decode(rec)
		if err != nil {
			return staged{}, false, &CorruptError{Session: r.session, Seq: seq, Reason: "undecodable record", Err: err}
		}
		evs[i] = e
	}
	res := AppendResult{FirstSeq: evs[0].Seq, LastSeq: evs[len(evs)-1].Seq,
		FirstGPos: evs[0].GPos, LastGPos: evs[len(evs)-1].GPos, Events: evs, Duplicate: true}
	return staged{res: res}, true, nil
}
