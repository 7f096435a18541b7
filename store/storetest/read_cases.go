package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

func testReadAllFrom(t *testing.T, j Journal) {
	a, b := events.NewID(), events.NewID()
	mustAppend(t, j, a, store.Any, batch("a", 3))
	mustAppend(t, j, b, store.Any, batch("b", 2))
	mustAppend(t, j, a, store.Any, batch("a", 2))
	for from := uint64(0); from <= 8; from++ {
		got := readAll(t, j, from)
		start := max(from, 1)
		want := 0
		if start <= 7 {
			want = int(7 - start + 1)
		}
		if len(got) != want {
			t.Fatalf("ReadAll(%d) returned %d events, want %d", from, len(got), want)
		}
		for i, e := range got {
			if e.GPos != start+uint64(i) {
				t.Fatalf("ReadAll(%d)[%d] has gpos %d", from, i, e.GPos)
			}
		}
	}
	if got := readAll(t, j, 4); got[0].Session != b || got[0].Seq != 1 || got[2].Session != a || got[2].Seq != 4 {
		t.Errorf("ReadAll(4) = %v %d, %v %d", got[0].Session, got[0].Seq, got[2].Session, got[2].Seq)
	}
}

func testReadStopsOnError(t *testing.T, j Journal) {
	sid := events.NewID()
	mustAppend(t, j, sid, store.Any, batch("s", 5))
	stop := errors.New("enough")
	// A Follow that ignores fn's error would wait for commits forever.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for name, read := range map[string]func(fn func(events.Event) error) error{
		"ReadSession": func(fn func(events.Event) error) error { return j.ReadSession(ctx, sid, 1, fn) },
		"ReadAll":     func(fn func(events.Event) error) error { return j.ReadAll(ctx, 1, fn) },
		"Follow":      func(fn func(events.Event) error) error { return j.Follow(ctx, 1, fn) },
	} {
		n := 0
		err := read(func(events.Event) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 2 {
			t.Errorf("%s: err = %v after %d events, want %v after 2", name, err, n, stop)
		}
	}
}

