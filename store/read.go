package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// readChunk is how many records a read copies out of one read
// transaction before decoding them and calling fn outside it. Calling fn
// outside the transaction lets fn take its time, or append, without
// holding pages or blocking the writer's remap.
const readChunk = 512

// Sessions returns every session's summary, in session ID order (for
// UUIDv7 session IDs, start order).
func (j *Journal) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var out []SessionInfo
	err := j.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHeads).ForEach(func(k, v []byte) error {
			if len(k) != 16 {
				return &CorruptError{Reason: fmt.Sprintf("heads key of %d bytes", len(k))}
			}
			info, ok := parseHead(uuid.UUID(k), v)
			if !ok {
				return &CorruptError{Session: uuid.UUID(k), Reason: "undecodable head"}
			}
			out = append(out, info)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return out, nil
}

// Head returns session's summary, or [ErrNotFound].
func (j *Journal) Head(ctx context.Context, session uuid.UUID) (SessionInfo, error) {
	var info SessionInfo
	err := j.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketHeads).Get(session[:])
		if v == nil {
			return ErrNotFound
		}
		var ok bool
		if info, ok = parseHead(session, v); !ok {
			return &CorruptError{Session: session, Reason: "undecodable head"}
		}
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("head of session %s: %w", session, err)
	}
	return info, nil
}

// ReadSession calls fn on session's events with seq ≥ fromSeq, in seq
// order. An error from fn stops the read and is returned as is. fn runs
// in the caller's goroutine but outside any transaction, so it may take
// its time or call other methods, including Append. It returns
// [ErrNotFound] for an unknown session and a [*CorruptError] for a record
// that fails its CRC or does not decode (after delivering the events
// before it).
func (j *Journal) ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error {
	_, err := scan(ctx, max(fromSeq, 1), false, j.fillSession(session), fn)
	return err
}

// fillSession reads a chunk of session's records in a read transaction.
func (j *Journal) fillSession(session uuid.UUID) fillFunc {
	return func(ctx context.Context, c *chunk, next uint64) (uint64, error) {
		err := j.view(ctx, func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketStreams).Bucket(session[:])
			if b == nil {
				return ErrNotFound
			}
			cur := b.Cursor()
			var kb [8]byte
			for k, v := cur.Seek(itob(&kb, next)); k != nil && len(c.pos) < readChunk; k, v = cur.Next() {
				seq, ok := btoi(k)
				if !ok || v == nil {
					return &CorruptError{Session: session, Reason: fmt.Sprintf("stray key %x in stream", k)}
				}
				c.copyRec(recPos{sid: session, seq: seq}, v)
				next = seq + 1
			}
			return nil
		})
		c.seal()
		if err != nil {
			return next, fmt.Errorf("read session %s: %w", session, err)
		}
		return next, nil
	}
}

// ReadAll calls fn on every event with global position ≥ fromGPos, in
// global order across sessions. Errors and fn as for ReadSession. Large
// reads decode on several goroutines, which end before ReadAll returns.
func (j *Journal) ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	_, err := scan(ctx, max(fromGPos, 1), true, j.fillLog, fn)
	return err
}

// fillLog reads a chunk of the global log, and the records it points
// at, in a read transaction.
func (j *Journal) fillLog(ctx context.Context, c *chunk, next uint64) (uint64, error) {
	err := j.view(ctx, func(tx *bolt.Tx) error {
		streams := tx.Bucket(bucketStreams)
		cur := tx.Bucket(bucketLog).Cursor()
		var kb [8]byte
		var last *streamCursor
		var cursors map[uuid.UUID]*streamCursor
		for k, v := cur.Seek(itob(&kb, next)); k != nil && len(c.pos) < readChunk; k, v = cur.Next() {
			gpos, _ := btoi(k)
			sid, seq, ok := parsePos(v)
			if !ok {
				return &CorruptError{GPos: gpos, Reason: "undecodable log entry"}
			}
			sc := last
			if sc == nil || sc.sid != sid {
				if sc = cursors[sid]; sc == nil {
					b := streams.Bucket(sid[:])
					if b == nil {
						return &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "log entry points at a missing session"}
					}
					sc = &streamCursor{sid: sid, c: b.Cursor()}
					if cursors == nil {
						cursors = make(map[uuid.UUID]*streamCursor)
					}
					cursors[sid] = sc
				}
				last = sc
			}
			rec := sc.get(seq)
			if rec == nil {
				return &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "log entry points at a missing record"}
			}
			c.copyRec(recPos{sid: sid, seq: seq, gpos: gpos}, rec)
			next = gpos + 1
		}
		return nil
	})
	c.seal()
	if err != nil {
		return next, fmt.Errorf("read log from %d: %w", next, err)
	}
	return next, nil
}

// streamCursor reads one session's records, stepping forward when the
// next seq wanted is the next key, which is the common case.
type streamCursor struct {
	sid uuid.UUID
	c   *bolt.Cursor
	seq uint64 // seq the cursor is on; 0 before the first read
}

func (s *streamCursor) get(seq uint64) []byte {
	var k, v []byte
	if s.seq != 0 && seq == s.seq+1 {
		k, v = s.c.Next()
	} else {
		var kb [8]byte
		k, v = s.c.Seek(itob(&kb, seq))
	}
	got, ok := btoi(k)
	if !ok || got != seq {
		s.seq = 0
		return nil
	}
	s.seq = seq
	return v
}

// decode decodes the record stored at (sid, seq) and checks that it
// says so. gpos is checked when non-zero.
func decode(dec *events.Decoder, sid uuid.UUID, seq, gpos uint64, rec []byte) (events.Event, error) {
	e, err := dec.Decode(rec) // checks the CRC first
	if err != nil {
		if !events.CheckCRC(rec) {
			return e, &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "CRC mismatch"}
		}
		return e, &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "undecodable record", Err: err}
	}
	if e.Session != sid || e.Seq != seq || (gpos != 0 && e.GPos != gpos) {
		return e, &CorruptError{Session: sid, Seq: seq, GPos: gpos,
			Reason: fmt.Sprintf("record says session %s seq %d gpos %d", e.Session, e.Seq, e.GPos)}
	}
	return e, nil
}

// Follow is ReadAll from fromGPos, then waits for new commits and
// delivers their events as they land, until ctx ends (it then returns
// ctx's error) or the journal is closed ([ErrClosed]). Waiting costs
// nothing: the writer wakes followers after each commit, with no polling.
// A read-only journal excludes writers, so there Follow delivers what is
// stored and then waits for ctx.
func (j *Journal) Follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	next := max(fromGPos, 1)
	for {
		wake := j.committed() // taken before reading, so no commit is missed
		var err error
		if next, err = scan(ctx, next, true, j.fillLog, fn); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-j.quit:
			return ErrClosed
		}
	}
}
