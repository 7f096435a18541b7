package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// VerifyReport counts what [Journal.Verify] checked.
type VerifyReport struct {
	// Sessions is the number of sessions walked.
	Sessions int
	// Events is the number of records checked.
	Events uint64
	// LogEntries is the number of global log entries checked.
	LogEntries uint64
}

// Verify walks the whole journal in one read transaction. It reads the
// global log in order and checks that it runs gapless from 1 to its
// sequence (from its base+1, after an archive), and for each record: that a seek for its key finds it (as
// reads do), its CRC, that it decodes, that it names
// its own global position, that its session has a head, and that its seq
// follows the session's previous one (seqs gapless from 1). When a
// session's last event has been read it checks the session: the
// recomputed hash chain and summary must equal its head, and its index
// (sealed segments and open segment) must point at exactly the positions
// its events were found at. Last, every head must have been reached and
// every index segment must belong to a session. The first problem found
// is returned as a [*CorruptError] (wrapping [ErrCorrupt]); the report
// counts what was checked up to it: Sessions counts the sessions checked
// whole.
func (j *Journal) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	// What the walk is checking, for a fault: while it walks the log, the
	// record it reads next, at.gpos (which the log's next key must be);
	// while it checks a session's index, the session.
	var at recPos
	err := j.view(ctx, func(tx *bolt.Tx) error {
		if err := checkMeta(tx); err != nil {
			return err
		}
		m := mappedOf(tx)
		logB, sessions, index := tx.Bucket(bucketLog), tx.Bucket(bucketSessions), tx.Bucket(bucketIndex)
		type session struct {
			chk    *checker
			stored head
			runs   []run // where the records were found
		}
		open := map[uuid.UUID]*session{}
		done := map[uuid.UUID]bool{}
		dec := events.NewDecoder()
		c, seek := logB.Cursor(), logB.Cursor()
		base := baseOf(tx)
		at = recPos{gpos: base + 1}
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if rep.LogEntries%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if !m.holds(k) || !m.holds(v) {
				return &CorruptError{GPos: at.gpos, Reason: "the log entry points outside the file (damaged leaf page)"}
			}
			gpos, ok := btoi(k)
			if !ok || gpos != at.gpos || v == nil {
				return &CorruptError{GPos: at.gpos, Reason: "global log gap: next key is " + m.text(k)}
			}
			// Reads seek by key, through the branch pages this walk does
			// not use: a damaged branch key would send them elsewhere.
			if sk, _ := seek.Seek(k); !bytes.Equal(sk, k) {
				sid, seq, _ := locate(tx, gpos)
				return &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "a seek for the record lands on key " + m.text(sk) + " (damaged branch page)"}
			}
			e, err := decode(dec, uuid.Nil, 0, gpos, v)
			if err != nil {
				var ce *CorruptError
				if errors.As(err, &ce) {
					ce.Session, ce.Seq, _ = locate(tx, gpos)
				}
				return err
			}
			s := open[e.Session]
			if s == nil {
				if done[e.Session] {
					return &CorruptError{Session: e.Session, Seq: e.Seq, GPos: gpos, Reason: "record after the session's last seq"}
				}
				s = &session{chk: newChecker()}
				s.chk.reset(e.Session)
				ok, err := loadHead(sessions, e.Session, &s.stored)
				if err != nil {
					return err
				}
				if !ok {
					return &CorruptError{Session: e.Session, Seq: e.Seq, GPos: gpos, Reason: "record of a session without a head"}
				}
				open[e.Session] = s
			}
			if err := s.chk.record(e, v); err != nil {
				return err
			}
			s.runs = addRun(s.runs, gpos)
			rep.Events++
			rep.LogEntries++
			next := recPos{gpos: gpos + 1}
			at = next
			if e.Seq < s.stored.info.LastSeq {
				continue
			}
			if err := s.chk.finish(s.stored.info, true); err != nil {
				return err
			}
			at = recPos{sid: e.Session}
			if err := checkIndex(m, index.Cursor(), index.Cursor(), &s.stored, s.runs); err != nil {
				return err
			}
			at = next
			delete(open, e.Session)
			done[e.Session] = true
			rep.Sessions++
		}
		at = recPos{}
		if logB.Sequence() != base+rep.LogEntries {
			return &CorruptError{Reason: fmt.Sprintf("global log has %d entries after its base %d, its sequence says %d", rep.LogEntries, base, logB.Sequence())}
		}
		var prev []byte
		err := sessions.ForEach(func(k, v []byte) error {
			if !m.holds(k) || !m.holds(v) {
				return &CorruptError{Reason: "a sessions entry points outside the file (damaged leaf page)"}
			}
			if len(k) != 16 {
				return &CorruptError{Reason: "stray key " + m.text(k) + " in sessions"}
			}
			if !ascending(&prev, k) {
				return &CorruptError{Session: uuid.UUID(k), Reason: "sessions keys out of order (damaged page)"}
			}
			sid := uuid.UUID(k)
			at = recPos{sid: sid}
			if done[sid] {
				return nil
			}
			var h head
			if !parseHead(sid, v, &h) {
				return &CorruptError{Session: sid, Reason: "undecodable head"}
			}
			var have uint64
			if s := open[sid]; s != nil {
				have = s.chk.info.LastSeq
			}
			return &CorruptError{Session: sid, Seq: have + 1, Reason: fmt.Sprintf("head says %d events, the log holds %d", h.info.LastSeq, have)}
		})
		if err != nil {
			return err
		}
		at, prev = recPos{}, nil
		return index.ForEach(func(k, _ []byte) error {
			if !m.holds(k) {
				return &CorruptError{Reason: "an index entry points outside the file (damaged leaf page)"}
			}
			if !ascending(&prev, k) {
				return &CorruptError{Reason: "index keys out of order at " + m.text(k) + " (damaged page)"}
			}
			if sid, _, ok := parseIndexKey(k); !ok || !done[sid] {
				return &CorruptError{Reason: "index segment " + m.text(k) + " of no session"}
			}
			return nil
		})
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", corruptAt(err, at.sid, at.seq, at.gpos))
	}
	return rep, nil
}

