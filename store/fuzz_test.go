package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
// fuzzHang bounds one input's reads (they take milliseconds).
const fuzzHang = 5 * time.Second

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
		// NoSync: the file need not survive a crash, and a fuzz worker
		// restarted after a crash rebuilds it.
		j, err := store.Open(path, &store.Options{NoSync: true})
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

// fuzzCrashDirEnv names a directory where each FuzzJournalBytes process
// writes its crash report, if it crashes.
const fuzzCrashDirEnv = "MCPLEDGER_FUZZ_CRASHDIR"

// FuzzJournalBytes opens a journal file whose bytes were corrupted (bits
// flipped at any offset, pages zeroed, the file truncated or grown) and
// reads it every way mcpledger does: Open read-only (verify, log, replay)
// then Verify, ReadAll, Sessions, Head and ReadSession of each session;
// then Open writable (run), ReadAll (its history) and, if that passed, an
// Append. None may panic, fault or hang; each either succeeds or fails with an error
// wrapping ErrCorrupt, ErrNotJournal or ErrNewerFormat. If Verify passes,
// every read must pass. Once every journal opened on the file is closed,
// nothing may hold its lock.
//
// The seeds run in the default suite: the intact file, damaged meta
// pages, flipped bytes inside records, truncations, a grown file. Damage
// to the page structure (page headers, branch elements, the freelist,
// zeroed pages) once faulted the process, so TestJournalPageDamage checks
// it in child processes, where a fault fails the test with its report
// instead of ending the test binary; while fuzzing it seeds the fuzzer
// too. Fuzz for longer with
//
//	go test ./store -run '^$' -fuzz FuzzJournalBytes -fuzztime 10m
//
// and with MCPLEDGER_FUZZ_CRASHDIR=DIR to keep the report of a worker
// that dies (the fuzzing engine discards their output).
func FuzzJournalBytes(f *testing.F) {
	base := fuzzBaseFile(f)
	for _, b := range safeDamage(base) {
		f.Add(b)
	}
	if fz := flag.Lookup("test.fuzz"); fz != nil && fz.Value.String() != "" {
		for _, b := range pageDamage(base) {
			f.Add(b)
		}
	}
	if dir := os.Getenv(fuzzCrashDirEnv); dir != "" {
		// The fuzzing engine discards its workers' output, so a worker
		// that dies (a fault, the watchdog below, running out of memory)
		// leaves no trace but "terminated unexpectedly": keep the
		// runtime's report in a file per process.
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("crash-%d.txt", os.Getpid())))
		if err != nil {
			f.Fatal(err)
		}
		if err := debug.SetCrashOutput(out, debug.CrashOptions{}); err != nil {
			f.Fatal(err)
		}
		out.Close()
	}
	sf := newScratch(f.TempDir())
	f.Fuzz(func(t *testing.T, data []byte) {
		// A read that never ends is a failure too: crash with every
		// goroutine's stack, so the fuzzer reports it and keeps the input.
		watchdog := time.AfterFunc(fuzzHang, func() {
			debug.SetTraceback("all")
			panic(fmt.Sprintf("reading a damaged journal (%d bytes) did not end within %v", len(data), fuzzHang))
		})
		defer watchdog.Stop()
		// A panic that escapes the store is a failure (the store turns
		// bbolt's into ErrCorrupt); say which read let it out.
		step := "start"
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic in %s of a damaged journal (%d bytes): %v\n%s", step, len(data), r, debug.Stack())
			}
		}()
		checkJournalBytes(t, sf, data, &step)
	})
}

func flipped(base []byte, at ...int) []byte {
	b := bytes.Clone(base)
	for _, i := range at {
		b[i] ^= 0x41
	}
	return b
}

func zeroed(base []byte, pages ...int) []byte {
	b := bytes.Clone(base)
	for _, p := range pages {
		clear(b[p*fuzzPage : min((p+1)*fuzzPage, len(b))])
	}
	return b
}

// safeDamage returns damaged copies of base that no read may crash on:
// the meta pages, record bytes, the file's length.
func safeDamage(base []byte) [][]byte {
	const page = fuzzPage
	out := [][]byte{base}
	// The two meta pages: one damaged (bbolt falls back on the other),
	// both damaged (not a journal).
	for _, at := range []int{16, 40, 64, page / 2} {
		out = append(out, flipped(base, at), flipped(base, page+at), flipped(base, at, page+at))
	}
	out = append(out, zeroed(base, 0), zeroed(base, 1), zeroed(base, 0, 1))
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
				out = append(out, flipped(base, at+3), flipped(base, at+len(name)+20))
			}
			off = at + len(name)
		}
	}
	for _, n := range []int{0, 1, 100, page - 1, page, 2 * page, 4*page + 7, len(base) / 2, len(base) - page, len(base) - 1} {
		if n >= 0 && n < len(base) {
			out = append(out, bytes.Clone(base[:n]))
		}
	}
	return append(out, append(bytes.Clone(base), make([]byte, page)...))
}

