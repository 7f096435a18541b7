package store_test

import (
	"context"
	"errors"
	"io"
	"os"
	"reflect"
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

// served is a writer's journal that answers a Reader's requests, as the
// control socket does for run and serve: each request is served by
// ServeRead on a goroutine of its own, over a pipe. stop makes it answer
// no more (as when run closes its socket before its journal).
type served struct {
	j       *store.Journal
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

func serve(j *store.Journal) *served {
	s := &served{j: j}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

func (s *served) remote(ctx context.Context, req []byte) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errors.New("no writer serves reads")
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	s.wg.Go(func() {
		defer stop()
		defer cancel()
		pw.CloseWithError(store.ServeRead(ctx, s.j, req, pw))
	})
	return readCloser{pr, cancel}, nil
}

type readCloser struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r readCloser) Close() error { r.cancel(); return r.PipeReader.Close() }

// stop ends every answer in progress and refuses new ones; the journal
// stays open until the caller closes it.
func (s *served) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// writerSlot is the Remote of a Reader beside writers that come and go:
// set puts one in (nil: none answers).
type writerSlot struct {
	mu sync.Mutex
	s  *served
}

func (w *writerSlot) set(s *served) {
	w.mu.Lock()
	w.s = s
	w.mu.Unlock()
}

func (w *writerSlot) remote(ctx context.Context, req []byte) (io.ReadCloser, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.s == nil {
		return nil, errors.New("no writer")
	}
	return w.s.remote(ctx, req)
}

// readerJournal appends through a writer and reads through a Reader of
// the same file, which reads through the writer: the conformance suite
// then checks that a Reader answers as the Journal does.
type readerJournal struct {
	*store.Journal
	r *store.Reader
	s *served
}

func (rj readerJournal) Sessions(ctx context.Context) ([]store.SessionInfo, error) {
	return rj.r.Sessions(ctx)
}

func (rj readerJournal) Head(ctx context.Context, id uuid.UUID) (store.SessionInfo, error) {
	return rj.r.Head(ctx, id)
}

func (rj readerJournal) ReadSession(ctx context.Context, id uuid.UUID, from uint64, fn func(events.Event) error) error {
	return rj.r.ReadSession(ctx, id, from, fn)
}

func (rj readerJournal) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return rj.r.ReadAll(ctx, from, fn)
}

func (rj readerJournal) Follow(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return rj.r.Follow(ctx, from, fn)
}

func (rj readerJournal) Verify(ctx context.Context) (store.VerifyReport, error) {
	return rj.r.Verify(ctx)
}

func (rj readerJournal) Close() error {
	rj.s.stop()
	err := rj.Journal.Close()
	_ = rj.r.Close()
	return err
}

func TestReaderConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Journal {
		path := tempPath(t)
		j := mustOpen(t, path, noSync())
		s := serve(j)
		r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: s.remote, Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rj := readerJournal{Journal: j, r: r, s: s}
		t.Cleanup(func() { _ = rj.Close() })
		return rj
	})
}

// readEverything is what the read commands ask of a journal.
type readEverything struct {
	Sessions    []store.SessionInfo
	Heads       []store.SessionInfo
	All         []events.Event
	BySession   [][]events.Event
	Checkpoints []store.Checkpoint
	Verify      store.VerifyReport
}

type reader interface {
	Sessions(ctx context.Context) ([]store.SessionInfo, error)
	Head(ctx context.Context, id uuid.UUID) (store.SessionInfo, error)
	ReadSession(ctx context.Context, id uuid.UUID, from uint64, fn func(events.Event) error) error
	ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error
	Follow(ctx context.Context, from uint64, fn func(events.Event) error) error
	Checkpoints(ctx context.Context) ([]store.Checkpoint, error)
	Verify(ctx context.Context) (store.VerifyReport, error)
}