// testReadLarge reads more events than a read transaction takes at once,
// from two interleaved sessions, while fn appends (which must not
// deadlock: fn runs outside read transactions).
func testReadLarge(t *testing.T, j Journal) {
	a, b := events.NewID(), events.NewID()
	for range 15 {
		mustAppend(t, j, a, store.Any, batch("a", 100))
		mustAppend(t, j, b, store.Any, batch("b", 50))
	}
	if got := readSession(t, j, a, 0); len(got) != 1500 || got[1499].Seq != 1500 {
		t.Fatalf("ReadSession returned %d events", len(got))
	}
	n := 0
	err := j.ReadAll(t.Context(), 1, func(e events.Event) error {
		n++
		if e.GPos != uint64(n) {
			return fmt.Errorf("event %d has gpos %d", n, e.GPos)
		}
		if n%500 == 0 {
			_, err := j.Append(t.Context(), events.NewID(), store.NoStream, batch("c", 1))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 2250 {
		t.Fatalf("ReadAll delivered %d events, want at least 2250", n)
	}

	// Stopping midway, past the first chunk, returns fn's error and leaves
	// no reader goroutine behind.
	stop := errors.New("stop at 1000")
	before := runtime.NumGoroutine()
	n = 0
	err = j.ReadAll(t.Context(), 1, func(events.Event) error {
		if n++; n == 1000 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 1000 {
		t.Errorf("ReadAll stopped with %v after %d events, want %v after 1000", err, n, stop)
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) { // an exiting goroutine may linger a moment
			t.Errorf("%d goroutines before ReadAll, %d after", before, runtime.NumGoroutine())
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(t.Context())
	n = 0
	err = j.ReadSession(ctx, a, 1, func(events.Event) error {
		if n++; n == 700 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n < 700 || n >= 1500 {
		t.Errorf("ReadSession cancelled at 700 returned %v after %d events", err, n)
	}
}

func testFollow(t *testing.T, j Journal) {
	sid := events.NewID()
	mustAppend(t, j, sid, store.Any, batch("s", 2))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan events.Event, 16)
	done := make(chan error, 1)
	go func() { done <- j.Follow(ctx, 2, func(e events.Event) error { got <- e; return nil }) }()

	next := func() events.Event {
		t.Helper()
		select {
		case e := <-got:
			return e
		case err := <-done:
			t.Fatalf("Follow returned early: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("Follow delivered nothing within 10s")
		}
		return events.Event{}
	}
	if e := next(); e.GPos != 2 {
		t.Fatalf("first followed event has gpos %d, want 2", e.GPos)
	}
	for i := range 3 {
		mustAppend(t, j, sid, store.Any, batch("s", 1))
		if e := next(); e.GPos != uint64(3+i) || e.Seq != uint64(3+i) {
			t.Fatalf("followed event has gpos %d seq %d, want %d", e.GPos, e.Seq, 3+i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not stop within 10s of cancel")
	}
	select {
	case e := <-got:
		t.Errorf("unexpected event after the last append: %+v", e)
	default:
	}
}

func testVerify(t *testing.T, j Journal) {
	rep, err := j.Verify(t.Context())
	if err != nil || rep != (store.VerifyReport{}) {
		t.Fatalf("Verify of an empty journal = %+v, %v", rep, err)
	}
	for i := range 3 {
		mustAppend(t, j, events.NewID(), store.NoStream, batch("s", i+1))
	}
	rep, err = j.Verify(t.Context())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := (store.VerifyReport{Sessions: 3, Events: 6, LogEntries: 6}); rep != want {
		t.Errorf("Verify = %+v, want %+v", rep, want)
	}
}

func testSessionsOrder(t *testing.T, j Journal) {
	sids := make([]uuid.UUID, 5)
	for i := range sids {
		sids[i] = events.NewID()
		time.Sleep(time.Millisecond) // distinct UUIDv7 milliseconds
	}
	for i := len(sids) - 1; i >= 0; i-- { // append newest first
		mustAppend(t, j, sids[i], store.NoStream, batch("s", i+1))
	}
	list, err := j.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(sids) {
		t.Fatalf("Sessions returned %d, want %d", len(list), len(sids))
	}
	for i, info := range list {
		if info.Session != sids[i] || info.LastSeq != uint64(i+1) {
			t.Errorf("Sessions[%d] = %s with %d events, want %s with %d", i, info.Session, info.LastSeq, sids[i], i+1)
		}
		if h := head(t, j, info.Session); h != info {
			t.Errorf("Sessions[%d] = %+v, Head = %+v", i, info, h)
		}
	}
}

func testNotFound(t *testing.T, j Journal) {
	mustAppend(t, j, events.NewID(), store.Any, batch("s", 1))
	missing := events.NewID()
	if _, err := j.Head(t.Context(), missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Head: err = %v, want ErrNotFound", err)
	}
	err := j.ReadSession(t.Context(), missing, 1, func(events.Event) error { return nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadSession: err = %v, want ErrNotFound", err)
	}
}

func testClosed(t *testing.T, j Journal) {
	ctx := t.Context()
	sid := events.NewID()
	mustAppend(t, j, sid, store.Any, batch("s", 1))
	done := make(chan error, 1)
	go func() { done <- j.Follow(ctx, 1, func(events.Event) error { return nil }) }()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("Follow after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return within 10s of Close")
	}
	if _, err := j.Append(ctx, sid, store.Any, batch("s", 1)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append: err = %v, want ErrClosed", err)
	}
	if _, err := j.Submit(sid, store.Any, batch("s", 1)).Wait(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Submit: err = %v, want ErrClosed", err)
	}
	if _, err := j.Head(ctx, sid); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Head: err = %v, want ErrClosed", err)
	}
	if _, err := j.Sessions(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Sessions: err = %v, want ErrClosed", err)
	}
	if err := j.ReadAll(ctx, 1, func(events.Event) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadAll: err = %v, want ErrClosed", err)
	}
	if _, err := j.Verify(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Verify: err = %v, want ErrClosed", err)
	}
}

// testHashChain recomputes the chain over re-encoded records: encoding a
// decoded current-version event gives back its stored bytes.
func testHashChain(t *testing.T, j Journal) {
	sid := events.NewID()
	mustAppend(t, j, sid, store.NoStream, batch("s", 3))
	mustAppend(t, j, sid, store.Any, batch("s", 2))
	var h [32]byte
	for _, e := range readSession(t, j, sid, 1) {
		rec, err := events.Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		h = sha256.Sum256(append(h[:], rec...))
	}
	if got := head(t, j, sid).Head; got != h {
		t.Errorf("head hash %x, recomputed %x", got, h)
	}
}
