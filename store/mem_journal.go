package store

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// MemJournal is an in-memory journal with the same methods and semantics
// as [Journal], minus durability: records are encoded, CRC'd and
// hash-chained exactly as on disk, and reads decode them, so callers get
// copies. It exists for tests of other packages and passes the same
// conformance suite (store/storetest). Appends commit synchronously, so
// [MemJournal.Submit] returns a Pending that is already done. It
// recognises retries of any event it holds, not only of the last
// [RetryWindow].
type MemJournal struct {
	mu      sync.Mutex
	closed  bool
	st      *stager
	streams map[uuid.UUID][][]byte // records by seq-1
	heads   map[uuid.UUID]SessionInfo
	log     []memPos // by gpos-1
	ids     map[uuid.UUID]memPos
	commits chan struct{} // closed and replaced after every append that stored events
	quit    chan struct{} // closed by Close
}

type memPos struct {
	sid uuid.UUID
	seq uint64
}

// NewMem returns an empty in-memory journal.
func NewMem() *MemJournal {
	return &MemJournal{
		st:      newStager(),
		streams: make(map[uuid.UUID][][]byte),
		heads:   make(map[uuid.UUID]SessionInfo),
		ids:     make(map[uuid.UUID]memPos),
		commits: make(chan struct{}),
		quit:    make(chan struct{}),
	}
}

// Close marks the journal closed: later calls fail with [ErrClosed] and
// followers return. It is idempotent.
func (m *MemJournal) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.quit)
	}
	return nil
}

// Append is [Journal.Append] in memory.
func (m *MemJournal) Append(ctx context.Context, session uuid.UUID, exp Expect, evs []events.Event) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, err
	}
	r, err := newRequest(session, exp, evs)
	if err != nil {
		return AppendResult{}, err
	}
	m.apply(r)
	return r.p.Wait(ctx)
}

// Submit is [Journal.Submit] in memory; the returned Pending is done.
func (m *MemJournal) Submit(session uuid.UUID, exp Expect, evs []events.Event) *Pending {
	r, err := newRequest(session, exp, evs)
	if err != nil {
		return failed(err)
	}
	m.apply(r)
	return r.p
}

// apply commits r and finishes its Pending.
func (m *MemJournal) apply(r *request) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		r.p.finish(AppendResult{}, ErrClosed)
		return
	}
	m.st.arena = nil // records are kept, so never reuse their memory
	s, err := m.st.stage(memView{m}, r, uint64(len(m.log)))
	if err == nil && !s.res.Duplicate {
		for i, rec := range s.recs {
			e := &r.evs[i]
			m.streams[r.session] = append(m.streams[r.session], rec)
			m.log = append(m.log, memPos{r.session, e.Seq})
			m.ids[e.ID] = memPos{r.session, e.Seq}
		}
		m.heads[r.session] = s.info
		close(m.commits)
		m.commits = make(chan struct{})
	}
	m.mu.Unlock()
	r.p.finish(s.res, err)
}

// memView is the view of a MemJournal for staging; m.mu is held.
type memView struct{ m *MemJournal }

func (v memView) head(sid uuid.UUID) (SessionInfo, bool, error) {
	info, ok := v.m.heads[sid]
	if !ok {
		info.Session = sid
	}
	return info, ok, nil
}

func (v memView) stored(id uuid.UUID) (uuid.UUID, uint64, []byte, bool, error) {
	p, ok := v.m.ids[id]
	if !ok {
		return uuid.Nil, 0, nil, false, nil
	}
	return p.sid, p.seq, v.m.streams[p.sid][p.seq-1], true, nil
}

// Sessions is [Journal.Sessions] in memory.
func (m *MemJournal) Sessions(ctx context.Context) ([]SessionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]SessionInfo, 0, len(m.heads))
	for _, info := range m.heads {
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return slices.Compare(a.Session[:], b.Session[:]) })
	return out, nil
}

