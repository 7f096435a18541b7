package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// fuzzBase is a small journal file, built once per test binary: three
// sessions appended in interleaved commits (so the global log spans
// several leaf pages under a branch page, sessions have sealed index
// segments, and the freelist holds stale copies of pages).
// fuzzPage is bbolt's page size on this platform.
const fuzzPage = 4096

var fuzzBase struct {
	once sync.Once
	data []byte
	err  error
}

func fuzzBaseFile(tb testing.TB) []byte {
	tb.Helper()
	fuzzBase.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpledger-fuzzbase-")
		if err != nil {
			fuzzBase.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "journal.db")
		j, err := store.Open(path, nil)
		if err != nil {
			fuzzBase.err = err
			return
		}
		ctx := context.Background()
		t0 := time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC)
		sids := []uuid.UUID{events.NewID(), events.NewID(), events.NewID()}
		sizes := []int{3, 25, 60}
		for round := 0; round < 60; round++ {
			for i, sid := range sids {
				if round >= sizes[i] {
					continue
				}
				n := 1 + round%3 // batches of 1-3 events
				evs := make([]events.Event, n)
				for k := range evs {
					evs[k] = storetest.Event("server-"+string(rune('a'+i)), round*3+k, t0.Add(time.Duration(round*3+k)*time.Millisecond))
				}
				if _, err := j.Append(ctx, sid, store.Any, evs); err != nil {
					fuzzBase.err = err
					j.Close()
					return
				}
			}
		}
		if _, err := j.Verify(ctx); err != nil {
			fuzzBase.err = err
			j.Close()
			return
		}
		if err := j.Close(); err != nil {
			fuzzBase.err = err
			return
		}
		data, err := os.ReadFile(path)
		// bbolt grows the file in 16 MiB steps; past the last page in use
		// it is zeros no page points at. Keep the used part: a small input
		// fuzzes better.
		end := len(data)
		for end >= fuzzPage && !slices.ContainsFunc(data[end-fuzzPage:end], func(b byte) bool { return b != 0 }) {
			end -= fuzzPage
		}
		fuzzBase.data, fuzzBase.err = data[:end], err
	})
	if fuzzBase.err != nil {
		tb.Fatalf("building the base journal: %v", fuzzBase.err)
	}
	return fuzzBase.data
}

// knownBug marks a failure already reported in RELIABILITY.md ("Known
// bugs"): the test is skipped with the reason, unless MCPLEDGER_STRICT=1,
// which makes it fail as it should once the bug is fixed.
func knownBug(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("MCPLEDGER_STRICT") == "1" {
		t.Fatalf("KNOWN BUG: "+format, args...)
	}
	t.Skipf("KNOWN BUG (MCPLEDGER_STRICT=1 fails instead): "+format, args...)
}

// FuzzJournalBytes opens a journal file whose bytes were corrupted (bits
// flipped at any offset, pages zeroed, the file truncated or grown) and
// reads it every way mcpledger does: Open read-only (verify, log, replay)
// then Verify, ReadAll, Sessions, Head and ReadSession of each session;
// then Open writable (run) and ReadAll (its history). None may panic or
// hang; each either succeeds or fails with an error wrapping ErrCorrupt,
// ErrNotJournal or ErrNewerFormat. If Verify passes, every read must pass.
//
// The seeds (the intact file, damaged meta pages, flipped bytes inside
// records, damaged page headers and branch elements, zeroed pages,
// truncations) run in the default suite. Damage that makes bbolt panic or
// fault is a known bug (RELIABILITY.md): such inputs are skipped unless
// MCPLEDGER_STRICT=1. Fuzz for longer with
//
//	go test ./store -run '^$' -fuzz FuzzJournalBytes -fuzztime 10m
func FuzzJournalBytes(f *testing.F) {
	base := fuzzBaseFile(f)
	const page = fuzzPage
	flip := func(at ...int) []byte {
		b := bytes.Clone(base)
		for _, i := range at {
			b[i] ^= 0x41
		}
		return b
	}
	zero := func(pages ...int) []byte {
		b := bytes.Clone(base)
		for _, p := range pages {
			clear(b[p*page : min((p+1)*page, len(b))])
		}
		return b
	}
	f.Add(base)
	// The two meta pages: one damaged (bbolt falls back on the other),
	// both damaged (not a journal).
	for _, at := range []int{16, 40, 64, page / 2} {
		f.Add(flip(at))
		f.Add(flip(page + at))
		f.Add(flip(at, page+at))
	}
	f.Add(zero(0))
	f.Add(zero(1))
	f.Add(zero(0, 1))
	// Inside records: every record names its server; flip a byte of the
	// name (and, separately, one a little after it) in a sample of them.
	for _, name := range []string{"server-a", "server-b", "server-c"} {
		for k, off := 0, 0; k < 40; k++ {
			i := bytes.Index(base[off:], []byte(name))
			if i < 0 {
				break
			}
			at := off + i
			if k%7 == 0 {
				f.Add(flip(at + 3))
				f.Add(flip(at + len(name) + 20))
			}
			off = at + len(name)
		}
	}
	for _, n := range []int{0, 1, 100, page - 1, page, 2 * page, 4*page + 7, len(base) / 2, len(base) - page, len(base) - 1} {
		if n >= 0 && n < len(base) {
			f.Add(bytes.Clone(base[:n]))
		}
	}
	f.Add(append(bytes.Clone(base), make([]byte, page)...))
	// The page structure: page headers, branch elements, the freelist.
	for p := 2; p*page < len(base); p++ {
		for _, at := range []int{8, 10, 16, 40, page / 2} {
			f.Add(flip(p*page + at))
		}
		f.Add(zero(p))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// bbolt reads pages through a memory map: a page pointer past the
		// end of a truncated file faults (SIGBUS), which would end the
		// process; make it a panic we can report.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		step := "start"
		defer func() {
			if r := recover(); r != nil {
				stack := debug.Stack()
				if bytes.Contains(stack, []byte("go.etcd.io/bbolt")) {
					knownBug(t, "bbolt panicked or faulted in %s of a damaged journal (%d bytes): %v", step, len(data), r)
					return
				}
				panic(r)
			}
		}()
		checkJournalBytes(t, data, &step)
	})
}

