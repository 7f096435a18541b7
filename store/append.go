package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// AppendResult says where an append's events landed.
type AppendResult struct {
	// FirstSeq and LastSeq are the seqs of the first and last event in the
	// session.
	FirstSeq, LastSeq uint64
	// FirstGPos and LastGPos are their global positions. An append's
	// events always get consecutive global positions.
	FirstGPos, LastGPos uint64
	// Events are the events as stored: ID, Session, Seq, GPos and V are
	// filled. For a fresh append the payloads are the caller's; for a
	// duplicate they are decoded from the journal.
	Events []events.Event
	// Duplicate is true when every event's ID was already in the session
	// (a retry): nothing was appended and the positions are the original
	// ones.
	Duplicate bool
}

// Pending is an append handed to the writer that the caller has not
// waited for yet (see [Journal.Submit]).
type Pending struct {
	done chan struct{}
	res  AppendResult
	err  error
}

func newPending() *Pending { return &Pending{done: make(chan struct{})} }

// failed returns a Pending that is already done with err.
func failed(err error) *Pending {
	p := newPending()
	p.finish(AppendResult{}, err)
	return p
}

// finish records the outcome and wakes waiters. It is called exactly once.
func (p *Pending) finish(res AppendResult, err error) {
	p.res, p.err = res, err
	close(p.done)
}

// Done returns a channel that is closed once the append is committed (or
// has failed).
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait blocks until the append is committed or has failed, and returns its
// result. If ctx ends first it returns ctx's error; the append itself is
// not cancelled and may still commit.
func (p *Pending) Wait(ctx context.Context) (AppendResult, error) {
	select {
	case <-p.done:
		return p.res, p.err
	default:
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return AppendResult{}, ctx.Err()
	}
}

// request is one append on its way to the writer.
type request struct {
	session uuid.UUID
	exp     Expect
	evs     []events.Event // a copy of the caller's slice; the writer fills positions
	// payloads holds the events' encoded payloads back to back, event i's
	// ending at ends[i]: they are encoded by the appending goroutine, so
	// that the writer only adds envelopes (see events.AppendRecord).
	payloads []byte
	ends     []int
	p        *Pending
}

// payload returns event i's encoded payload.
func (r *request) payload(i int) []byte {
	start := 0
	if i > 0 {
		start = r.ends[i-1]
	}
	return r.payloads[start:r.ends[i]]
}

// encoders encode payloads in newRequest, on the appending goroutines.
var encoders = sync.Pool{New: func() any { return events.NewEncoder() }}

// newRequest validates an append and copies its events, giving each
// event without an ID a fresh UUIDv7 and a missing Kind its payload's
// kind. Errors wrap [ErrInvalid].
func newRequest(session uuid.UUID, exp Expect, evs []events.Event) (*request, error) {
	if session == uuid.Nil {
		return nil, fmt.Errorf("%w: zero session id", ErrInvalid)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w: no events", ErrInvalid)
	}
	cp := make([]events.Event, len(evs))
	copy(cp, evs)
	var seen map[uuid.UUID]struct{}
	if len(cp) > 1 {
		seen = make(map[uuid.UUID]struct{}, len(cp))
	}
	for i := range cp {
		e := &cp[i]
		if e.Payload == nil {
			return nil, fmt.Errorf("%w: event %d (%s): nil payload", ErrInvalid, i, e.Kind)
		}
		if e.Kind == "" {
			e.Kind = e.Payload.Kind()
		}
		if e.Payload.Kind() != e.Kind {
			return nil, fmt.Errorf("%w: event %d: kind %q with payload of kind %q", ErrInvalid, i, e.Kind, e.Payload.Kind())
		}
		if kindVersion(e.Kind) == 0 {
			return nil, fmt.Errorf("%w: event %d: %w: %q", ErrInvalid, i, events.ErrUnknownKind, e.Kind)
		}
		if e.ID == uuid.Nil {
			e.ID = events.NewID()
		} else if seen != nil {
			if _, dup := seen[e.ID]; dup {
				return nil, fmt.Errorf("%w: events share id %s", ErrInvalid, e.ID)
			}
			seen[e.ID] = struct{}{}
		}
	}
	r := &request{session: session, exp: exp, evs: cp, ends: make([]int, len(cp)), p: newPending()}
	enc := encoders.Get().(*events.Encoder)
	defer encoders.Put(enc)
	for i := range cp {
		var err error
		if r.payloads, err = enc.AppendPayload(r.payloads, &cp[i]); err != nil {
			return nil, fmt.Errorf("%w: event %d: %w", ErrInvalid, i, err)
		}
		r.ends[i] = len(r.payloads)
	}
	return r, nil
}

// kindVersions holds Kind.Version of every kind: Kind.Version allocates a
// payload to test the kind, and the writer asks for every event.
var kindVersions = func() map[events.Kind]uint16 {
	m := make(map[events.Kind]uint16)
	for _, k := range events.Kinds() {
		m[k] = k.Version()
	}
	return m
}()

// kindVersion is k.Version() without allocating.
func kindVersion(k events.Kind) uint16 { return kindVersions[k] }