// Head is [Journal.Head] in memory.
func (m *MemJournal) Head(ctx context.Context, session uuid.UUID) (SessionInfo, error) {
	if err := ctx.Err(); err != nil {
		return SessionInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return SessionInfo{}, ErrClosed
	}
	info, ok := m.heads[session]
	if !ok {
		return SessionInfo{}, fmt.Errorf("head of session %s: %w", session, ErrNotFound)
	}
	return info, nil
}

// ReadSession is [Journal.ReadSession] in memory.
func (m *MemJournal) ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error {
	fill := func(ctx context.Context, c *chunk, next uint64) (uint64, error) {
		err := m.locked(ctx, func() error {
			recs, ok := m.streams[session]
			if !ok {
				return ErrNotFound
			}
			for ; next <= uint64(len(recs)) && len(c.recs) < readChunk; next++ {
				c.addRec(recPos{sid: session, seq: next}, recs[next-1])
			}
			return nil
		})
		if err != nil {
			return next, fmt.Errorf("read session %s: %w", session, err)
		}
		return next, nil
	}
	_, err := scan(ctx, max(fromSeq, 1), fill, fn)
	return err
}

// ReadAll is [Journal.ReadAll] in memory.
func (m *MemJournal) ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	_, err := scan(ctx, max(fromGPos, 1), m.fillLog, fn)
	return err
}

// fillLog copies a chunk of the log's records; records never change once
// stored, so the chunk may point at them after the lock is released.
func (m *MemJournal) fillLog(ctx context.Context, c *chunk, next uint64) (uint64, error) {
	err := m.locked(ctx, func() error {
		for ; next <= uint64(len(m.log)) && len(c.recs) < readChunk; next++ {
			p := m.log[next-1]
			c.addRec(recPos{sid: p.sid, seq: p.seq, gpos: next}, m.streams[p.sid][p.seq-1])
		}
		return nil
	})
	if err != nil {
		return next, fmt.Errorf("read log from %d: %w", next, err)
	}
	return next, nil
}

// Follow is [Journal.Follow] in memory.
func (m *MemJournal) Follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	next := max(fromGPos, 1)
	for {
		m.mu.Lock()
		wake := m.commits
		m.mu.Unlock()
		var err error
		if next, err = scan(ctx, next, m.fillLog, fn); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.quit:
			return ErrClosed
		}
	}
}

// Verify is [Journal.Verify] in memory.
func (m *MemJournal) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	err := m.locked(ctx, func() error {
		sids := make([]uuid.UUID, 0, len(m.streams))
		for sid := range m.streams {
			sids = append(sids, sid)
		}
		slices.SortFunc(sids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		chk := newChecker()
		dec := events.NewDecoder()
		for _, sid := range sids {
			chk.reset(sid)
			for i, rec := range m.streams[sid] {
				seq := uint64(i) + 1
				e, err := decode(dec, sid, seq, 0, rec)
				if err != nil {
					return err
				}
				if e.GPos == 0 || e.GPos > uint64(len(m.log)) || m.log[e.GPos-1] != (memPos{sid, seq}) {
					return &CorruptError{Session: sid, Seq: seq, GPos: e.GPos, Reason: "global log does not point at the record"}
				}
				if m.ids[e.ID] != (memPos{sid, seq}) {
					return &CorruptError{Session: sid, Seq: seq, GPos: e.GPos, Reason: fmt.Sprintf("event id %s not indexed to the record", e.ID)}
				}
				if err := chk.record(e, rec); err != nil {
					return err
				}
				rep.Events++
			}
			head, ok := m.heads[sid]
			if err := chk.finish(head, ok); err != nil {
				return err
			}
			rep.Sessions++
		}
		rep.LogEntries = uint64(len(m.log))
		if len(m.heads) != len(m.streams) || rep.LogEntries != rep.Events || uint64(len(m.ids)) != rep.Events {
			return &CorruptError{Reason: fmt.Sprintf("%d heads, %d log entries and %d ids for %d sessions with %d events",
				len(m.heads), rep.LogEntries, len(m.ids), len(m.streams), rep.Events)}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	return rep, nil
}

// locked runs fn under m.mu after checking ctx and Close.
func (m *MemJournal) locked(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return fn()
}
