package store_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// salvageSource writes the journal the probe damaged: a first session
// of 100 events, then three sessions interleaved in commits of 1-7
// events, and returns every session's events as stored, and the log.
func salvageSource(t *testing.T, path string) (map[uuid.UUID][]events.Event, []events.Event) {
	t.Helper()
	j := mustOpen(t, path, noSync())
	first := events.NewID()
	if _, err := j.Append(t.Context(), first, store.NoStream, evs(100)); err != nil {
		t.Fatal(err)
	}
	sids := []uuid.UUID{events.NewID(), events.NewID(), events.NewID()}
	for round := range 150 {
		if round == 75 { // a record on overflow pages
			big := events.New(testTime, "big", &events.PingFailed{Attempt: 1, Error: strings.Repeat("overflow ", 2000)})
			if _, err := j.Append(t.Context(), sids[0], store.Any, []events.Event{big}); err != nil {
				t.Fatal(err)
			}
		}
		for i, sid := range sids {
			batch := make([]events.Event, 1+(round+i)%7)
			for k := range batch {
				batch[k] = storetest.Event("server-"+sid.String()[:4], round*10+k, testTime.Add(time.Duration(round*10+k)))
			}
			if _, err := j.Append(t.Context(), sid, store.Any, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	log := readAll(t, j)
	j.Close()
	bySession := map[uuid.UUID][]events.Event{}
	for _, e := range log {
		bySession[e.Session] = append(bySession[e.Session], e)
	}
	return bySession, log
}

// salvaged runs Salvage from src into a new file, checking that src is
// unchanged, and returns the report and every session's events in the
// new journal (which Salvage verified; verified again here), and its log.
func salvaged(t *testing.T, src string) (store.SalvageReport, map[uuid.UUID][]events.Event, []events.Event) {
	t.Helper()
	before, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := src + ".salvaged"
	rep, err := store.Salvage(t.Context(), src, dst, nil)
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	if after, _ := os.ReadFile(src); !bytes.Equal(before, after) {
		t.Error("Salvage changed the damaged file")
	}
	j := mustOpen(t, dst, &store.Options{ReadOnly: true})
	defer j.Close()
	if _, err := j.Verify(t.Context()); err != nil {
		t.Fatalf("Verify of the salvaged journal: %v", err)
	}
	log := readAll(t, j)
	out := map[uuid.UUID][]events.Event{}
	for _, e := range log {
		out[e.Session] = append(out[e.Session], e)
	}
	if rep.Verified.Events != uint64(len(log)) || rep.Events != uint64(len(log)) {
		t.Errorf("the report says %d events copied, %d verified; the new journal holds %d", rep.Events, rep.Verified.Events, len(log))
	}
	return rep, out, log
}

// samePrefix checks that got is want's first len(got) events, as the
// journal returns them but for their global positions.
func samePrefix(t *testing.T, sid uuid.UUID, got, want []events.Event) {
	t.Helper()
	if len(got) > len(want) {
		t.Fatalf("session %s: %d events salvaged, it had %d", sid, len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		g.GPos, w.GPos = 0, 0
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("session %s event %d:\n got %+v\nwant %+v", sid, i, g, w)
		}
	}
}

// checkSalvage checks the report and the new journal against the
// original sessions: each session keeps a prefix of its events, the
// report says which, and the new log keeps the old log's order.
func checkSalvage(t *testing.T, rep store.SalvageReport, got map[uuid.UUID][]events.Event, log []events.Event, orig map[uuid.UUID][]events.Event, origLog []events.Event) {
	t.Helper()
	reported := map[uuid.UUID]store.SalvagedSession{}
	for _, s := range rep.PerSession {
		reported[s.Session] = s
	}
	for sid, want := range orig {
		s := reported[sid]
		samePrefix(t, sid, got[sid], want)
		if s.Kept != uint64(len(got[sid])) {
			t.Errorf("session %s: the report says %d kept, the journal holds %d", sid, s.Kept, len(got[sid]))
		}
		switch {
		case s.FirstLost != 0 && s.FirstLost != s.Kept+1:
			t.Errorf("session %s: first lost %d after %d kept", sid, s.FirstLost, s.Kept)
		case s.FirstLost != 0 && s.Reason == "":
			t.Errorf("session %s: seq %d lost without a reason", sid, s.FirstLost)
		case s.HeadSeq != 0 && s.HeadSeq != uint64(len(want)):
			t.Errorf("session %s: head seq %d reported, it had %d events", sid, s.HeadSeq, len(want))
		case s.HeadSeq == uint64(len(want)) && s.Kept < s.HeadSeq && s.FirstLost == 0:
			t.Errorf("session %s: %d of %d kept, and no loss reported", sid, s.Kept, s.HeadSeq)
		}
	}
	// The new log keeps the old order: its (session, seq) pairs are a
	// subsequence of the old log's, numbered from 1.
	i := 0
	for n, e := range log {
		if e.GPos != uint64(n+1) {
			t.Fatalf("new log entry %d has gpos %d", n, e.GPos)
		}
		for i < len(origLog) && (origLog[i].Session != e.Session || origLog[i].Seq != e.Seq) {
			i++
		}
		if i == len(origLog) {
			t.Fatalf("new log entry %d (session %s seq %d) is out of the old log's order", n, e.Session, e.Seq)
		}
	}
}

func TestSalvageIntact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	orig, origLog := salvageSource(t, path)
	rep, got, log := salvaged(t, path)
	checkSalvage(t, rep, got, log, orig, origLog)
	if len(log) != len(origLog) || rep.Lost != 0 || rep.Gone != 0 || rep.Sessions != 4 || len(rep.PerSession) != 4 {
		t.Errorf("an intact journal: %d of %d events, report %+v", len(log), len(origLog), rep)
	}
	for _, s := range rep.PerSession {
		if s.FirstLost != 0 || s.Reason != "" || s.Stranded != 0 || s.HeadSeq != s.Kept {
			t.Errorf("an intact session reported %+v", s)
		}
	}
	for i := range log {
		if log[i].Session != origLog[i].Session || log[i].Seq != origLog[i].Seq {
			t.Fatalf("log entry %d is session %s seq %d, was %s seq %d", i, log[i].Session, log[i].Seq, origLog[i].Session, origLog[i].Seq)
		}
	}
	if leaves := leafPages(t, path); rep.Pages != leaves || rep.Source != path || rep.Target != path+".salvaged" {
		t.Errorf("report %+v; want %d leaf pages read", rep, leaves)
	}
}

// TestSalvageTruncated: the probe's journal cut to half its size, which
// no command reads: every event of its first session is still in the
// file, and salvage copies it, with a prefix of every other session.
func TestSalvageTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	orig, origLog := salvageSource(t, path)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	used := usedSize(t, path)
	if err := os.Truncate(path, used/2); err != nil {
		t.Fatal(err)
	}
	if j, err := store.Open(path, &store.Options{ReadOnly: true}); !errors.Is(err, store.ErrCorrupt) {
		if j != nil {
			j.Close()
		}
		t.Fatalf("Open of the truncated file (%d of %d bytes): %v, want ErrCorrupt", used/2, info.Size(), err)
	}
	rep, got, log := salvaged(t, path)
	checkSalvage(t, rep, got, log, orig, origLog)
	first := origLog[0].Session
	if len(got[first]) != 100 {
		t.Errorf("the first session: %d of its 100 events salvaged", len(got[first]))
	}
	if len(log) == len(origLog) || rep.Lost == 0 {
		t.Errorf("half the file gone, and nothing lost: report %+v", rep)
	}
}

// TestSalvageRandomMiddle: 4 KiB of random bytes in the middle of the
// file: each session keeps its events up to the damage.
func TestSalvageRandomMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	orig, origLog := salvageSource(t, path)
	used := usedSize(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = rand.Read(data[used/2 : used/2+4096])
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, got, log := salvaged(t, path)
	checkSalvage(t, rep, got, log, orig, origLog)
	var stranded int
	for _, s := range rep.PerSession {
		stranded += s.Stranded
	}
	if len(log) == len(origLog) || rep.Lost == 0 || stranded == 0 {
		t.Errorf("a page of random bytes, and nothing lost or stranded: %d of %d events, report %+v", len(log), len(origLog), rep)
	}
}

// leafPages counts the leaf pages in use of the journal at path.
func leafPages(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n uint64
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if p.Type == "leaf" {
				n++
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// usedSize is the size of the pages in use of the journal at path (bbolt
// grows files in steps; the rest is zeros).
func usedSize(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var size int64
	_ = db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	return size
}

func TestSalvageRefusesExistingTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	salvageSource(t, path)
	dst := filepath.Join(dir, "out.db")
	if err := os.WriteFile(dst, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Salvage(t.Context(), path, dst, nil)
	if !errors.Is(err, store.ErrTargetExists) || !strings.Contains(err.Error(), dst) {
		t.Errorf("Salvage onto an existing file: %v, want ErrTargetExists naming it", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep me" {
		t.Errorf("the existing target now holds %q", b)
	}
	if _, err := store.Salvage(t.Context(), path, path, nil); !errors.Is(err, store.ErrTargetExists) {
		t.Errorf("Salvage onto itself: %v, want ErrTargetExists", err)
	}
	if _, err := store.Salvage(t.Context(), filepath.Join(dir, "none.db"), filepath.Join(dir, "n.db"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Salvage of a missing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "n.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Salvage left its target: %v", err)
	}
}

// TestSalvageBase: a journal's base state (after an archive) is kept when
// it reads; when it does not, it is reported lost, naming the archive.
func TestSalvageBase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	archiveJournal(t, path, 4, 20)
	mark := events.NewID()
	state := bytes.Repeat([]byte("base state "), 20)
	finish := func(r store.ArchiveResult) (uuid.UUID, []events.Event) {
		return mark, []events.Event{events.New(testTime, "", &events.JournalArchived{File: "a1.db", From: r.From, Through: r.Through})}
	}
	if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "a1.db"), 40, state, finish, nil); err != nil {
		t.Fatal(err)
	}
	src := mustOpen(t, path, &store.Options{ReadOnly: true})
	origLog := readAll(t, src)
	src.Close()

	rep, _, log := salvaged(t, path)
	if !rep.Base.Kept || rep.Base.GPos != 40 || rep.Base.Reason != "" || len(log) != len(origLog) {
		t.Fatalf("base: %+v, %d of %d events", rep.Base, len(log), len(origLog))
	}
	if rep.Checkpoints != 1 {
		t.Errorf("%d checkpoints found, want the one saved after the base", rep.Checkpoints)
	}
	j := mustOpen(t, path+".salvaged", &store.Options{ReadOnly: true})
	cps, err := j.Checkpoints(t.Context())
	j.Close()
	if err != nil || len(cps) != 1 || !cps[0].Base || cps[0].GPos != 40 || !bytes.Equal(cps[0].Data, state) {
		t.Fatalf("the salvaged journal's checkpoints: %+v, %v; want its base state only", cps, err)
	}
	if log[0].GPos != 41 {
		t.Errorf("the salvaged log starts at %d, want 41 (after its base)", log[0].GPos)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy of it (bbolt's free pages may hold stale ones).
	n := 0
	for at := bytes.Index(data, state); at >= 0; at = bytes.Index(data, state) {
		data[at+5] ^= 0xFF
		n++
	}
	if n == 0 {
		t.Fatal("the base state is not in the file")
	}
	damaged := filepath.Join(dir, "d.db")
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, _, log = salvaged(t, damaged)
	if rep.Base.Kept || rep.Base.GPos != 40 || !strings.Contains(rep.Base.Reason, "40 archived records") || rep.Base.Archive != "a1.db" {
		t.Errorf("a damaged base: %+v", rep.Base)
	}
	if len(log) != len(origLog) || log[0].GPos != 1 {
		t.Errorf("without its base: %d of %d events, from gpos %d", len(log), len(origLog), log[0].GPos)
	}
}

// TestSalvageLocked: Salvage waits LockTimeout (default
// DefaultLockTimeout) for a writer of the file to let go, then fails with
// ErrLocked and leaves no target behind.
func TestSalvageLocked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	j := mustOpen(t, path, noSync())
	defer j.Close()
	cases := []struct {
		opts     *store.SalvageOptions
		min, max time.Duration
	}{
		{&store.SalvageOptions{LockTimeout: 100 * time.Millisecond}, 0, store.DefaultLockTimeout - 100*time.Millisecond},
		{nil, store.DefaultLockTimeout - 100*time.Millisecond, time.Minute},
	}
	if testing.Short() { // the default timeout's wait (1 s) in the full tier only
		cases = cases[:1]
	}
	for _, c := range cases {
		dst := filepath.Join(dir, "out.db")
		start := time.Now()
		_, err := store.Salvage(t.Context(), path, dst, c.opts)
		took := time.Since(start)
		if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "stop the process writing to it first") {
			t.Errorf("Salvage of a file a writer holds: %v, want ErrLocked", err)
		}
		if took < c.min || took > c.max {
			t.Errorf("Salvage gave up after %v, want %v to %v", took, c.min, c.max)
		}
		if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused Salvage left its target: %v", err)
		}
	}
}
