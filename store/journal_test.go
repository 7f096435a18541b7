package store_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

var testTime = time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC)

// Both implementations satisfy the suite's interface.
var (
	_ storetest.Journal = (*store.Journal)(nil)
	_ storetest.Journal = (*store.MemJournal)(nil)
)

func TestConformance(t *testing.T) {
	t.Run("Journal", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Journal { return mustOpen(t, tempPath(t), noSync()) })
	})
	t.Run("MemJournal", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Journal {
			m := store.NewMem()
			t.Cleanup(func() { _ = m.Close() })
			return m
		})
	})
}

func tempPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "state", "journal.db")
}

// noSync returns the options of most tests: commits skip fsync, which
// costs milliseconds each and no test but the durability ones (sync_test.go,
// TestCrash) can observe.
func noSync() *store.Options { return &store.Options{NoSync: true} }

func mustOpen(t testing.TB, path string, opts *store.Options) *store.Journal {
	t.Helper()
	j, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return j
}

func evs(n int) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		out[i] = storetest.Event("github", i, testTime.Add(time.Duration(i)*time.Second))
	}
	return out
}

func TestFileMode(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, noSync())
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("journal directory mode %v, want 0700", di.Mode().Perm())
	}
}

func TestReopen(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	a, b := events.NewID(), events.NewID()
	j := mustOpen(t, path, noSync())
	first, err := j.Append(ctx, a, store.NoStream, evs(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, path, noSync())
	res, err := j.Append(ctx, b, store.NoStream, evs(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstGPos != 4 {
		t.Errorf("after reopen the next gpos is %d, want 4", res.FirstGPos)
	}
	// A retry after reopen is still recognised.
	again, err := j.Append(ctx, a, store.Any, first.Events)
	if err != nil || !again.Duplicate || again.LastSeq != 3 {
		t.Errorf("retry after reopen = %+v, %v; want duplicate", again, err)
	}
	if rep, err := j.Verify(ctx); err != nil || rep.Events != 5 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
}

func TestReadOnly(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	sid := events.NewID()
	w := mustOpen(t, path, noSync())
	if _, err := w.Append(ctx, sid, store.NoStream, evs(2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r1 := mustOpen(t, path, &store.Options{ReadOnly: true})
	r2 := mustOpen(t, path, &store.Options{ReadOnly: true}) // readers share
	if info, err := r2.Head(ctx, sid); err != nil || info.LastSeq != 2 {
		t.Errorf("Head = %+v, %v", info, err)
	}
	if _, err := r1.Append(ctx, sid, store.Any, evs(1)); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Append on a read-only journal: %v, want ErrReadOnly", err)
	}
	if _, err := r1.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
	// A reader excludes a writer.
	start := time.Now()
	_, err := store.Open(path, &store.Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) {
		t.Errorf("writable Open while readers hold the file: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ErrLocked took %v", d)
	}

	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := store.Open(missing, &store.Options{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only Open of a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only Open created %s", missing)
	}
}

// holdInChild opens the journal at path in a child process (this test
// binary re-executed) and returns once the child holds it; release makes
// the child close it and waits for the child to exit.
func holdInChild(t *testing.T, path string) (release func()) {
	release, _ = holdInChildPID(t, path)
	return release
}

// holdInChildPID is holdInChild, and the child's pid.
func holdInChildPID(t *testing.T, path string) (release func(), pid int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=hold "+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	release = func() {
		once.Do(func() {
			stdin.Close()
			werr = cmd.Wait()
		})
		if werr != nil {
			t.Errorf("child: %v", werr)
		}
	}
	t.Cleanup(func() { once.Do(func() { stdin.Close(); _ = cmd.Wait() }) })
	select {
	case line := <-readLines(stdout):
		if line != "ready" {
			t.Fatalf("child said %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not open the journal within 30s")
	}
	return release, cmd.Process.Pid
}

// TestLockedByOtherProcess holds the journal in a child process: Open
// here, writable or read-only, fails with ErrLocked once LockTimeout has
// passed (polling every 50 ms, it gives up when one more poll would pass
// the timeout), and succeeds once the child has let go.
func TestLockedByOtherProcess(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, noSync()).Close()
	release := holdInChild(t, path)

	const poll = 50 * time.Millisecond
	for _, c := range []struct {
		ro      bool
		timeout time.Duration
	}{{false, 2 * poll}, {false, poll}, {true, poll}} {
		// It gives up at the first poll that finds less than a poll left:
		// at once for one poll's timeout, after one poll for two. The
		// bounds leave a poll's slack, and the fastest of three tries
		// counts: a loaded machine only ever makes a try slower.
		var d time.Duration
		for try := range 3 {
			start := time.Now()
			_, err := store.Open(path, &store.Options{ReadOnly: c.ro, LockTimeout: c.timeout})
			if e := time.Since(start); try == 0 || e < d {
				d = e
			}
			if !errors.Is(err, store.ErrLocked) {
				t.Fatalf("Open(ReadOnly=%v, LockTimeout=%v) while another process holds it: %v, want ErrLocked", c.ro, c.timeout, err)
			}
			if d < c.timeout+poll {
				break
			}
		}
		if d < c.timeout-poll || d >= c.timeout+poll {
			t.Fatalf("Open(ReadOnly=%v, LockTimeout=%v) gave up after %v, want within a poll (%v) below the timeout", c.ro, c.timeout, d, poll)
		}
	}

	release()
	mustOpen(t, path, noSync())
}

// TestDefaultLockTimeout: with no LockTimeout, Open waits about a second
// (DefaultLockTimeout) for another process's lock.
func TestDefaultLockTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits a second for a lock; skipped under -short")
	}
	path := tempPath(t)
	mustOpen(t, path, noSync()).Close()
	holdInChild(t, path)
	for _, ro := range []bool{false, true} {
		start := time.Now()
		_, err := store.Open(path, &store.Options{ReadOnly: ro})
		d := time.Since(start)
		if !errors.Is(err, store.ErrLocked) {
			t.Fatalf("Open(ReadOnly=%v) while another process holds it: %v, want ErrLocked", ro, err)
		}
		if d < store.DefaultLockTimeout-100*time.Millisecond || d > 2*store.DefaultLockTimeout {
			t.Errorf("Open(ReadOnly=%v) gave up after %v, want about %v", ro, d, store.DefaultLockTimeout)
		}
		t.Logf("%v", err)
	}
}

func TestNotJournal(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("these are not the pages you are looking for\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		if _, err := store.Open(text, &store.Options{ReadOnly: ro}); !errors.Is(err, store.ErrNotJournal) {
			t.Errorf("Open(text, ReadOnly=%v): %v, want ErrNotJournal", ro, err)
		}
	}
	if b, _ := os.ReadFile(text); string(b) != "these are not the pages you are looking for\n" {
		t.Errorf("Open modified the text file: %q", b)
	}

	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(big, nil); !errors.Is(err, store.ErrNotJournal) {
		t.Errorf("Open(64 KiB of zeros): %v, want ErrNotJournal", err)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(empty, &store.Options{ReadOnly: true}); !errors.Is(err, store.ErrNotJournal) {
		t.Errorf("read-only Open(empty file): %v, want ErrNotJournal", err)
	}

	// A bbolt file of someone else's.
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, ro := range []bool{false, true} {
		if _, err := store.Open(other, &store.Options{ReadOnly: ro}); !errors.Is(err, store.ErrNotJournal) {
			t.Errorf("Open(foreign bbolt, ReadOnly=%v): %v, want ErrNotJournal", ro, err)
		}
	}
}

// TestMetaVersions: Open reads meta/format and meta/codec as decimal
// versions: a newer one is ErrNewerFormat (up to the largest 32-bit
// version), an older format, zero, or anything else is ErrNotJournal.
func TestMetaVersions(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, noSync()).Close()
	format, codec := strconv.Itoa(store.FormatVersion), strconv.Itoa(store.CodecVersion)
	for _, c := range []struct {
		format, codec string
		want          error // nil: opens
	}{
		{format, codec, nil},
		{"99", codec, store.ErrNewerFormat},
		{format, "99", store.ErrNewerFormat},
		{"4294967295", codec, store.ErrNewerFormat},
		{format, "4294967295", store.ErrNewerFormat},
		{"4294967296", codec, store.ErrNotJournal},
		{"99999999999", codec, store.ErrNotJournal},
		{strconv.Itoa(store.FormatVersion - 1), codec, store.ErrNotJournal},
		{"0", codec, store.ErrNotJournal},
		{format, "0", store.ErrNotJournal},
		{format, "", store.ErrNotJournal},
		{"two", codec, store.ErrNotJournal},
	} {
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket([]byte("meta"))
			if err := meta.Put([]byte("format"), []byte(c.format)); err != nil {
				return err
			}
			return meta.Put([]byte("codec"), []byte(c.codec))
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{false, true} {
			j, err := store.Open(path, &store.Options{ReadOnly: ro, NoSync: true})
			if err == nil {
				j.Close()
			}
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("meta/format=%q meta/codec=%q, ReadOnly=%v: Open = %v, want %v", c.format, c.codec, ro, err, c.want)
			}
		}
	}
}

