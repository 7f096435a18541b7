package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// twoSessions writes a journal of two sessions appended in interleaved
// commits: a's events 1-2 at gpos 1-2, b's 1-3 at gpos 3-5, a's 3 at
// gpos 6. It returns the closed journal's path.
func twoSessions(t *testing.T) (path string, a, b uuid.UUID) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a, b = events.NewID(), events.NewID()
	for _, app := range []struct {
		sid uuid.UUID
		n   int
	}{{a, 2}, {b, 3}, {a, 1}} {
		evs := make([]events.Event, app.n)
		for i := range evs {
			evs[i] = ev("s", 10*i+app.n)
		}
		if _, err := j.Append(t.Context(), app.sid, Any, evs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Verify(t.Context()); err != nil {
		t.Fatalf("Verify before the damage: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path, a, b
}

// verifyCorrupt runs Verify on the journal at path, which must fail with a
// *CorruptError, and returns it.
func verifyCorrupt(t *testing.T, path string) (*CorruptError, VerifyReport) {
	t.Helper()
	j, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rep, err := j.Verify(t.Context())
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify = %v, want a *CorruptError", err)
	}
	t.Log(err)
	return ce, rep
}

// rewriteHead replaces sid's head in a write transaction with what edit
// makes of it, keeping its open index segment.
func rewriteHead(t *testing.T, tx *bolt.Tx, sid uuid.UUID, edit func(h *head)) error {
	t.Helper()
	sessions := tx.Bucket(bucketSessions)
	var h head
	if ok, err := loadHead(sessions, sid, &h); !ok || err != nil {
		t.Fatalf("head of %s: %v, %v", sid, ok, err)
	}
	edit(&h)
	return sessions.Put(sid[:], appendHead(nil, &h))
}

// TestVerifySeqGap: a session whose stored seqs skip one (1, 2, 4) is
// reported at the missing seq, even when its head, hash chain included,
// was computed over those very records.
func TestVerifySeqGap(t *testing.T) {
	path, _, b := twoSessions(t)
	damage(t, path, func(tx *bolt.Tx) error {
		logB := tx.Bucket(bucketLog)
		var k [8]byte
		// b's third record (gpos 5) says seq 4.
		e, err := events.Decode(logB.Get(itob(&k, 5)))
		if err != nil {
			return err
		}
		e.Seq = 4
		rec, err := events.Encode(&e)
		if err != nil {
			return err
		}
		if err := logB.Put(itob(&k, 5), rec); err != nil {
			return err
		}
		// The head over b's records as stored: last seq 4, and the hash
		// chain over the three of them.
		var chain [32]byte
		var first, last events.Event
		for gpos := uint64(3); gpos <= 5; gpos++ {
			rec := logB.Get(itob(&k, gpos))
			e, err := events.Decode(rec)
			if err != nil {
				return err
			}
			if gpos == 3 {
				first = e
			}
			last = e
			chain = sha256.Sum256(append(chain[:], rec...))
		}
		return rewriteHead(t, tx, b, func(h *head) {
			h.info = SessionInfo{Session: b, LastSeq: 4, FirstGPos: 3, LastGPos: 5,
				FirstTime: first.Time, LastTime: last.Time, Head: chain}
			h.openSeq = 2 // the open segment still covers the three records
		})
	})
	ce, _ := verifyCorrupt(t, path)
	if ce.Session != b || ce.Seq != 3 || ce.GPos != 5 || !strings.Contains(ce.Reason, "seq gap") {
		t.Errorf("Verify blamed session %s seq %d gpos %d (%s), want %s seq 3 gpos 5, a seq gap", ce.Session, ce.Seq, ce.GPos, ce.Reason, b)
	}
}

// TestVerifyHeadSummary: a head whose first or last position or time
// disagrees with the session's records is reported, although its hash
// chain matches them.
func TestVerifyHeadSummary(t *testing.T) {
	src, a, b := twoSessions(t)
	for _, c := range []struct {
		name string
		sid  uuid.UUID
		edit func(s *SessionInfo)
	}{
		{"first gpos after the first record", b, func(s *SessionInfo) { s.FirstGPos++ }},
		{"first gpos before the first record", b, func(s *SessionInfo) { s.FirstGPos-- }},
		{"last gpos after the last record", a, func(s *SessionInfo) { s.LastGPos++ }},
		{"last gpos before the last record", a, func(s *SessionInfo) { s.LastGPos-- }},
		{"first time later", b, func(s *SessionInfo) { s.FirstTime++ }},
		{"first time earlier", a, func(s *SessionInfo) { s.FirstTime-- }},
		{"last time later", a, func(s *SessionInfo) { s.LastTime++ }},
		{"last time earlier", b, func(s *SessionInfo) { s.LastTime-- }},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			copyFile(t, src, path)
			damage(t, path, func(tx *bolt.Tx) error {
				return rewriteHead(t, tx, c.sid, func(h *head) { c.edit(&h.info) })
			})
			ce, _ := verifyCorrupt(t, path)
			if ce.Session != c.sid || !strings.Contains(ce.Reason, "does not match records") {
				t.Errorf("Verify blamed session %s (%s), want %s's head", ce.Session, ce.Reason, c.sid)
			}
		})
	}
}