// cleanJournalError reports whether err is one of the errors a damaged
// journal may give.
func cleanJournalError(err error) bool {
	return errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrNotJournal) || errors.Is(err, store.ErrNewerFormat)
}

// checkJournalBytes runs the reads on data, keeping in *step the one under
// way.
func checkJournalBytes(t *testing.T, data []byte, step *string) {
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := func(what string, err error) bool {
		t.Helper()
		*step = "after " + what
		if err == nil {
			return false
		}
		if !cleanJournalError(err) {
			if strings.Contains(err.Error(), "file size too small") {
				knownBug(t, "%s: bbolt's error not mapped to ErrNotJournal: %v", what, err)
			}
			t.Fatalf("%s: %v (%T): want nil or an error wrapping ErrCorrupt, ErrNotJournal or ErrNewerFormat", what, err, err)
		}
		return true
	}

	*step = "Open read-only"
	j, err := store.Open(path, &store.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond})
	if bad("Open read-only", err) {
		return
	}
	*step = "Verify"
	_, verr := j.Verify(ctx)
	bad("Verify", verr)
	var n uint64
	*step = "ReadAll"
	err = j.ReadAll(ctx, 0, func(events.Event) error { n++; return nil })
	if bad("ReadAll", err) && verr == nil {
		t.Fatalf("Verify passed, ReadAll failed after %d events: %v", n, err)
	}
	*step = "Sessions"
	sessions, err := j.Sessions(ctx)
	if bad("Sessions", err) && verr == nil {
		t.Fatalf("Verify passed, Sessions failed: %v", err)
	}
	for _, s := range sessions {
		*step = "Head"
		_, err := j.Head(ctx, s.Session)
		if bad("Head", err) && verr == nil {
			t.Fatalf("Verify passed, Head(%s) failed: %v", s.Session, err)
		}
		var last uint64
		*step = "ReadSession"
		err = j.ReadSession(ctx, s.Session, 1, func(e events.Event) error { last = e.Seq; return nil })
		if bad("ReadSession", err) && verr == nil {
			t.Fatalf("Verify passed, ReadSession(%s) failed: %v", s.Session, err)
		}
		if err == nil && verr == nil && last != s.LastSeq {
			t.Fatalf("Verify passed, session %s reads %d events, its head says %d", s.Session, last, s.LastSeq)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close read-only: %v", err)
	}

	// The path `mcpledger run` takes: a writable open, then the history.
	*step = "Open writable"
	j, err = store.Open(path, &store.Options{LockTimeout: 200 * time.Millisecond, NoSync: true})
	if bad("Open writable", err) {
		return
	}
	*step = "ReadAll (writable)"
	err = j.ReadAll(ctx, 0, func(events.Event) error { return nil })
	if bad("ReadAll (writable)", err) && verr == nil {
		t.Fatalf("Verify passed, ReadAll on a writable open failed: %v", err)
	}
	if err := j.Close(); err != nil && !cleanJournalError(err) {
		t.Fatalf("Close writable: %v", err)
	}
}
