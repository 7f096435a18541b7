package store

import (
	"bytes"
	"context"
	"errors"
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
		m := mappedOf(tx)
		b := tx.Bucket(bucketSessions)
		seek := b.Cursor()
		var prev []byte
		return b.ForEach(func(k, v []byte) error {
			if !m.holds(k) || !m.holds(v) {
				return &CorruptError{Reason: "a sessions entry points outside the file (damaged leaf page)"}
			}
			if len(k) != 16 {
				return &CorruptError{Reason: fmt.Sprintf("sessions key of %d bytes", len(k))}
			}
			if !ascending(&prev, k) {
				return &CorruptError{Session: uuid.UUID(k), Reason: "sessions keys out of order (damaged page)"}
			}
			// Head, ReadSession and appends find a head by key, through
			// branch keys and a binary search of the leaf that this walk
			// does not use: damaged keys would hide it from them.
			if sk, _ := seek.Seek(k); !bytes.Equal(sk, k) {
				return &CorruptError{Session: uuid.UUID(k), Reason: "a seek for the head lands on key " + m.text(sk) + " (damaged page)"}
			}
			info, ok := parseInfo(uuid.UUID(k), v)
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
		v := tx.Bucket(bucketSessions).Get(session[:])
		if v == nil {
			return ErrNotFound
		}
		if !mappedOf(tx).holds(v) {
			return &CorruptError{Session: session, Reason: "the head points outside the file (damaged leaf page)"}
		}
		var ok bool
		if info, ok = parseInfo(session, v); !ok {
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
// [ErrNotFound] for an unknown session and a [*CorruptError] for the
// first record that fails its CRC, does not decode, or cannot be found or
// read because a page of the file is damaged (after delivering the events
// before it).
func (j *Journal) ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error {
	_, err := scan(ctx, max(fromSeq, 1), j.fillSession(session), fn)
	return err
}

// fillSession reads a chunk of session's records in a read transaction:
// it finds them through the session's index, then reads each run of them
// from the log.
func (j *Journal) fillSession(session uuid.UUID) fillFunc {
	var h head
	var sp []span
	return func(ctx context.Context, c *chunk, next uint64) (uint64, error) {
		at := span{seq: next} // the record being read, for a fault
		err := j.view(ctx, func(tx *bolt.Tx) error {
			m := mappedOf(tx)
			ok, err := loadHead(tx.Bucket(bucketSessions), session, &h)
			if err != nil {
				return err
			}
			if !ok {
				return ErrNotFound
			}
			if sp, err = spans(m, tx.Bucket(bucketIndex).Cursor(), &h, next, readChunk, sp[:0]); err != nil {
				return err
			}
			cur := tx.Bucket(bucketLog).Cursor()
			for _, s := range sp {
				at = span{seq: s.seq, gpos: s.gpos}
				var kb [8]byte
				k, v := cur.Seek(itob(&kb, s.gpos))
				for i := range s.count {
					at = span{seq: s.seq + i, gpos: s.gpos + i}
					if !m.holds(k) || !m.holds(v) {
						return &CorruptError{Session: session, Seq: at.seq, GPos: at.gpos, Reason: "the log entry points outside the file (damaged leaf page)"}
					}
					if gpos, ok := btoi(k); !ok || gpos != at.gpos || v == nil {
						return &CorruptError{Session: session, Seq: at.seq, GPos: at.gpos, Reason: "index points at a missing record"}
					}
					c.copyRec(recPos{sid: session, seq: at.seq, gpos: at.gpos}, v)
					k, v = cur.Next()
				}
				next = s.seq + s.count
			}
			return nil
		})
		c.seal()
		if err != nil {
			return next, fmt.Errorf("read session %s: %w", session, corruptAt(err, session, at.seq, at.gpos))
		}
		return next, nil
	}
}

// ReadAll calls fn on every event with global position ≥ fromGPos, in
// global order across sessions. Errors and fn as for ReadSession. Large
// reads decode on several goroutines, which end before ReadAll returns.
func (j *Journal) ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	_, err := scan(ctx, max(fromGPos, j.base+1), j.fillLog, fn)
	return j.attribute(err)
}

// fillLog reads a chunk of the global log in a read transaction.
func (j *Journal) fillLog(ctx context.Context, c *chunk, next uint64) (uint64, error) {
	err := j.view(ctx, func(tx *bolt.Tx) error {
		m := mappedOf(tx)
		cur := tx.Bucket(bucketLog).Cursor()
		var kb [8]byte
		for k, v := cur.Seek(itob(&kb, next)); k != nil && len(c.pos) < readChunk; k, v = cur.Next() {
			if !m.holds(k) || !m.holds(v) {
				return &CorruptError{GPos: next, Reason: "the log entry points outside the file (damaged leaf page)"}
			}
			gpos, ok := btoi(k)
			if !ok || gpos != next || v == nil {
				return &CorruptError{GPos: next, Reason: "global log gap: next key is " + m.text(k)}
			}
			c.copyRec(recPos{gpos: gpos}, v)
			next = gpos + 1
		}
		return nil
	})
	c.seal()
	if err != nil {
		return next, fmt.Errorf("read log from %d: %w", next, corruptAt(err, uuid.Nil, 0, next))
	}
	return next, nil
}

// attribute fills in the session and seq of a *CorruptError found through
// the global log, where the damaged record cannot say whose it is: the
// sessions' indexes do.
func (j *Journal) attribute(err error) error {
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Session != uuid.Nil || ce.GPos == 0 {
		return err
	}
	_ = j.read(func(tx *bolt.Tx) error { // a damaged index may fault too
		ce.Session, ce.Seq, _ = locate(tx, ce.GPos)
		return nil
	})
	return err
}

// decode decodes the record stored at (sid, seq, gpos) and checks that it
// says so. sid and seq are checked when known (non-zero), gpos when
// non-zero.
func decode(dec *events.Decoder, sid uuid.UUID, seq, gpos uint64, rec []byte) (events.Event, error) {
	e, err := dec.Decode(rec) // checks the CRC first
	if err != nil {
		if !events.CheckCRC(rec) {
			return e, &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "CRC mismatch"}
		}
		return e, &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "undecodable record", Err: err}
	}
	if (sid != uuid.Nil && (e.Session != sid || e.Seq != seq)) || (gpos != 0 && e.GPos != gpos) {
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
	next := max(fromGPos, j.base+1)
	for {
		wake := j.committed() // taken before reading, so no commit is missed
		var err error
		if next, err = scan(ctx, next, j.fillLog, fn); err != nil {
			return j.attribute(err)
		}
		if err := j.awaitCommit(ctx, wake); err != nil {
			return err
		}
	}
}

// awaitCommit waits for wake (j.committed, taken before the last read),
// and returns ctx's error if ctx ends first, or ErrClosed if j closes.
func (j *Journal) awaitCommit(ctx context.Context, wake <-chan struct{}) error {
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-j.quit:
		return ErrClosed
	}
}