// TestVerifyLogSequence: a log bucket whose sequence (the last gpos, the
// next append's base) is not its number of entries is reported.
func TestVerifyLogSequence(t *testing.T) {
	src, _, _ := twoSessions(t)
	for _, seq := range []uint64{5, 7, 0} {
		path := filepath.Join(t.TempDir(), "j.db")
		copyFile(t, src, path)
		damage(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketLog).SetSequence(seq) })
		ce, rep := verifyCorrupt(t, path)
		if rep.LogEntries != 6 || rep.Sessions != 2 || !strings.Contains(ce.Reason, "sequence") {
			t.Errorf("sequence %d: Verify = %+v, %v; want the log's 6 entries and 2 sessions checked, then its sequence reported", seq, rep, ce)
		}
	}
}

// TestMissingRecord: a record deleted from the log is reported by Verify
// as a gap in the log, and by ReadSession, after the events before it,
// at the seq and gpos the session's index gives it.
func TestMissingRecord(t *testing.T) {
	path, _, b := twoSessions(t)
	damage(t, path, func(tx *bolt.Tx) error {
		var k [8]byte
		return tx.Bucket(bucketLog).Delete(itob(&k, 4)) // b's seq 2
	})
	ce, _ := verifyCorrupt(t, path)
	if ce.GPos != 4 || !strings.Contains(ce.Reason, "global log gap") {
		t.Errorf("Verify blamed gpos %d (%s), want a gap at gpos 4", ce.GPos, ce.Reason)
	}
	j, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var seqs []uint64
	err = j.ReadSession(t.Context(), b, 1, func(e events.Event) error { seqs = append(seqs, e.Seq); return nil })
	if !errors.As(err, &ce) || ce.Session != b || ce.Seq != 2 || ce.GPos != 4 || !strings.Contains(ce.Reason, "missing record") {
		t.Fatalf("ReadSession = %v, want a missing record at seq 2 gpos 4", err)
	}
	if len(seqs) != 1 || seqs[0] != 1 {
		t.Errorf("ReadSession delivered seqs %v before the missing record, want [1]", seqs)
	}
}

// TestVerifyHeads: every head in sessions/ must be reached by the walk
// of the log with all its events: a head without records, one that
// claims more events than the log holds, and a key that is not a
// session's are reported.
func TestVerifyHeads(t *testing.T) {
	src, a, _ := twoSessions(t)
	stray := events.NewID()
	for _, c := range []struct {
		name   string
		damage func(tx *bolt.Tx) error
		sid    uuid.UUID
		seq    uint64
		reason string
	}{
		{"head without records", func(tx *bolt.Tx) error {
			h := head{info: SessionInfo{Session: stray, LastSeq: 2, FirstGPos: 7, LastGPos: 8}, openSeq: 1, runs: []run{{7, 2}}}
			return tx.Bucket(bucketSessions).Put(stray[:], appendHead(nil, &h))
		}, stray, 1, "head says 2 events, the log holds 0"},
		{"head with more events than the log", func(tx *bolt.Tx) error {
			return rewriteHead(t, tx, a, func(h *head) {
				h.info.LastSeq++
				h.runs = append(h.runs, run{10, 1})
			})
		}, a, 4, "head says 4 events, the log holds 3"},
		{"stray key", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSessions).Put([]byte("not a session id"[:15]), make([]byte, headLen))
		}, uuid.Nil, 0, "stray key 6e6f7420612073657373696f6e2069 in sessions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			copyFile(t, src, path)
			damage(t, path, c.damage)
			ce, rep := verifyCorrupt(t, path)
			if ce.Session != c.sid || ce.Seq != c.seq || ce.Reason != c.reason {
				t.Errorf("Verify blamed session %s seq %d: %q; want %s seq %d: %q", ce.Session, ce.Seq, ce.Reason, c.sid, c.seq, c.reason)
			}
			if rep.LogEntries != 6 {
				t.Errorf("Verify checked %d log entries, want all 6", rep.LogEntries)
			}
		})
	}
}

