package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

var t0 = time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC)

func ev(server string, n int) events.Event {
	return events.New(t0.Add(time.Duration(n)*time.Millisecond), server, &events.PingFailed{Attempt: n, Consecutive: 1})
}

func TestRunsEncoding(t *testing.T) {
	for _, runs := range [][]run{
		nil,
		{{1, 1}},
		{{1, 5}, {7, 1}, {9, 300}, {1 << 40, 2}, {1<<40 + 3, 1 << 33}},
		{{127, 1}, {256, 128}, {1000, 500}, {1600, 1}}, // gaps and counts at a varint's byte boundary
	} {
		b := appendRuns(nil, runs)
		if len(b) != runsLen(runs) {
			t.Errorf("runsLen = %d, encoding has %d bytes", runsLen(runs), len(b))
		}
		got, ok := parseRuns(b, nil)
		if !ok || !slices.Equal(got, runs) {
			t.Errorf("parseRuns(appendRuns(%v)) = %v, %v", runs, got, ok)
		}
	}
	for name, b := range map[string][]byte{
		"zero count":   {1, 0},
		"touching":     {1, 2, 0, 1},
		"truncated":    {1},
		"bad varint":   {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1},
		"zero first":   {0, 1},
		"overflowing":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02, 1},
		"gpos wraps 2": {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x05},
	} {
		if runs, ok := parseRuns(b, nil); ok {
			t.Errorf("%s: parseRuns(%x) = %v, want failure", name, b, runs)
		}
	}
	if runs := addRun(addRun(addRun(nil, 3), 4), 6); !slices.Equal(runs, []run{{3, 2}, {6, 1}}) {
		t.Errorf("addRun: %v", runs)
	}
}

func TestHeadEncoding(t *testing.T) {
	sid := events.NewID()
	h := head{info: SessionInfo{Session: sid, LastSeq: 9, FirstGPos: 3, LastGPos: 40, FirstTime: -5, LastTime: 7, Head: [32]byte{1, 2, 3}},
		openSeq: 6, runs: []run{{30, 2}, {38, 2}}}
	b := appendHead(nil, &h)
	if len(b) != headLen {
		t.Fatalf("head is %d bytes, want %d", len(b), headLen)
	}
	// appendHead appends: after a prefix, the same bytes.
	if got := appendHead([]byte("prefix"), &h); string(got[:6]) != "prefix" || string(got[6:]) != string(b) {
		t.Errorf("appendHead after a prefix = %q…, want the prefix and the %d bytes of the head", got[:min(len(got), 12)], headLen)
	}
	var got head
	if !parseHead(sid, b, &got) || got.info != h.info || got.openSeq != 6 || !slices.Equal(got.runs, h.runs) {
		t.Fatalf("parseHead = %+v", got)
	}
	if info, ok := parseInfo(sid, b); !ok || info != h.info {
		t.Fatalf("parseInfo = %+v, %v", info, ok)
	}
	h.runs = h.runs[:1] // runs must cover openSeq..LastSeq
	if parseHead(sid, appendHead(nil, &h), &got) {
		t.Error("parseHead took a head whose runs miss events")
	}
	if parseHead(sid, b[:headLen-1], &got) {
		t.Error("parseHead took a short head")
	}
	// A session has a head once it has events: a head of none is damage.
	empty := head{info: SessionInfo{Session: sid}, openSeq: 1}
	if _, ok := parseInfo(sid, appendHead(nil, &empty)); ok {
		t.Error("parseInfo took a head of no events")
	}
	if parseHead(sid, appendHead(nil, &empty), &got) {
		t.Error("parseHead took a head of no events")
	}
	// A head holds runs of up to runsCap bytes: 64 runs of 2 bytes.
	var full []run
	for i := range runsCap / 2 {
		full = append(full, run{uint64(2*i + 1), 1})
	}
	if !fitsHead(full) {
		t.Fatalf("%d bytes of runs do not fit in a head", runsLen(full))
	}
	h = head{info: SessionInfo{Session: sid, LastSeq: uint64(len(full)), FirstGPos: 1, LastGPos: full[len(full)-1].gpos}, openSeq: 1, runs: full}
	if !parseHead(sid, appendHead(nil, &h), &got) || !slices.Equal(got.runs, full) {
		t.Errorf("a head with %d bytes of runs does not parse back", runsLen(full))
	}
	if fitsHead(append(full, run{1000, 1})) {
		t.Errorf("%d bytes of runs fit in a head", runsLen(full)+2)
	}
}

