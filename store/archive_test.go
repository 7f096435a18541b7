package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// archiveJournal writes sessions of n events each, one after the other,
// and returns their IDs.
func archiveJournal(t *testing.T, path string, sessions, n int) []uuid.UUID {
	t.Helper()
	j := mustOpen(t, path, noSync())
	var sids []uuid.UUID
	for range sessions {
		sid := events.NewID()
		if _, err := j.Append(t.Context(), sid, store.NoStream, evs(n)); err != nil {
			t.Fatal(err)
		}
		sids = append(sids, sid)
	}
	if err := j.SaveCheckpoint(uint64(sessions*n), []byte("newest")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	return sids
}

// archiveMark is what the tests' finish appends: one event in a session
// of its own.
func archiveMark(sid uuid.UUID) func(store.ArchiveResult) (uuid.UUID, []events.Event) {
	return func(r store.ArchiveResult) (uuid.UUID, []events.Event) {
		return sid, []events.Event{storetest.Event("archive", int(r.Through), testTime)}
	}
}

func sessionIDs(t *testing.T, j *store.Journal) []uuid.UUID {
	t.Helper()
	ss, err := j.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []uuid.UUID
	for _, s := range ss {
		out = append(out, s.Session)
	}
	return out
}

func readAll(t *testing.T, j *store.Journal) []events.Event {
	t.Helper()
	var out []events.Event
	if err := j.ReadAll(t.Context(), 0, func(e events.Event) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestArchive(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	sids := archiveJournal(t, path, 3, 40)
	func() { // a checkpoint at the cut: the base state replaces it
		j := mustOpen(t, path, noSync())
		defer j.Close()
		if err := j.SaveCheckpoint(80, []byte("at the cut")); err != nil {
			t.Fatal(err)
		}
	}()
	before := func() []events.Event {
		j := mustOpen(t, path, &store.Options{ReadOnly: true})
		defer j.Close()
		return readAll(t, j)
	}()
	mark := events.NewID()
	var steps []string
	res, err := store.Archive(ctx, path, filepath.Join(dir, "a1.db"), 80, []byte("base state"), archiveMark(mark),
		&store.ArchiveOptions{Chunk: 39, Step: func(s string) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 1 || res.Through != 80 || len(res.Sessions) != 2 || res.SizeAfter <= 0 || res.SizeBefore <= 0 {
		t.Errorf("result %+v", res)
	}
	// Three record chunks (39+39+2) into the archive, two (39+1) into the
	// live journal: every step reported, in order.
	want := []string{"heads", "records", "records", "records", "archive-verified", "archive-renamed",
		"heads", "records", "records", "live-written", "live-renamed"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}
	h := sha256.New()
	db, err := bolt.Open(filepath.Join(dir, "a1.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("log")).ForEach(func(_, v []byte) error { h.Write(v); return nil })
	})
	db.Close()
	if got := h.Sum(nil); !slices.Equal(got, res.Digest[:]) {
		t.Errorf("digest %x, want %x (the archived records' bytes)", res.Digest, got)
	}
	ad := mustOpen(t, filepath.Join(dir, "a1.db"), &store.Options{ReadOnly: true})
	if d, err := ad.Digest(ctx, 1, 80); err != nil || d != res.Digest {
		t.Errorf("Digest(1, 80) = %x, %v; want %x", d, err, res.Digest)
	}
	if d, err := ad.Digest(ctx, 2, 80); err != nil || d == res.Digest {
		t.Errorf("Digest(2, 80) = %x, %v: the same as of 1..80", d, err)
	}
	if _, err := ad.Digest(ctx, 1, 81); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Digest past the end: %v, want ErrCorrupt", err)
	}
	ad.Close()

	// The archive: a sealed journal of the two sessions, records unchanged.
	if _, err := store.Open(filepath.Join(dir, "a1.db"), nil); !errors.Is(err, store.ErrSealed) {
		t.Errorf("writable Open of the archive: %v, want ErrSealed", err)
	}
	a := mustOpen(t, filepath.Join(dir, "a1.db"), &store.Options{ReadOnly: true})
	if _, err := a.Verify(ctx); err != nil {
		t.Errorf("archive Verify: %v", err)
	}
	if got := sessionIDs(t, a); !slices.Equal(got, sortedIDs(sids[:2])) {
		t.Errorf("archive sessions %v, want %v", got, sids[:2])
	}
	if got := readAll(t, a); len(got) != 80 || got[79].ID != before[79].ID || got[79].GPos != 80 {
		t.Errorf("archive holds %d events", len(got))
	}
	if a.Base() != 0 || a.Sealed() == "" {
		t.Errorf("archive base %d, sealed %q", a.Base(), a.Sealed())
	}

	// The live journal: the third session and the mark, from gpos 81.
	j := mustOpen(t, path, noSync())
	if _, err := j.Verify(ctx); err != nil {
		t.Errorf("live Verify: %v", err)
	}
	if j.Base() != 80 || j.Sealed() != "" {
		t.Errorf("live base %d, sealed %q", j.Base(), j.Sealed())
	}
	if got := sessionIDs(t, j); !slices.Equal(got, sortedIDs([]uuid.UUID{sids[2], mark})) {
		t.Errorf("live sessions %v", got)
	}
	live := readAll(t, j)
	if len(live) != 41 || live[0].GPos != 81 || live[0].ID != before[80].ID || live[40].Session != mark || live[40].GPos != 121 {
		t.Fatalf("live holds %d events from gpos %d", len(live), live[0].GPos)
	}
	var followed []uint64
	fctx, cancel := context.WithCancel(ctx)
	_ = j.Follow(fctx, 1, func(e events.Event) error {
		followed = append(followed, e.GPos)
		if len(followed) == 41 {
			cancel()
		}
		return nil
	})
	if len(followed) != 41 || followed[0] != 81 {
		t.Errorf("Follow from 1 read %d events from %v", len(followed), followed[:1])
	}
	cps := checkpoints(t, j)
	if len(cps) != 2 || !cps[0].Base || cps[0].GPos != 80 || string(cps[0].Data) != "base state" || cps[1].GPos != 120 || cps[1].Base {
		t.Errorf("live checkpoints %+v: want the base state at 80, then the one at 120", cps)
	}
	// Appends continue after the last position; the file shrank.
	if r, err := j.Append(ctx, sids[2], store.Exact(40), evs(1)); err != nil || r.FirstGPos != 122 {
		t.Errorf("append after archiving: %+v, %v", r, err)
	}
	j.Close()
	if res.SizeAfter >= res.SizeBefore {
		t.Logf("live file %d bytes, was %d", res.SizeAfter, res.SizeBefore)
	}

	// A second archive continues from the first (its base is 80), and
	// takes everything: the live journal keeps no record.
	res2, err := store.Archive(ctx, path, filepath.Join(dir, "a2.db"), 122, []byte("second"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res2.From != 81 || res2.Through != 122 || len(res2.Sessions) != 2 {
		t.Errorf("second result %+v", res2)
	}
	a2 := mustOpen(t, filepath.Join(dir, "a2.db"), &store.Options{ReadOnly: true})
	if _, err := a2.Verify(ctx); err != nil || a2.Base() != 80 {
		t.Errorf("second archive: base %d, Verify %v", a2.Base(), err)
	}
	if cps := checkpoints(t, a2); len(cps) != 1 || string(cps[0].Data) != "base state" {
		t.Errorf("second archive's base state %+v, want the first's", cps)
	}
	j = mustOpen(t, path, &store.Options{ReadOnly: true})
	if _, err := j.Verify(ctx); err != nil || j.Base() != 122 || len(readAll(t, j)) != 0 || len(sessionIDs(t, j)) != 0 {
		t.Errorf("live after the second: base %d, Verify %v", j.Base(), err)
	}
	if cps := checkpoints(t, j); len(cps) != 1 || string(cps[0].Data) != "second" || !cps[0].Base {
		t.Errorf("live checkpoints %+v: only the base state", cps)
	}
	j.Close()
	j = mustOpen(t, path, noSync())
	if r, err := j.Append(ctx, events.NewID(), store.NoStream, evs(1)); err != nil || r.FirstGPos != 123 {
		t.Errorf("append to an emptied journal: %+v, %v", r, err)
	}
}

func sortedIDs(ids []uuid.UUID) []uuid.UUID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return out
}

func TestArchiveRefuses(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	archiveJournal(t, path, 2, 10)
	for _, through := range []uint64{0, 21, 5} {
		_, err := store.Archive(ctx, path, filepath.Join(dir, "x.db"), through, nil, nil, nil)
		if !errors.Is(err, store.ErrInvalid) || through != 5 && !strings.Contains(err.Error(), "the journal holds 1..20") {
			t.Errorf("through %d: %v, want ErrInvalid saying what the journal holds", through, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.db")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused archive left a file")
	}
	holder := mustOpen(t, path, noSync())
	if _, err := store.Archive(ctx, path, filepath.Join(dir, "x.db"), 10, nil, nil, &store.ArchiveOptions{LockTimeout: 50e6}); !errors.Is(err, store.ErrLocked) {
		t.Errorf("while held: %v, want ErrLocked", err)
	}
	holder.Close()
	// An archive file that is not a journal, or one already committed.
	if err := os.WriteFile(filepath.Join(dir, "junk.db"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Archive(ctx, path, filepath.Join(dir, "junk.db"), 10, nil, nil, nil); !errors.Is(err, store.ErrArchiveExists) {
		t.Errorf("onto a junk file: %v, want ErrArchiveExists", err)
	}
	if _, err := store.Archive(ctx, path, filepath.Join(dir, "a.db"), 10, []byte("b"), nil, nil); err != nil {
		t.Fatal(err)
	}
	// A temporary file left by an interrupted archive does not change that.
	for _, tmp := range []string{filepath.Join(dir, "a.db.tmp"), path + ".compact.tmp"} {
		if err := os.WriteFile(tmp, []byte("left over"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Archive(ctx, path, filepath.Join(dir, "a.db"), 20, []byte("b"), nil, nil); !errors.Is(err, store.ErrArchiveExists) {
			t.Errorf("onto a committed archive, with %s left over: %v, want ErrArchiveExists", filepath.Base(tmp), err)
		}
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left over: %v", filepath.Base(tmp), err)
		}
	}
	if _, err := store.Archive(ctx, path, filepath.Join(dir, "b.db"), 10, nil, nil, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("through the base again: %v, want ErrInvalid", err)
	}
}

// TestArchiveSessionAcrossCut: a session with records on both sides of
// the cut is refused.
func TestArchiveSessionAcrossCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	j := mustOpen(t, path, noSync())
	a, b := events.NewID(), events.NewID()
	for _, sid := range []uuid.UUID{a, b, a} {
		if _, err := j.Append(t.Context(), sid, store.Any, evs(5)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "a.db"), 10, nil, nil, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a session across the cut: %v, want ErrInvalid", err)
	}
}

// archiveChild archives the journal at path through gpos 60 in chunks of
// 5 records, and SIGKILLs itself at step number ARCHIVE_KILL_AT.
func archiveChild(path string) error {
	at, _ := strconv.Atoi(os.Getenv("ARCHIVE_KILL_AT"))
	n := 0
	_, err := store.Archive(context.Background(), path, filepath.Join(filepath.Dir(path), "archive.db"), 60, []byte("base"),
		archiveMark(uuid.MustParse(os.Getenv(sessionsEnv))), &store.ArchiveOptions{Chunk: 5, Step: func(string) {
			if n++; n == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}})
	return err
}

// TestArchiveCrash kills an Archive at each of its steps (25 here) and
// checks that every session is readable in the live journal or the
// archive, that the live journal holds each once, that both verify, and
// that archiving again completes.
//
// It starts a process per kill point and takes a second or more: it skips
// under -short (the mutation runs, where TestArchiveOrphan stands in for
// the interrupted archive).
func TestArchiveCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILLs 22 child processes; skipped under -short")
	}
	src := filepath.Join(t.TempDir(), "src.db")
	sids := archiveJournal(t, src, 4, 20)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	mark := events.NewID()
	killed := 0
	for at := 1; ; at++ {
		dir := t.TempDir()
		path := filepath.Join(dir, "journal.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=archive "+path, sessionsEnv+"="+mark.String(), "ARCHIVE_KILL_AT="+strconv.Itoa(at))
		out, err := cmd.CombinedOutput()
		if err == nil {
			if killed < 20 {
				t.Fatalf("the archive finished after %d kill points; want at least 20", killed)
			}
			break
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("kill at %d: %v\n%s", at, err, out)
		}
		killed++
		checkAfterCrash(t, fmt.Sprintf("kill at step %d", at), dir, sids, mark)
		// Archiving again completes.
		if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "archive.db"), 60, []byte("base"), archiveMark(mark), nil); err != nil &&
			!errors.Is(err, store.ErrInvalid) { // already committed: 60 is the base now
			t.Fatalf("kill at step %d, then archive: %v", at, err)
		}
		checkAfterCrash(t, fmt.Sprintf("kill at step %d, archived again", at), dir, sids, mark)
	}
	t.Logf("%d kill points", killed)
}

func checkAfterCrash(t *testing.T, what, dir string, sids []uuid.UUID, mark uuid.UUID) {
	t.Helper()
	ctx := t.Context()
	j, err := store.Open(filepath.Join(dir, "journal.db"), nil) // as the next run would
	if err != nil {
		t.Fatalf("%s: live: %v", what, err)
	}
	defer j.Close()
	if _, err := j.Verify(ctx); err != nil {
		t.Fatalf("%s: live Verify: %v", what, err)
	}
	live := sessionIDs(t, j)
	committed := j.Base() == 60
	var archived []uuid.UUID
	if a, err := store.Open(filepath.Join(dir, "archive.db"), &store.Options{ReadOnly: true}); err == nil {
		if _, err := a.Verify(ctx); err != nil {
			t.Fatalf("%s: archive Verify: %v", what, err)
		}
		archived = sessionIDs(t, a)
		a.Close()
	} else if committed {
		t.Fatalf("%s: the live journal is archived through 60 but the archive does not open: %v", what, err)
	}
	switch {
	case committed:
		if !slices.Equal(live, sortedIDs([]uuid.UUID{sids[3], mark})) || !slices.Equal(archived, sortedIDs(sids[:3])) {
			t.Fatalf("%s: committed, live %v, archive %v", what, live, archived)
		}
	default:
		if !slices.Equal(live, sortedIDs(sids)) {
			t.Fatalf("%s: not committed, live %v; want every session", what, live)
		}
	}
	for _, p := range []string{"journal.db", "archive.db"} {
		if matches, _ := filepath.Glob(filepath.Join(dir, p+".*tmp")); committed && len(matches) > 0 {
			t.Logf("%s: leftover %v", what, matches)
		}
	}
}

// editMeta sets (or, with a nil value, deletes) meta keys of the journal
// file at path with bbolt directly.
func editMeta(t *testing.T, path string, kv map[string][]byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket([]byte("meta"))
		for k, v := range kv {
			var err error
			if v == nil {
				err = m.Delete([]byte(k))
			} else {
				err = m.Put([]byte(k), v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBaseMeta: Open checks meta/base against the log and the base state.
func TestBaseMeta(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	archiveJournal(t, path, 2, 10)
	if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "a.db"), 10, []byte("state"), nil, nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		kv   map[string][]byte
		ok   bool
	}{
		{"as archived", nil, true},
		{"not a number", map[string][]byte{"base": []byte("ten")}, false},
		{"too long", map[string][]byte{"base": []byte("000000000000000000010")}, false},
		{"twenty digits", map[string][]byte{"base": []byte("00000000000000000010")}, true},
		{"past the log's end", map[string][]byte{"base": []byte("21")}, false},
		{"records at or below it", map[string][]byte{"base": []byte("20")}, false},
		{"no base state", map[string][]byte{"base_state": nil}, false},
		{"no base", map[string][]byte{"base": nil, "base_state": nil}, false}, // the log starts at 11: a gap
	} {
		p := filepath.Join(t.TempDir(), "journal.db")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		editMeta(t, p, c.kv)
		j, err := store.Open(p, &store.Options{ReadOnly: true})
		if err == nil {
			_, err = j.Verify(t.Context())
			j.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		} else if err != nil && !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
	// A base state that fails its checksum is reported as such.
	p := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	editMeta(t, p, map[string][]byte{"base_state": []byte("\x00\x00\x00\x00state")})
	j := mustOpen(t, p, &store.Options{ReadOnly: true})
	cps := checkpoints(t, j)
	if len(cps) == 0 || !cps[0].Base || !errors.Is(cps[0].Err, store.ErrCheckpointDamaged) || cps[0].Data != nil {
		t.Errorf("a damaged base state: %+v", cps)
	}
}

// TestArchiveAtTheCut: a session that starts exactly at the cut and runs
// past it is refused too.
func TestArchiveAtTheCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	archiveJournal(t, path, 2, 5) // 1..5, 6..10
	if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "a.db"), 6, nil, nil, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("through the first record of a session: %v, want ErrInvalid", err)
	}
}

// TestArchiveOrphan: an archive that was written but never committed (its
// records are all still live) is replaced by the next Archive to the same
// path; one of records the journal does not hold is not.
func TestArchiveOrphan(t *testing.T) {
	for _, through := range []uint64{10, 20} { // inside the log, and all of it
		dir := t.TempDir()
		path := filepath.Join(dir, "journal.db")
		archiveJournal(t, path, 2, 10)
		ctx, cancel := context.WithCancel(t.Context())
		_, err := store.Archive(ctx, path, filepath.Join(dir, "a.db"), through, []byte("s"), nil, &store.ArchiveOptions{
			Step: func(s string) {
				if s == "archive-renamed" {
					cancel() // stop before the live journal is rewritten
				}
			}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("through %d: %v, want the cancel", through, err)
		}
		j := mustOpen(t, path, &store.Options{ReadOnly: true})
		if j.Base() != 0 || len(sessionIDs(t, j)) != 2 {
			t.Fatalf("through %d: the live journal changed", through)
		}
		j.Close()
		if _, err := os.Stat(filepath.Join(dir, "a.db")); err != nil {
			t.Fatalf("through %d: no orphan: %v", through, err)
		}
		if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "a.db"), through, []byte("s"), nil, nil); err != nil {
			t.Errorf("through %d: archiving over the orphan: %v", through, err)
		}
	}
	// An archive of a longer journal is not this one's orphan.
	dir := t.TempDir()
	long, short := filepath.Join(dir, "long.db"), filepath.Join(dir, "short.db")
	archiveJournal(t, long, 3, 10)
	archiveJournal(t, short, 2, 10)
	if _, err := store.Archive(t.Context(), long, filepath.Join(dir, "a.db"), 30, []byte("s"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Archive(t.Context(), short, filepath.Join(dir, "a.db"), 20, []byte("s"), nil, nil); !errors.Is(err, store.ErrArchiveExists) {
		t.Errorf("over another journal's archive: %v, want ErrArchiveExists", err)
	}
}

// TestArchiveInterleaved: sessions whose records alternate in the log have
// sealed index segments; the archive carries them, and reads the sessions
// back whole.
func TestArchiveInterleaved(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	j := mustOpen(t, path, noSync())
	a, b, c := events.NewID(), events.NewID(), events.NewID()
	for i := range 300 {
		sid := a
		if i%2 == 1 {
			sid = b
		}
		if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sid := range []uuid.UUID{a, b, c} {
		if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	// a and b end at 301 and 302; c runs from 303.
	if _, err := store.Archive(ctx, path, filepath.Join(dir, "a.db"), 302, []byte("s"), nil, &store.ArchiveOptions{Chunk: 64}); err != nil {
		t.Fatal(err)
	}
	ar := mustOpen(t, filepath.Join(dir, "a.db"), &store.Options{ReadOnly: true})
	if _, err := ar.Verify(ctx); err != nil {
		t.Fatalf("archive Verify: %v", err)
	}
	for _, sid := range []uuid.UUID{a, b} {
		n := 0
		if err := ar.ReadSession(ctx, sid, 1, func(e events.Event) error {
			n++
			if e.Seq != uint64(n) {
				t.Fatalf("seq %d at %d", e.Seq, n)
			}
			return nil
		}); err != nil || n != 151 {
			t.Errorf("session %s in the archive: %d events, %v", sid, n, err)
		}
	}
	live := mustOpen(t, path, &store.Options{ReadOnly: true})
	if _, err := live.Verify(ctx); err != nil || !slices.Equal(sessionIDs(t, live), []uuid.UUID{c}) {
		t.Errorf("live: %v, sessions %v", err, sessionIDs(t, live))
	}
}