// pageDamage returns copies of base with damage to the page structure of
// every page past the metas: page headers, branch elements, the
// freelist, whole pages zeroed.
func pageDamage(base []byte) [][]byte {
	var out [][]byte
	for p := 2; p*fuzzPage < len(base); p++ {
		for _, at := range []int{8, 10, 16, 40, fuzzPage / 2} {
			out = append(out, flipped(base, p*fuzzPage+at))
		}
		out = append(out, zeroed(base, p))
	}
	return out
}

// pageDamageEnv names the directory of inputs a child process of
// TestJournalPageDamage checks, from the index in pageDamageFromEnv on.
const (
	pageDamageEnv     = "STORE_PAGE_DAMAGE_DIR"
	pageDamageFromEnv = "STORE_PAGE_DAMAGE_FROM"
)

// TestJournalPageDamage reads journals with damaged page structure (see
// pageDamage) in child processes, so that a fault, which ends a process,
// is reported with its input: a child checks the inputs in order and
// prints each one it finished; when one crashes it, a new child carries
// on after it. Every input must read cleanly or fail with a clean error
// (checkJournalBytes), and no child may fault or fail.
func TestJournalPageDamage(t *testing.T) {
	if dir := os.Getenv(pageDamageEnv); dir != "" {
		from, _ := strconv.Atoi(os.Getenv(pageDamageFromEnv))
		files, _ := filepath.Glob(filepath.Join(dir, "*.db"))
		slices.Sort(files)
		sf := newScratch(t.TempDir())
		for _, f := range files[from:] {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(filepath.Base(f), func(t *testing.T) { checkJournalBytes(t, sf, data, new(string)) })
			fmt.Printf("checked %s\n", filepath.Base(f))
		}
		return
	}
	inputs := pageDamage(fuzzBaseFile(t))
	if testing.Short() {
		// The fast tier (mutation runs) spares the child processes: the
		// inputs pass, so a fault here is a regression, and it fails the
		// run all the same, only with a less helpful report.
		sf := newScratch(t.TempDir())
		for i, b := range inputs {
			t.Run(strconv.Itoa(i), func(t *testing.T) { checkJournalBytes(t, sf, b, new(string)) })
		}
		return
	}
	dir := t.TempDir()
	for i, b := range inputs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.db", i)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var faults []string
	failed := 0
	for from := 0; from < len(inputs); {
		cmd := exec.Command(os.Args[0], "-test.run=^TestJournalPageDamage$", "-test.v", "-test.timeout=5m")
		cmd.Env = append(os.Environ(), pageDamageEnv+"="+dir, pageDamageFromEnv+"="+strconv.Itoa(from))
		out, err := cmd.CombinedOutput()
		text := string(out)
		from += strings.Count(text, "\nchecked ")
		if strings.HasPrefix(text, "checked ") {
			from++
		}
		switch {
		case err == nil:
			if from < len(inputs) {
				t.Fatalf("the child stopped after %d of %d inputs:\n%s", from, len(inputs), text)
			}
		case strings.Contains(text, "fatal error: fault"):
			i := strings.Index(text, "fatal error: fault")
			faults = append(faults, fmt.Sprintf("input %d: %.1500s", from, text[i:]))
			from++
		case strings.Contains(text, "\n--- FAIL"):
			// A failed input (the child goes on to the next one).
			failed++
			t.Errorf("%v:\n%s", err, failureLines(text))
		default:
			t.Fatalf("input %d: %v\n%s", from, err, text)
		}
	}
	t.Logf("%d inputs with damaged pages: %d faulted the process, children failed %d times", len(inputs), len(faults), failed)
	for _, f := range faults {
		t.Errorf("a journal with a damaged page faulted the process: %s", f)
	}
}

// failureLines returns the lines of a child test's output that report a
// failure, and the subtest lines before them.
func failureLines(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "--- FAIL") || strings.HasPrefix(strings.TrimSpace(line), "fuzz_test.go:") {
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return b.String()
}

// findingEnv names the input a child process of TestJournalFuzzFindings
// checks.
const findingEnv = "STORE_FUZZ_FINDING"

// TestJournalFuzzFindings re-checks inputs FuzzJournalBytes found
// (testdata/journalfuzz/*.db.gz), each in a child process (this test
// binary re-executed), since each once crashed the process or failed a
// check: each must now pass checkJournalBytes, and a crash fails the test
// with its report.
func TestJournalFuzzFindings(t *testing.T) {
	if p := os.Getenv(findingEnv); p != "" {
		checkJournalBytes(t, newScratch(t.TempDir()), gunzipFile(t, p), new(string))
		return
	}
	files, err := filepath.Glob(filepath.Join("testdata", "journalfuzz", "*.db.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no findings in testdata/journalfuzz: %v", err)
	}
	if testing.Short() {
		// The fast tier (mutation runs), in this process: see
		// TestJournalPageDamage.
		sf := newScratch(t.TempDir())
		for _, f := range files {
			t.Run(filepath.Base(f), func(t *testing.T) { checkJournalBytes(t, sf, gunzipFile(t, f), new(string)) })
		}
		return
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			abs, _ := filepath.Abs(f)
			cmd := exec.Command(os.Args[0], "-test.run=^TestJournalFuzzFindings$", "-test.v", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), findingEnv+"="+abs)
			out, err := cmd.CombinedOutput()
			text := string(out)
			switch {
			case err != nil && strings.Contains(text, "fatal error"):
				i := strings.Index(text, "fatal error")
				t.Errorf("reading %s crashes the process: %.1500s", f, text[i:])
			case err != nil:
				t.Errorf("%s: %v\n%s", f, err, text)
			}
		})
	}
}