// endingCtx is a context whose Err is nil for its first n calls, and
// context.Canceled after: it ends in the middle of a call that checks it.
type endingCtx struct {
	context.Context
	n int
}

func (c *endingCtx) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestVerifyStopsWhenCtxEnds: Verify checks its context as it walks the
// log, before the first entry and every 1024 entries after: a context
// that ends stops it there with the context's error.
func TestVerifyStopsWhenCtxEnds(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs := make([]events.Event, 1500)
	for i := range evs {
		evs[i] = ev("a", i)
	}
	if _, err := j.Append(t.Context(), events.NewID(), NoStream, evs); err != nil {
		t.Fatal(err)
	}
	// The first Err is the read transaction's, before the walk.
	for _, c := range []struct {
		checks  int // before the context ends
		entries uint64
	}{{1, 0}, {2, 1024}} {
		rep, err := j.Verify(&endingCtx{t.Context(), c.checks})
		if !errors.Is(err, context.Canceled) || rep.LogEntries != c.entries {
			t.Errorf("Verify with a context that ends after %d checks = %+v, %v; want context.Canceled after %d entries", c.checks, rep, err, c.entries)
		}
	}
}

// TestReadAllNamesDamagedRecord: a record that fails its CRC says nothing
// of itself; ReadAll names its session and seq from the heads and
// indexes, for a session's first and last records too.
func TestReadAllNamesDamagedRecord(t *testing.T) {
	src, a, b := twoSessions(t)
	for _, c := range []struct {
		gpos uint64
		sid  uuid.UUID
		seq  uint64
	}{{1, a, 1}, {6, a, 3}, {3, b, 1}, {5, b, 3}, {4, b, 2}} {
		path := filepath.Join(t.TempDir(), "j.db")
		copyFile(t, src, path)
		damage(t, path, func(tx *bolt.Tx) error {
			logB := tx.Bucket(bucketLog)
			var k [8]byte
			rec := bytes.Clone(logB.Get(itob(&k, c.gpos)))
			rec[len(rec)/2] ^= 0x10
			return logB.Put(itob(&k, c.gpos), rec)
		})
		j, err := Open(path, &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		err = j.ReadAll(t.Context(), 1, func(events.Event) error { return nil })
		j.Close()
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.GPos != c.gpos || ce.Session != c.sid || ce.Seq != c.seq {
			t.Errorf("ReadAll over a damaged record at gpos %d: %v, want session %s seq %d", c.gpos, err, c.sid, c.seq)
		}
	}

	// A session of one event.
	path := filepath.Join(t.TempDir(), "one.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := events.NewID()
	if _, err := j.Append(t.Context(), sid, NoStream, []events.Event{ev("a", 1)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	damage(t, path, func(tx *bolt.Tx) error {
		logB := tx.Bucket(bucketLog)
		var k [8]byte
		rec := bytes.Clone(logB.Get(itob(&k, 1)))
		rec[len(rec)/2] ^= 0x10
		return logB.Put(itob(&k, 1), rec)
	})
	if j, err = Open(path, &Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	err = j.ReadAll(t.Context(), 1, func(events.Event) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Session != sid || ce.Seq != 1 {
		t.Errorf("ReadAll over the damaged record of a one-event session: %v, want session %s seq 1", err, sid)
	}
}
