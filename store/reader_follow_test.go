package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// TestReaderFollowAcrossWriters: a Follow started with no writer delivers
// every event of three writers that come and go, each exactly once and in
// order, whether it reads them from the file or through the writer.
func TestReaderFollowAcrossWriters(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, noSync()).Close()
	var slot writerSlot
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: slot.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const writers, perWriter = 3, 700
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan events.Event, writers*perWriter)
	done := make(chan error, 1)
	go func() {
		done <- r.Follow(ctx, 1, func(e events.Event) error {
			got <- e
			if len(got) == cap(got) {
				return io.EOF
			}
			return nil
		})
	}()
	for w := range writers {
		j := mustOpen(t, path, &store.Options{NoSync: true, LockTimeout: 5 * time.Second})
		var s *served
		if w != 1 { // the second writer serves no reads: the reader waits for the file
			s = serve(j)
			slot.set(s)
		}
		sid := events.NewID()
		for i := 0; i < perWriter; i += 100 {
			if _, err := j.Append(t.Context(), sid, store.Any, evs(100)); err != nil {
				t.Fatal(err)
			}
		}
		if s != nil {
			slot.set(nil)
			s.stop()
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("Follow: %v after %d events", err, len(got))
	}
	close(got)
	want := uint64(1)
	for e := range got {
		if e.GPos != want {
			t.Fatalf("event at gpos %d, want %d (missed or repeated)", e.GPos, want)
		}
		want++
	}
}

// TestReaderFollowAcrossArchive: a Follow goes on across an archive that
// replaces the file under it (as run --retain does between two runs):
// the events appended after it arrive, none twice.
func TestReaderFollowAcrossArchive(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	for _, n := range []int{100, 50} {
		if _, err := j.Append(t.Context(), events.NewID(), store.NoStream, evs(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := store.OpenReader(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan uint64, 200)
	done := make(chan error, 1)
	go func() {
		done <- r.Follow(ctx, 1, func(e events.Event) error {
			got <- e.GPos
			if e.GPos == 170 {
				return io.EOF
			}
			return nil
		})
	}()
	for len(got) < 150 {
		time.Sleep(time.Millisecond)
	}
	if _, err := store.Archive(t.Context(), path, filepath.Join(filepath.Dir(path), "a1.db"), 100, []byte("base"), nil, nil); err != nil {
		t.Fatal(err)
	}
	w := mustOpen(t, path, noSync())
	if _, err := w.Append(t.Context(), events.NewID(), store.NoStream, evs(20)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("Follow across an archive: %v after %d events", err, len(got))
	}
	close(got)
	want := uint64(1)
	for g := range got {
		if g != want {
			t.Fatalf("gpos %d, want %d", g, want)
		}
		want++
	}
	if want != 171 {
		t.Fatalf("%d events, want 170", want-1)
	}
	if r.Base() != 100 {
		t.Errorf("Base after the archive = %d, want 100", r.Base())
	}
}

// TestReaderFollowSeesQuickWriters: writers that each open the journal,
// append one event and close it between two looks of a follower (as
// approve does) are all seen: the follower notices their commits in the
// file, not only their intent locks.
func TestReaderFollowSeesQuickWriters(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, noSync()).Close()
	r, err := store.OpenReader(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const writers = 20
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seen := make(chan uint64, writers)
	done := make(chan error, 1)
	go func() {
		done <- r.Follow(ctx, 1, func(e events.Event) error {
			seen <- e.GPos
			return nil
		})
	}()
	for i := range writers {
		w := mustOpen(t, path, noSync())
		if _, err := w.Append(t.Context(), events.NewID(), store.NoStream, evs(1)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-seen:
			if g != uint64(i+1) {
				t.Fatalf("followed gpos %d, want %d", g, i+1)
			}
		case <-ctx.Done():
			t.Fatalf("the commit of quick writer %d was not followed", i+1)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow after cancel: %v", err)
	}
}

// cutAfter is an answer that breaks off after n bytes, as when the writer
// stops in the middle of it.
type cutAfter struct {
	io.ReadCloser
	n int
}

func (c *cutAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.ReadCloser.Read(p)
	c.n -= n
	return n, err
}

// TestReaderAcrossBrokenAnswers: answers that break off in the middle (a
// writer stopping) are taken up again from where they broke, by
// position: every read still gives the file's answer, and a follow
// neither repeats nor skips an event.
func TestReaderAcrossBrokenAnswers(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	s := serve(j)
	defer s.stop()
	broken := func(ctx context.Context, req []byte) (io.ReadCloser, error) {
		rc, err := s.remote(ctx, req)
		if err != nil {
			return nil, err
		}
		return &cutAfter{ReadCloser: rc, n: 20_000}, nil // about 80 records
	}
	whole, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: s.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	want := readAllOf(t, whole)
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: broken})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := readAllOf(t, r); !reflect.DeepEqual(got, want) {
		t.Error("reads through answers that break off differ from whole ones")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	next := uint64(1)
	err = r.Follow(ctx, 1, func(e events.Event) error {
		if e.GPos != next {
			return fmt.Errorf("followed gpos %d, want %d", e.GPos, next)
		}
		next++
		if next > uint64(len(want.All)) {
			return io.EOF
		}
		return nil
	})
	if !errors.Is(err, io.EOF) {
		t.Errorf("Follow through answers that break off: %v", err)
	}
}