func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cleanJournalError reports whether err is one of the errors a damaged
// journal may give.
func cleanJournalError(err error) bool {
	return errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrNotJournal) || errors.Is(err, store.ErrNewerFormat)
}

// verifyMissed reports a read that failed on a journal Verify passed.
func verifyMissed(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("Verify passed, but "+format, args...)
}

// scratchFile is the file checkJournalBytes rewrites for each input, in
// a directory that lives as long as the fuzz target or test: creating a
// file (and a directory) per input made inode allocation on the dev
// machine's ext4 the bottleneck of a fuzzing run.
type scratchFile struct{ dir, path string }

func newScratch(dir string) *scratchFile {
	return &scratchFile{dir: dir, path: filepath.Join(dir, "journal.db")}
}

// lockHeld reports whether some open file description holds a lock on
// path (bbolt locks its file with flock).
func lockHeld(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// checkJournalBytes runs the reads on data, keeping in *step the one under
// way.
func checkJournalBytes(t *testing.T, sf *scratchFile, data []byte, step *string) {
	path := sf.path
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Once every journal opened below is closed, nothing may hold the
	// file's lock.
	defer func() {
		if leaked := lockHeld(t, path); leaked {
			// The next input gets a fresh file, so that it is not refused
			// with ErrLocked for this one.
			sf.path = filepath.Join(sf.dir, fmt.Sprintf("journal-%d.db", time.Now().UnixNano()))
			t.Errorf("the file stays locked after every journal opened on it was closed (%s): a failed Open leaked its file and lock", *step)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := func(what string, err error) bool {
		t.Helper()
		*step = "after " + what
		if err == nil {
			return false
		}
		if !cleanJournalError(err) {
			t.Fatalf("%s: %v (%T): want nil or an error wrapping ErrCorrupt, ErrNotJournal or ErrNewerFormat", what, err, err)
		}
		return true
	}

	*step = "Open read-only"
	j, err := store.Open(path, &store.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond})
	if bad("Open read-only", err) {
		return
	}
	defer j.Close() // after a recovered panic too: no mapping outlives the input
	*step = "Verify"
	_, verr := j.Verify(ctx)
	bad("Verify", verr)
	var n uint64
	*step = "ReadAll"
	err = j.ReadAll(ctx, 0, func(events.Event) error { n++; return nil })
	if bad("ReadAll", err) && verr == nil {
		verifyMissed(t, "ReadAll failed after %d events: %v", n, err)
	}
	*step = "Sessions"
	sessions, err := j.Sessions(ctx)
	if bad("Sessions", err) && verr == nil {
		verifyMissed(t, "Sessions failed: %v", err)
	}
	for _, s := range sessions {
		*step = "Head"
		_, err := j.Head(ctx, s.Session)
		if bad("Head", err) && verr == nil {
			verifyMissed(t, "Head(%s) failed: %v", s.Session, err)
		}
		var last uint64
		*step = "ReadSession"
		err = j.ReadSession(ctx, s.Session, 1, func(e events.Event) error { last = e.Seq; return nil })
		if bad("ReadSession", err) && verr == nil {
			verifyMissed(t, "ReadSession(%s) failed: %v", s.Session, err)
		}
		if err == nil && verr == nil && last != s.LastSeq {
			verifyMissed(t, "session %s reads %d events, its head says %d", s.Session, last, s.LastSeq)
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
	defer j.Close()
	*step = "ReadAll (writable)"
	err = j.ReadAll(ctx, 0, func(events.Event) error { return nil })
	if bad("ReadAll (writable)", err) && verr == nil {
		verifyMissed(t, "ReadAll on a writable open failed: %v", err)
	}
	// Then it appends, if the history read cleanly (run refuses a journal
	// whose history does not; appending to a damaged journal is a known
	// bug, RELIABILITY.md). The commit reads pages too and rewrites them
	// whole, including parts no read depends on (the length of a branch
	// page's key, compared only up to its first differing byte), so an
	// append may fail where Verify passed, but only with a clean error.
	if err == nil {
		*step = "Append"
		_, err = j.Append(ctx, events.NewID(), store.NoStream, []events.Event{storetest.Event("server-z", 0, time.Date(2025, 5, 7, 15, 0, 0, 0, time.UTC))})
		bad("Append", err)
	}
	if err := j.Close(); err != nil && !cleanJournalError(err) {
		t.Fatalf("Close writable: %v", err)
	}
}