// interleave appends to n sessions in turn, one to five events per
// append, so that every append starts a new run in its session's index
// and segments get sealed. It returns each session's events as appended.
func interleave(t *testing.T, j *Journal, n, perSession int) map[uuid.UUID][]events.Event {
	t.Helper()
	want := map[uuid.UUID][]events.Event{}
	sids := make([]uuid.UUID, n)
	for i := range sids {
		sids[i] = events.NewID()
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	for left := n * perSession; left > 0; {
		for i, sid := range sids {
			k := len(want[sid])
			evs := make([]events.Event, min(1+rng.IntN(5), perSession-k))
			if len(evs) == 0 {
				continue
			}
			for x := range evs {
				evs[x] = ev("s"+strconv.Itoa(i), k+x)
			}
			res, err := j.Append(context.Background(), sid, Exact(uint64(k)), evs)
			if err != nil {
				t.Fatal(err)
			}
			want[sid] = append(want[sid], res.Events...)
			left -= len(evs)
		}
	}
	return want
}

// TestIndexSegments reads interleaved sessions back from every kind of
// starting seq: in a sealed segment, at a segment's first seq, in the
// open segment, past the end.
func TestIndexSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := t.Context()
	const sessions, perSession = 4, 400
	want := interleave(t, j, sessions, perSession)

	starts := map[uuid.UUID][]uint64{}
	_ = j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketIndex).ForEach(func(k, _ []byte) error {
			sid, seq, _ := parseIndexKey(k)
			starts[sid] = append(starts[sid], seq)
			return nil
		})
	})
	errEnough := errors.New("enough")
	for sid, evs := range want {
		if len(starts[sid]) < 2 {
			t.Fatalf("session %s has %d sealed index segments, want several", sid, len(starts[sid]))
		}
		// From 1, the whole session; from elsewhere, the first events,
		// enough to cross into the next segment from a segment's last seq.
		froms := []uint64{1, 0, 2, perSession / 2, perSession - 1, perSession, perSession + 1, 5000}
		for _, s := range starts[sid] {
			froms = append(froms, s-1, s, s+1)
		}
		for _, from := range froms {
			exp := evs[min(max(from, 1)-1, uint64(len(evs))):]
			if from != 1 {
				exp = exp[:min(len(exp), 3)]
			}
			var got []events.Event
			if err := j.ReadSession(ctx, sid, from, func(e events.Event) error {
				if got = append(got, e); len(got) == len(exp) && from != 1 {
					return errEnough
				}
				return nil
			}); err != nil && !errors.Is(err, errEnough) {
				t.Fatalf("ReadSession(%d): %v", from, err)
			}
			if len(got) != len(exp) {
				t.Fatalf("ReadSession(%s, %d): %d events, want %d", sid, from, len(got), len(exp))
			}
			for i := range got {
				if got[i].ID != exp[i].ID || got[i].Seq != exp[i].Seq || got[i].GPos != exp[i].GPos {
					t.Fatalf("ReadSession(%d)[%d] = seq %d gpos %d, want seq %d gpos %d", from, i, got[i].Seq, got[i].GPos, exp[i].Seq, exp[i].GPos)
				}
			}
		}
	}
	if rep, err := j.Verify(ctx); err != nil || rep.Sessions != sessions || rep.Events != sessions*perSession {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// damage runs fn in a write transaction on the journal file at path.
func damage(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true}) // the damage need not survive a crash
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyIndex: Verify finds an index that does not point at the
// session's records, and reads report it.
func TestVerifyIndex(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "j.db")
	j, err := Open(src, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	want := interleave(t, j, 4, 300)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var sid uuid.UUID
	for s := range want {
		sid = s
	}
	firstSegment := func(tx *bolt.Tx) ([]byte, []byte) {
		var kb [indexKeyLen]byte
		k, v := tx.Bucket(bucketIndex).Cursor().Seek(indexKey(&kb, sid, 0))
		if s, _, ok := parseIndexKey(k); !ok || s != sid {
			t.Fatal("no sealed segment")
		}
		return k, v
	}
	for name, fn := range map[string]func(tx *bolt.Tx) error{
		"segment deleted": func(tx *bolt.Tx) error {
			k, _ := firstSegment(tx)
			return tx.Bucket(bucketIndex).Delete(k)
		},
		"segment points elsewhere": func(tx *bolt.Tx) error {
			k, v := firstSegment(tx)
			runs, _ := parseRuns(v, nil)
			runs[0].gpos++ // still one event each, but shifted
			if len(runs) > 1 && runs[0].gpos+runs[0].count >= runs[1].gpos {
				runs[0].gpos -= 2
			}
			return tx.Bucket(bucketIndex).Put(k, appendRuns(nil, runs))
		},
		"later run points elsewhere": func(tx *bolt.Tx) error {
			k, v := firstSegment(tx)
			runs, _ := parseRuns(v, nil)
			runs[len(runs)-1].gpos++ // the first position and the counts stay
			return tx.Bucket(bucketIndex).Put(k, appendRuns(nil, runs))
		},
		"stray segment": func(tx *bolt.Tx) error {
			var kb [indexKeyLen]byte
			return tx.Bucket(bucketIndex).Put(indexKey(&kb, events.NewID(), 1), appendRuns(nil, []run{{1, 1}}))
		},
		"head lost": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSessions).Delete(sid[:])
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			copyFile(t, src, path)
			damage(t, path, fn)
			j, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			_, err = j.Verify(t.Context())
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify = %v, want ErrCorrupt", err)
			}
			t.Log(err)
			if name == "stray segment" {
				return
			}
			n := 0
			err = j.ReadSession(t.Context(), sid, 1, func(e events.Event) error {
				if e.Session != sid || e.Seq != uint64(n+1) {
					t.Fatalf("ReadSession delivered %s seq %d at position %d", e.Session, e.Seq, n+1)
				}
				n++
				return nil
			})
			if err == nil {
				t.Fatalf("ReadSession of a damaged index delivered %d events and no error", n)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	db, err := bolt.Open(from, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error { return tx.CopyFile(to, 0o600) }); err != nil {
		t.Fatal(err)
	}
}