func readAllOf(t *testing.T, r reader) readEverything {
	t.Helper()
	ctx := t.Context()
	var out readEverything
	var err error
	if out.Sessions, err = r.Sessions(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Sessions {
		h, err := r.Head(ctx, s.Session)
		if err != nil {
			t.Fatal(err)
		}
		out.Heads = append(out.Heads, h)
		var evs []events.Event
		if err := r.ReadSession(ctx, s.Session, 1, func(e events.Event) error { evs = append(evs, e); return nil }); err != nil {
			t.Fatal(err)
		}
		out.BySession = append(out.BySession, evs)
	}
	if err := r.ReadAll(ctx, 1, func(e events.Event) error { out.All = append(out.All, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if out.Checkpoints, err = r.Checkpoints(ctx); err != nil {
		t.Fatal(err)
	}
	if out.Verify, err = r.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	return out
}

// fill writes three sessions, one longer than a read chunk, and a
// checkpoint.
func fill(t *testing.T, j *store.Journal) {
	t.Helper()
	for i, n := range []int{3, 1300, 7} {
		sid := events.NewID()
		if _, err := j.Append(t.Context(), sid, store.NoStream, evs(n)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := j.SaveCheckpoint(1303, []byte("fold")); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReaderAnswersAsTheFile: the same reads of the same journal give the
// same answers through the writer, from the file under leases, and from a
// read-only Journal.
func TestReaderAnswersAsTheFile(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	s := serve(j)
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: s.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	throughWriter := readAllOf(t, r)
	s.stop()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	fromFile := readAllOf(t, r)
	ro := mustOpen(t, path, &store.Options{ReadOnly: true})
	direct := readAllOf(t, ro)
	_ = ro.Close()
	if len(direct.All) != 1310 || len(direct.Checkpoints) != 1 {
		t.Fatalf("direct read: %d events, %d checkpoints", len(direct.All), len(direct.Checkpoints))
	}
	if !reflect.DeepEqual(throughWriter, direct) {
		t.Error("the reads through the writer differ from the file's")
	}
	if !reflect.DeepEqual(fromFile, direct) {
		t.Error("the reads of the file under leases differ from a read-only Journal's")
	}
}

// TestReaderGivesWayToTheWriter: a Reader that has just read (and so
// holds a lease of the file) does not keep a writer from opening it; it
// then reads through the writer, and from the file again once the writer
// is gone.
func TestReaderGivesWayToTheWriter(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var slot writerSlot
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: slot.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Sessions(t.Context()); err != nil { // takes a lease
		t.Fatal(err)
	}
	// With the journal's own read-only open, this Open would fail after
	// its LockTimeout: the reader holds the lock until it closes.
	ro := mustOpen(t, path, &store.Options{ReadOnly: true})
	if _, err := store.Open(path, &store.Options{NoSync: true, LockTimeout: 100 * time.Millisecond}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("a writer opened a file a read-only Journal holds: %v", err)
	}
	_ = ro.Close()
	w := mustOpen(t, path, &store.Options{NoSync: true, LockTimeout: time.Second})
	s := serve(w)
	slot.set(s)
	sid := events.NewID()
	if _, err := w.Append(t.Context(), sid, store.NoStream, evs(2)); err != nil {
		t.Fatal(err)
	}
	list, err := r.Sessions(t.Context())
	if err != nil || len(list) != 4 || list[3].Session != sid {
		t.Fatalf("Sessions through the writer: %d sessions, %v", len(list), err)
	}
	slot.set(nil)
	s.stop()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(readAllOf(t, r).All); n != 1312 {
		t.Fatalf("after the writer: %d events, want 1312", n)
	}
}

// errorsOf runs the reads that can meet a damaged record and returns
// their errors.
func errorsOf(t *testing.T, r reader, sid uuid.UUID) []error {
	t.Helper()
	ctx := t.Context()
	nop := func(events.Event) error { return nil }
	_, verr := r.Verify(ctx)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return []error{
		r.ReadAll(ctx, 1, nop),
		r.ReadSession(ctx, sid, 1, nop),
		verr,
		r.Follow(fctx, 1, nop),
	}
}

// TestReaderCorruptThroughWriter: a damaged record read through the
// writer fails as it does read from the file: the same message, and the
// same *CorruptError (session, seq, gpos, reason) under errors.As.
func TestReaderCorruptThroughWriter(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	list, err := j.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sid := list[1].Session
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.FlipRecordByte(t, path, sid, 700)
	ro := mustOpen(t, path, &store.Options{ReadOnly: true})
	want := errorsOf(t, ro, sid)
	_ = ro.Close()
	w := mustOpen(t, path, noSync())
	s := serve(w)
	defer s.stop()
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: s.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := errorsOf(t, r, sid)
	for i := range want {
		var wc, gc *store.CorruptError
		if !errors.As(want[i], &wc) {
			t.Fatalf("read %d of the file: %v, want a *CorruptError", i, want[i])
		}
		if got[i] == nil || got[i].Error() != want[i].Error() {
			t.Errorf("read %d through the writer: %v\nwant %v", i, got[i], want[i])
			continue
		}
		if !errors.As(got[i], &gc) || gc.Session != wc.Session || gc.Seq != wc.Seq || gc.GPos != wc.GPos || gc.Reason != wc.Reason ||
			!errors.Is(got[i], store.ErrCorrupt) || errors.Is(got[i], store.ErrNotFound) {
			t.Errorf("read %d through the writer: %#v, want %#v", i, gc, wc)
		}
		if (wc.Err == nil) != (gc.Err == nil) || errors.Is(want[i], events.ErrCorrupt) != errors.Is(got[i], events.ErrCorrupt) {
			t.Errorf("read %d: the underlying error differs: %v / %v", i, gc.Err, wc.Err)
		}
	}
	if _, err := r.Head(t.Context(), events.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Head of an unknown session through the writer: %v, want ErrNotFound", err)
	}
}

// TestReaderOfAnOlderWriter: a writer that answers the read request with
// the control socket's JSON error (an mcpledger from before reads were
// served) fails the read at once, saying so.
func TestReaderOfAnOlderWriter(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	old := func(context.Context, []byte) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(`{"ok":false,"error":"unknown op \"read\""}` + "\n")), nil
	}
	_, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: old, Wait: time.Second})
	if !errors.Is(err, store.ErrNoReads) || !strings.Contains(err.Error(), `unknown op "read"`) {
		t.Errorf("OpenReader beside an older writer: %v, want ErrNoReads with its answer", err)
	}
}

// TestReaderWaitsForASilentWriter: a writer that serves no reads keeps a
// Reader waiting for Wait, then the read fails with ErrLocked; once it
// closes, the reader reads the file.
func TestReaderWaitsForASilentWriter(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	t0 := time.Now()
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Wait: 50 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || r != nil {
		t.Fatalf("OpenReader beside a writer that serves no reads: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second { // DefaultReaderWait is 10s
		t.Errorf("a Wait of 50ms waited %v", d)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = j.Close()
	}()
	r, err = store.OpenReader(t.Context(), path, nil) // waits up to DefaultReaderWait
	if err != nil {
		t.Fatalf("OpenReader once the writer closes: %v", err)
	}
	defer r.Close()
	if list, err := r.Sessions(t.Context()); err != nil || len(list) != 3 {
		t.Errorf("Sessions: %d, %v", len(list), err)
	}
}

// TestReaderVerifyGivesWay: a writer that wants the file while a Reader
// verifies it opens at once (the verify is cancelled, its lease ends), and
// the verify is done again through the writer, with the whole file's
// report.
func TestReaderVerifyGivesWay(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	sid := events.NewID()
	for range 200 {
		if _, err := j.Append(t.Context(), sid, store.Any, evs(500)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := j.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var slot writerSlot
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: slot.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type result struct {
		rep store.VerifyReport
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		rep, err := r.Verify(t.Context())
		done <- result{rep, err, time.Now()}
	}()
	time.Sleep(20 * time.Millisecond) // into the verify of 100,000 records
	w := mustOpen(t, path, &store.Options{NoSync: true, LockTimeout: 30 * time.Second})
	opened := time.Now()
	s := serve(w)
	slot.set(s)
	defer s.stop()
	res := <-done
	if res.err != nil || res.rep != want {
		t.Fatalf("Verify = %+v, %v; want %+v", res.rep, res.err, want)
	}
	if !opened.Before(res.at) {
		t.Errorf("the writer opened after the verify ended: the verify kept it out")
	}
}

// TestReaderLease: a read leaves the file shared-locked for Lease (the
// next reads reuse the open), and no longer: then a writer could take it
// without a word to the reader.
func TestReaderLease(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	exclusive := func() bool { // could another process lock it for writing now?
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return false
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return true
	}
	long, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if exclusive() {
		t.Error("a reader with an hour's lease let go of the file within 50ms")
	}
	long.Close()
	if !exclusive() {
		t.Error("a closed reader still holds the file")
	}
	short, err := store.OpenReader(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	for deadline := time.Now().Add(10 * time.Second); !exclusive(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a reader's lease of DefaultLease did not end within 10s")
		}
	}
}

// TestReaderAnswerEndsWithCtx: a read through a writer that never answers
// ends when its context does.
func TestReaderAnswerEndsWithCtx(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	silent := func(ctx context.Context, req []byte) (io.ReadCloser, error) {
		pr, _ := io.Pipe() // nothing is ever written
		return pr, nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := store.OpenReader(ctx, path, &store.ReaderOptions{Remote: silent}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OpenReader with a deadline through a silent writer: %v, want DeadlineExceeded", err)
	}
}