func TestVerifyCorrupt(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	a, b := events.NewID(), events.NewID()
	j := mustOpen(t, path, noSync())
	for _, sid := range []uuid.UUID{a, b} {
		if _, err := j.Append(ctx, sid, store.NoStream, evs(5)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Fatalf("Verify before damage: %v", err)
	}
	j.Close()

	bad := filepath.Join(t.TempDir(), "copy.db")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	storetest.FlipRecordByte(t, bad, b, 3)

	j = mustOpen(t, bad, &store.Options{ReadOnly: true})
	rep, err := j.Verify(ctx)
	var ce *store.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Verify of a damaged copy = %v, want *CorruptError", err)
	}
	if ce.Session != b || ce.Seq != 3 {
		t.Errorf("Verify blamed session %s seq %d, want %s seq 3", ce.Session, ce.Seq, b)
	}
	if rep.Sessions != 1 || rep.Events != 7 {
		t.Errorf("report up to the damage = %+v, want 1 whole session and 7 events", rep)
	}
	t.Logf("%v", err)

	// Reads stop at the damage too.
	err = j.ReadSession(ctx, b, 1, func(events.Event) error { return nil })
	if !errors.As(err, &ce) || ce.Seq != 3 {
		t.Errorf("ReadSession over the damage: %v", err)
	}
	if err := j.ReadSession(ctx, a, 1, func(events.Event) error { return nil }); err != nil {
		t.Errorf("ReadSession of the intact session: %v", err)
	}
}