// checkIndex checks that a session's index, its sealed segments and the
// open segment of its head h, points at exactly the positions found. c
// and seek are cursors on index/ in a read transaction that may use m.
func checkIndex(m mapped, c, seek *bolt.Cursor, h *head, found []run) error {
	sid := h.info.Session
	var stored []run
	seq := uint64(1)
	var kb [indexKeyLen]byte
	for k, v := c.Seek(indexKey(&kb, sid, 0)); ; k, v = c.Next() {
		if !m.holds(k) || !m.holds(v) {
			return &CorruptError{Session: sid, Seq: seq, Reason: "an index entry points outside the file (damaged leaf page)"}
		}
		ksid, kseq, ok := parseIndexKey(k)
		if !ok || ksid != sid {
			break
		}
		if sk, _ := seek.Seek(k); !bytes.Equal(sk, k) {
			return &CorruptError{Session: sid, Seq: kseq, Reason: "a seek for index segment " + m.text(k) + " lands on " + m.text(sk) + " (damaged branch page)"}
		}
		n := len(stored)
		var good bool
		if stored, good = parseRuns(v, stored); !good || len(stored) == n || kseq != seq {
			return &CorruptError{Session: sid, Seq: seq, Reason: fmt.Sprintf("index segment at seq %d is damaged or misplaced", kseq)}
		}
		seq += runsEvents(stored[n:])
	}
	if seq != h.openSeq {
		return &CorruptError{Session: sid, Seq: seq, Reason: fmt.Sprintf("index segments end before seq %d, the open segment starts at %d", seq, h.openSeq)}
	}
	if !sameRuns(append(stored, h.runs...), found) {
		return &CorruptError{Session: sid, Seq: h.info.LastSeq, Reason: "index does not point at the session's records"}
	}
	return nil
}

// checkMeta checks meta/format and meta/codec and the top-level buckets.
func checkMeta(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("%w: no meta bucket", ErrNotJournal)
	}
	mp := mappedOf(tx)
	var format uint64
	for _, m := range []struct {
		key []byte
		max uint64
	}{{keyFormat, FormatVersion}, {keyCodec, CodecVersion}} {
		v := meta.Get(m.key)
		if !mp.holds(v) {
			return fmt.Errorf("%w: meta/%s points outside the file (damaged page)", ErrCorrupt, m.key)
		}
		n, err := parseVersion(v)
		if err != nil {
			return fmt.Errorf("%w: meta/%s is %s", ErrNotJournal, m.key, mp.quote(v))
		}
		if n > m.max {
			return fmt.Errorf("%w: meta/%s is %d, this build reads up to %d", ErrNewerFormat, m.key, n, m.max)
		}
		if m.max == FormatVersion {
			format = n
		}
	}
	if format < FormatVersion {
		return fmt.Errorf("%w: meta/format is %d, an unreleased layout this build does not read (it reads %d)", ErrNotJournal, format, FormatVersion)
	}
	for _, name := range [][]byte{bucketLog, bucketSessions, bucketIndex} {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("%w: no %s bucket", ErrNotJournal, name)
		}
	}
	return checkBase(tx)
}

// checker recomputes one session's summary from its records, checking
// each on the way. Both backends' Verify use it.
type checker struct {
	sum  hash.Hash
	info SessionInfo
}

func newChecker() *checker { return &checker{sum: sha256.New()} }

func (c *checker) reset(sid uuid.UUID) { c.info = SessionInfo{Session: sid} }

// record checks e, decoded from rec, as the session's next event.
func (c *checker) record(e events.Event, rec []byte) error {
	sid := c.info.Session
	if want := c.info.LastSeq + 1; e.Seq != want {
		return &CorruptError{Session: sid, Seq: want, GPos: e.GPos, Reason: fmt.Sprintf("seq gap: next stored seq is %d", e.Seq)}
	}
	if e.GPos <= c.info.LastGPos {
		return &CorruptError{Session: sid, Seq: e.Seq, GPos: e.GPos, Reason: "global position not increasing"}
	}
	c.sum.Reset()
	c.sum.Write(c.info.Head[:])
	c.sum.Write(rec)
	c.sum.Sum(c.info.Head[:0])
	if c.info.FirstGPos == 0 {
		c.info.FirstGPos, c.info.FirstTime = e.GPos, e.Time
	}
	c.info.LastSeq, c.info.LastGPos, c.info.LastTime = e.Seq, e.GPos, e.Time
	return nil
}

// finish compares the recomputed summary with the stored head.
func (c *checker) finish(head SessionInfo, ok bool) error {
	got := c.info
	switch {
	case !ok:
		return &CorruptError{Session: got.Session, Seq: got.LastSeq, Reason: "missing or undecodable head"}
	case got.LastSeq == 0:
		return &CorruptError{Session: got.Session, Reason: "empty stream"}
	case !bytes.Equal(head.Head[:], got.Head[:]):
		return &CorruptError{Session: got.Session, Seq: got.LastSeq, GPos: got.LastGPos,
			Reason: fmt.Sprintf("hash chain %x does not match head %x (head says last seq %d)", got.Head[:8], head.Head[:8], head.LastSeq)}
	case head != got:
		return &CorruptError{Session: got.Session, Seq: got.LastSeq, GPos: got.LastGPos,
			Reason: fmt.Sprintf("head %+v does not match records %+v", head, got)}
	}
	return nil
}
