package store

import (
	"bytes"
	"context"
	"crypto/sha256"
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

// Verify walks the whole journal in one read transaction and checks, per
// session in ID order and per record in seq order: the record's CRC, that
// it decodes, that seqs run gapless from 1, that the record names its own
// session and seq, that its global position and event ID are indexed
// back to it, and that the recomputed hash chain and summary equal the
// session's head. It then checks that every head has a stream and that
// the global log runs gapless from 1 to the number of events, each entry
// pointing at a stored record. The first problem found is returned as a
// [*CorruptError] (wrapping [ErrCorrupt]); the report counts what was
// checked up to it.
func (j *Journal) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	err := j.view(ctx, func(tx *bolt.Tx) error {
		if err := checkMeta(tx); err != nil {
			return err
		}
		streams, logB := tx.Bucket(bucketStreams), tx.Bucket(bucketLog)
		heads, ids := tx.Bucket(bucketHeads), tx.Bucket(bucketIDs)
		idx := index{
			log: func(gpos uint64) (uuid.UUID, uint64, bool) {
				var k [8]byte
				return parsePos(logB.Get(itob(&k, gpos)))
			},
			id: func(id uuid.UUID) (uuid.UUID, uint64, bool) { return parsePos(ids.Get(id[:])) },
		}
		chk := newChecker()
		c := streams.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if v != nil || len(k) != 16 {
				return &CorruptError{Reason: fmt.Sprintf("stray key %x in streams", k)}
			}
			sid := uuid.UUID(k)
			chk.reset(sid)
			sc := streams.Bucket(k).Cursor()
			for sk, sv := sc.First(); sk != nil; sk, sv = sc.Next() {
				seq, ok := btoi(sk)
				if !ok || sv == nil {
					return &CorruptError{Session: sid, Reason: fmt.Sprintf("stray key %x in stream", sk)}
				}
				if err := chk.record(seq, sv, idx); err != nil {
					return err
				}
				rep.Events++
			}
			hv := heads.Get(k)
			head, ok := parseHead(sid, hv)
			if err := chk.finish(head, hv != nil && ok); err != nil {
				return err
			}
			rep.Sessions++
		}
		err := heads.ForEach(func(k, _ []byte) error {
			if len(k) != 16 || streams.Bucket(k) == nil {
				return &CorruptError{Reason: fmt.Sprintf("head %x without a stream", k)}
			}
			return nil
		})
		if err != nil {
			return err
		}
		lc := logB.Cursor()
		for k, v := lc.First(); k != nil; k, v = lc.Next() {
			gpos, ok := btoi(k)
			if !ok || gpos != rep.LogEntries+1 {
				return &CorruptError{GPos: rep.LogEntries + 1, Reason: fmt.Sprintf("global log gap: next key is %x", k)}
			}
			sid, seq, ok := parsePos(v)
			if !ok {
				return &CorruptError{GPos: gpos, Reason: "undecodable log entry"}
			}
			var kb [8]byte
			if b := streams.Bucket(sid[:]); b == nil || b.Get(itob(&kb, seq)) == nil {
				return &CorruptError{Session: sid, Seq: seq, GPos: gpos, Reason: "log entry points at a missing record"}
			}
			rep.LogEntries++
		}
		if rep.LogEntries != rep.Events || logB.Sequence() != rep.Events {
			return &CorruptError{Reason: fmt.Sprintf("global log has %d entries (sequence %d) for %d events",
				rep.LogEntries, logB.Sequence(), rep.Events)}
		}
		if n := uint64(ids.Stats().KeyN); n != rep.Events {
			return &CorruptError{Reason: fmt.Sprintf("id index has %d entries for %d events", n, rep.Events)}
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	return rep, nil
}

// checkMeta checks meta/format and meta/codec and the top-level buckets.
func checkMeta(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("%w: no meta bucket", ErrNotJournal)
	}
	for _, m := range []struct {
		key []byte
		max uint64
	}{{keyFormat, FormatVersion}, {keyCodec, CodecVersion}} {
		v := meta.Get(m.key)
		n, err := parseVersion(v)
		if err != nil {
			return fmt.Errorf("%w: meta/%s is %q", ErrNotJournal, m.key, v)
		}
		if n > m.max {
			return fmt.Errorf("%w: meta/%s is %d, this build reads up to %d", ErrNewerFormat, m.key, n, m.max)
		}
	}
	for _, name := range [][]byte{bucketStreams, bucketLog, bucketHeads, bucketIDs} {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("%w: no %s bucket", ErrNotJournal, name)
		}
	}
	return nil
}

// index looks up the global log and the event ID index.
type index struct {
	log func(gpos uint64) (uuid.UUID, uint64, bool)
	id  func(id uuid.UUID) (uuid.UUID, uint64, bool)
}

// checker recomputes one session's summary from its records, checking
// each on the way. Both backends' Verify use it.
type checker struct {
	dec  *events.Decoder
	sum  hash.Hash
	info SessionInfo
}

func newChecker() *checker { return &checker{dec: events.NewDecoder(), sum: sha256.New()} }

func (c *checker) reset(sid uuid.UUID) { c.info = SessionInfo{Session: sid} }

// record checks the record stored under seq.
func (c *checker) record(seq uint64, rec []byte, idx index) error {
	sid := c.info.Session
	if want := c.info.LastSeq + 1; seq != want {
		return &CorruptError{Session: sid, Seq: want, Reason: fmt.Sprintf("seq gap: next stored seq is %d", seq)}
	}
	e, err := decode(c.dec, sid, seq, 0, rec)
	if err != nil {
		return err
	}
	if e.GPos <= c.info.LastGPos {
		return &CorruptError{Session: sid, Seq: seq, GPos: e.GPos, Reason: "global position not increasing"}
	}
	if lsid, lseq, ok := idx.log(e.GPos); !ok || lsid != sid || lseq != seq {
		return &CorruptError{Session: sid, Seq: seq, GPos: e.GPos, Reason: "global log does not point at the record"}
	}
	if isid, iseq, ok := idx.id(e.ID); !ok || isid != sid || iseq != seq {
		return &CorruptError{Session: sid, Seq: seq, GPos: e.GPos, Reason: fmt.Sprintf("event id %s not indexed to the record", e.ID)}
	}
	c.sum.Reset()
	c.sum.Write(c.info.Head[:])
	c.sum.Write(rec)
	c.sum.Sum(c.info.Head[:0])
	if c.info.FirstGPos == 0 {
		c.info.FirstGPos, c.info.FirstTime = e.GPos, e.Time
	}
	c.info.LastSeq, c.info.LastGPos, c.info.LastTime = seq, e.GPos, e.Time
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