// TestFull fills a journal capped by MaxSize: the commit that would grow
// it past the cap fails with ErrFull, and everything acknowledged before
// survives a reopen.
func TestFull(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	sid := events.NewID()
	j := mustOpen(t, path, &store.Options{MaxSize: 256 << 10, NoSync: true})
	var acked uint64
	var err error
	for range 10000 {
		var res store.AppendResult
		if res, err = j.Append(ctx, sid, store.Any, evs(20)); err != nil {
			break
		}
		acked = res.LastSeq
	}
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("Append into a full journal: %v, want ErrFull", err)
	}
	if acked == 0 {
		t.Fatal("nothing fitted before ErrFull")
	}
	t.Logf("%d events fitted; then %v", acked, err)
	// The journal still works for reads, and small appends may still fit
	// pages freed meanwhile; a full batch fails again.
	if info, err := j.Head(ctx, sid); err != nil || info.LastSeq != acked {
		t.Errorf("Head after ErrFull = %+v, %v; want last seq %d", info, err, acked)
	}
	j.Close()

	j = mustOpen(t, path, noSync())
	n := uint64(0)
	if err := j.ReadSession(ctx, sid, 1, func(e events.Event) error {
		n++
		if e.Seq != n {
			t.Fatalf("seq %d at position %d", e.Seq, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != acked {
		t.Errorf("after reopen %d events, want %d acknowledged", n, acked)
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// TestCloseWithQueuedAppends closes the journal under load: every append
// either commits or fails with ErrClosed, and the committed ones are all
// there after a reopen.
func TestCloseWithQueuedAppends(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	j := mustOpen(t, path, noSync())
	const producers = 16
	var mu sync.Mutex
	acked := map[uuid.UUID]uint64{}
	loaded := make(chan struct{}) // closed once 200 appends were acknowledged
	n := 0
	var wg sync.WaitGroup
	for range producers {
		sid := events.NewID()
		wg.Go(func() {
			for {
				res, err := j.Append(ctx, sid, store.Any, evs(1))
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				acked[sid] = res.LastSeq
				if n++; n == 200 {
					close(loaded)
				}
				mu.Unlock()
			}
		})
	}
	<-loaded
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	j = mustOpen(t, path, noSync())
	for sid, seq := range acked {
		info, err := j.Head(ctx, sid)
		if err != nil || info.LastSeq != seq {
			t.Errorf("session %s: head %+v, %v; want last seq %d (all acknowledged, no more)", sid, info, err, seq)
		}
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// TestSubmitMany queues many appends before waiting for any.
func TestSubmitMany(t *testing.T) {
	j := mustOpen(t, tempPath(t), noSync())
	ctx := context.Background()
	const n = 200
	pend := make([]*store.Pending, n)
	for i := range pend {
		pend[i] = j.Submit(events.NewID(), store.NoStream, evs(1))
	}
	for _, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := j.Verify(ctx); err != nil || rep.Events != n {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// TestReadCorruptLarge damages a record past the first read chunk: reads
// deliver every event before it, then fail naming it.
func TestReadCorruptLarge(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	sid := events.NewID()
	j := mustOpen(t, path, noSync())
	for range 3 {
		if _, err := j.Append(ctx, sid, store.Any, evs(500)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	storetest.FlipRecordByte(t, path, sid, 1200)
	j = mustOpen(t, path, &store.Options{ReadOnly: true})
	for name, read := range map[string]func(fn func(events.Event) error) error{
		"ReadSession": func(fn func(events.Event) error) error { return j.ReadSession(ctx, sid, 1, fn) },
		"ReadAll":     func(fn func(events.Event) error) error { return j.ReadAll(ctx, 1, fn) },
	} {
		var n uint64
		err := read(func(e events.Event) error {
			if n++; e.Seq != n {
				t.Fatalf("%s: seq %d at position %d", name, e.Seq, n)
			}
			return nil
		})
		var ce *store.CorruptError
		if !errors.As(err, &ce) || ce.Session != sid || ce.Seq != 1200 || n != 1199 {
			t.Errorf("%s: %v after %d events, want *CorruptError at seq 1200 after 1199", name, err, n)
		}
	}
}