// TestAfterFailedCommit: after a commit fails (ErrFull), the writer goes
// on from what the file holds: later appends to the same sessions, and
// retries of acknowledged ones, are right, and the journal verifies.
func TestAfterFailedCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	var log bytes.Buffer
	j, err := Open(path, &Options{MaxSize: 256 << 10, NoSync: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := t.Context()
	a, b := events.NewID(), events.NewID()
	var last AppendResult
	for i := 0; ; i++ {
		sid := a
		if i%2 == 1 {
			sid = b
		}
		evs := make([]events.Event, 20)
		for k := range evs {
			evs[k] = ev("s", i*20+k)
		}
		res, err := j.Append(ctx, sid, Any, evs)
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sid == a {
			last = res
		}
	}
	// The failed commit, and it alone, is logged as an error.
	if got := strings.Count(log.String(), "level=ERROR msg=commit"); got != 1 {
		t.Errorf("%d commits logged as failed, want 1:\n%s", got, log.String())
	}
	if res, err := j.Append(ctx, a, Any, last.Events); err != nil || !res.Duplicate {
		t.Fatalf("retry after ErrFull = %+v, %v", res, err)
	}
	ok := 0
	for i := range 50 {
		if _, err := j.Append(ctx, []uuid.UUID{a, b}[i%2], Any, []events.Event{ev("s", i)}); err == nil {
			ok++
		} else if !errors.Is(err, ErrFull) {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 50 small appends fitted after ErrFull", ok)
	if _, err := j.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// TestSubmitThenAppend: an Append never overtakes an earlier Submit of
// the same goroutine, even when it could commit directly (the runtime's
// AppendLater, then Append with an Exact expectation, relies on it).
func TestSubmitThenAppend(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := t.Context()
	sid := events.NewID()
	var seq uint64
	for i := range 200 {
		var pend []*Pending
		for range i % 4 {
			pend = append(pend, j.Submit(sid, Exact(seq), []events.Event{ev("s", i)}))
			seq++
		}
		if _, err := j.Append(ctx, sid, Exact(seq), []events.Event{ev("s", i)}); err != nil {
			t.Fatalf("round %d: Append after %d Submits: %v", i, len(pend), err)
		}
		seq++
		for _, p := range pend {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rep, err := j.Verify(ctx); err != nil || rep.Events != seq {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// TestIndexRunAcrossSeal: when a session's open index segment is sealed
// and its next append lands right after its last event, the run of
// positions continues across the two segments; reads and Verify take it
// as one.
func TestIndexRunAcrossSeal(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := t.Context()
	a, b := events.NewID(), events.NewID()
	sealed := func() bool {
		var ok bool
		_ = j.db.View(func(tx *bolt.Tx) error {
			var kb [indexKeyLen]byte
			k, _ := tx.Bucket(bucketIndex).Cursor().Seek(indexKey(&kb, a, 0))
			sid, _, _ := parseIndexKey(k)
			ok = sid == a
			return nil
		})
		return ok
	}
	n := 0
	for { // a's appends alternate with b's: a run each
		if _, err := j.Append(ctx, a, Any, []events.Event{ev("s", n)}); err != nil {
			t.Fatal(err)
		}
		n++
		if sealed() {
			break
		}
		if _, err := j.Append(ctx, b, Any, []events.Event{ev("s", n)}); err != nil {
			t.Fatal(err)
		}
		if n > 1000 {
			t.Fatal("a's index segment was never sealed")
		}
	}
	// a's open segment is empty: every event is in sealed segments.
	if info, err := j.Head(ctx, a); err != nil || info.LastSeq != uint64(n) {
		t.Fatalf("Head right after the seal = %+v, %v", info, err)
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Fatalf("Verify right after the seal: %v", err)
	}
	// a's last event ends the sealed segment; these follow it directly.
	for i := range 2 {
		if _, err := j.Append(ctx, a, Any, []events.Event{ev("s", n+i)}); err != nil {
			t.Fatal(err)
		}
	}
	var seqs uint64
	if err := j.ReadSession(ctx, a, 1, func(e events.Event) error {
		if seqs++; e.Seq != seqs {
			t.Fatalf("seq %d at position %d", e.Seq, seqs)
		}
		return nil
	}); err != nil || seqs != uint64(n+2) {
		t.Fatalf("ReadSession read %d events (%v), want %d", seqs, err, n+2)
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// TestIndexManySegments: a session whose index spans several sealed
// segments reads whole across them, in chunks that end inside a segment;
// with a middle segment gone, a read from its first seq reports that no
// segment holds it.
func TestIndexManySegments(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := t.Context()
	a, b := events.NewID(), events.NewID()
	segments := func() []uint64 {
		var starts []uint64
		_ = j.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketIndex).Cursor()
			var kb [indexKeyLen]byte
			for k, _ := c.Seek(indexKey(&kb, a, 0)); k != nil; k, _ = c.Next() {
				sid, seq, _ := parseIndexKey(k)
				if sid != a {
					break
				}
				starts = append(starts, seq)
			}
			return nil
		})
		return starts
	}
	var n uint64
	for len(segments()) < 3 { // runs of 4 of a's events between b's
		evs := make([]events.Event, 4)
		for i := range evs {
			evs[i] = ev("a", int(n)+i)
		}
		if _, err := j.Append(ctx, a, Any, evs); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, b, Any, []events.Event{ev("b", int(n))}); err != nil {
			t.Fatal(err)
		}
		n += 4
	}
	starts := segments()
	if starts[2] <= readChunk {
		t.Fatalf("a's third segment starts at seq %d, inside the first read chunk", starts[2])
	}
	var got uint64
	if err := j.ReadSession(ctx, a, 1, func(e events.Event) error {
		if got++; e.Seq != got {
			t.Fatalf("seq %d at position %d", e.Seq, got)
		}
		return nil
	}); err != nil || got != n {
		t.Fatalf("ReadSession read %d of %d events: %v", got, n, err)
	}

	// From inside the last run of the last sealed segment: the read
	// leaves the sealed segments for the open one there.
	var h head
	if err := j.db.View(func(tx *bolt.Tx) error { _, err := loadHead(tx.Bucket(bucketSessions), a, &h); return err }); err != nil {
		t.Fatal(err)
	}
	from := h.openSeq - 2
	got = from - 1
	if err := j.ReadSession(ctx, a, from, func(e events.Event) error {
		if got++; e.Seq != got {
			t.Fatalf("from %d: seq %d at position %d", from, e.Seq, got)
		}
		return nil
	}); err != nil || got != n {
		t.Fatalf("ReadSession from %d (the open segment starts at %d) read to seq %d of %d: %v", from, h.openSeq, got, n, err)
	}

	err = j.db.Update(func(tx *bolt.Tx) error {
		var kb [indexKeyLen]byte
		return tx.Bucket(bucketIndex).Delete(indexKey(&kb, a, starts[1]))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = j.ReadSession(ctx, a, starts[1], func(events.Event) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Seq != starts[1] || ce.Reason != "index has no segment for the seq" {
		t.Fatalf("ReadSession from the first seq of a deleted segment: %v, want no segment for seq %d", err, starts[1])
	}
}
