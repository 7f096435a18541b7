// Package storetest is the conformance suite every journal implementation
// in package store must pass (the bbolt [store.Journal] and the in-memory
// [store.MemJournal]), plus helpers for tests that damage journal files.
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// Journal is what the suite needs from a journal: the methods shared by
// *store.Journal and *store.MemJournal.
type Journal interface {
	Append(ctx context.Context, session uuid.UUID, exp store.Expect, evs []events.Event) (store.AppendResult, error)
	Submit(session uuid.UUID, exp store.Expect, evs []events.Event) *store.Pending
	Sessions(ctx context.Context) ([]store.SessionInfo, error)
	Head(ctx context.Context, session uuid.UUID) (store.SessionInfo, error)
	ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error
	ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
	Follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
	Verify(ctx context.Context) (store.VerifyReport, error)
	Close() error
}

// Run runs the conformance suite. open must return a new, empty journal
// for each call, and arrange for it to be closed when t ends (Close is
// idempotent, so a test may close it earlier).
func Run(t *testing.T, open func(t *testing.T) Journal) {
	tests := []struct {
		name string
		fn   func(t *testing.T, j Journal)
	}{
		{"RoundTrip", testRoundTrip},
		{"GaplessSeqs", testGaplessSeqs},
		{"GlobalOrder", testGlobalOrder},
		{"Expect", testExpect},
		{"ConflictInBurst", testConflictInBurst},
		{"SameSessionRace", testSameSessionRace},
		{"Idempotent", testIdempotent},
		{"Invalid", testInvalid},
		{"ReadAllFrom", testReadAllFrom},
		{"ReadStopsOnError", testReadStopsOnError},
		{"ReadLarge", testReadLarge},
		{"Follow", testFollow},
		{"Verify", testVerify},
		{"HashChain", testHashChain},
		{"SessionsOrder", testSessionsOrder},
		{"NotFound", testNotFound},
		{"Closed", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// Event returns a realistic event (about 200 bytes encoded) about server:
// a lifecycle transition with a classified error, at time t.
func Event(server string, attempt int, t time.Time) events.Event {
	return events.New(t, server, &events.ServerTransitioned{
		From: events.StateReady, To: events.StateReconnecting, Trigger: "transport_closed",
		Attempt: attempt,
		Error:   &events.ClassifiedError{Class: events.ErrTransportClosed, Message: "read |0: file already closed"},
	})
}

var t0 = time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC)

// batch returns n events about server with increasing times.
func batch(server string, n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = Event(server, i+1, t0.Add(time.Duration(i)*time.Millisecond))
	}
	return evs
}

func mustAppend(t *testing.T, j Journal, sid uuid.UUID, exp store.Expect, evs []events.Event) store.AppendResult {
	t.Helper()
	res, err := j.Append(t.Context(), sid, exp, evs)
	if err != nil {
		t.Fatalf("Append(%s, %s, %d events): %v", sid, exp, len(evs), err)
	}
	return res
}

func readSession(t *testing.T, j Journal, sid uuid.UUID, from uint64) []events.Event {
	t.Helper()
	var out []events.Event
	if err := j.ReadSession(t.Context(), sid, from, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ReadSession(%s, %d): %v", sid, from, err)
	}
	return out
}

func readAll(t *testing.T, j Journal, from uint64) []events.Event {
	t.Helper()
	var out []events.Event
	if err := j.ReadAll(t.Context(), from, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ReadAll(%d): %v", from, err)
	}
	return out
}

func head(t *testing.T, j Journal, sid uuid.UUID) store.SessionInfo {
	t.Helper()
	info, err := j.Head(t.Context(), sid)
	if err != nil {
		t.Fatalf("Head(%s): %v", sid, err)
	}
	return info
}

func testRoundTrip(t *testing.T, j Journal) {
	sid := events.NewID()
	in := []events.Event{
		events.New(t0, "", &events.SessionStarted{Seed: 42, Build: "test", Version: "v0"}),
		Event("github", 1, t0.Add(time.Second)),
		events.New(t0.Add(2*time.Second), "github", &events.PingFailed{Attempt: 1, Consecutive: 2, Error: "timeout"}),
	}
	in[1].Cause = 1
	res := mustAppend(t, j, sid, store.NoStream, in)
	if res.FirstSeq != 1 || res.LastSeq != 3 || res.FirstGPos != 1 || res.LastGPos != 3 || res.Duplicate {
		t.Fatalf("result = %+v, want seqs 1..3 gpos 1..3", res)
	}
	if len(res.Events) != 3 {
		t.Fatalf("result has %d events, want 3", len(res.Events))
	}
	for i, e := range res.Events {
		if e.ID == uuid.Nil || e.Session != sid || e.Seq != uint64(i+1) || e.GPos != uint64(i+1) || e.V != e.Kind.Version() {
			t.Errorf("result event %d = %+v: positions not filled", i, e)
		}
	}
	if in[0].ID != uuid.Nil || in[0].Seq != 0 {
		t.Errorf("Append modified the caller's events: %+v", in[0])
	}
	got := readSession(t, j, sid, 1)
	if !reflect.DeepEqual(got, res.Events) {
		t.Fatalf("read back:\n%+v\nwant:\n%+v", got, res.Events)
	}
	info := head(t, j, sid)
	want := store.SessionInfo{Session: sid, LastSeq: 3, FirstGPos: 1, LastGPos: 3,
		FirstTime: in[0].Time, LastTime: in[2].Time, Head: info.Head}
	if info != want {
		t.Errorf("head = %+v, want %+v", info, want)
	}
	if info.Head == ([32]byte{}) {
		t.Errorf("head hash is zero")
	}
	if got := readSession(t, j, sid, 3); len(got) != 1 || got[0].Seq != 3 {
		t.Errorf("ReadSession from 3 = %+v, want seq 3 only", got)
	}
	if got := readSession(t, j, sid, 4); len(got) != 0 {
		t.Errorf("ReadSession from 4 = %+v, want nothing", got)
	}
}

func testGaplessSeqs(t *testing.T, j Journal) {
	sid := events.NewID()
	var last uint64
	for i := 1; i <= 20; i++ {
		res := mustAppend(t, j, sid, store.Exact(last), batch("s", i%3+1))
		if res.FirstSeq != last+1 {
			t.Fatalf("append %d: first seq %d, want %d", i, res.FirstSeq, last+1)
		}
		last = res.LastSeq
	}
	got := readSession(t, j, sid, 0)
	if uint64(len(got)) != last {
		t.Fatalf("read %d events, want %d", len(got), last)
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

func testGlobalOrder(t *testing.T, j Journal) {
	const sessions, perSession = 8, 25
	sids := make([]uuid.UUID, sessions)
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sids {
		sids[i] = events.NewID()
		wg.Go(func() {
			for k := range perSession {
				if _, err := j.Append(t.Context(), sids[i], store.Exact(uint64(k)), batch(fmt.Sprint("s", i), 1)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := readAll(t, j, 0)
	if len(all) != sessions*perSession {
		t.Fatalf("ReadAll returned %d events, want %d", len(all), sessions*perSession)
	}
	lastSeq := map[uuid.UUID]uint64{}
	for i, e := range all {
		if e.GPos != uint64(i+1) {
			t.Fatalf("event %d has gpos %d: global order has a gap", i, e.GPos)
		}
		if e.Seq != lastSeq[e.Session]+1 {
			t.Fatalf("gpos %d: session %s seq %d after %d", e.GPos, e.Session, e.Seq, lastSeq[e.Session])
		}
		lastSeq[e.Session] = e.Seq
	}
	for _, sid := range sids {
		if lastSeq[sid] != perSession {
			t.Errorf("session %s: %d events, want %d", sid, lastSeq[sid], perSession)
		}
	}
}

func testExpect(t *testing.T, j Journal) {
	ctx := t.Context()
	sid := events.NewID()
	mustAppend(t, j, sid, store.NoStream, batch("s", 2))
	for _, exp := range []store.Expect{store.NoStream, store.Exact(1), store.Exact(3)} {
		if _, err := j.Append(ctx, sid, exp, batch("s", 1)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("Append with %s at seq 2: err = %v, want ErrConflict", exp, err)
		}
	}
	if info := head(t, j, sid); info.LastSeq != 2 {
		t.Fatalf("conflicting appends changed the session: last seq %d", info.LastSeq)
	}
	if res := mustAppend(t, j, sid, store.Exact(2), batch("s", 1)); res.LastSeq != 3 {
		t.Errorf("Exact(2): last seq %d, want 3", res.LastSeq)
	}
	if res := mustAppend(t, j, sid, store.Any, batch("s", 1)); res.LastSeq != 4 {
		t.Errorf("Any: last seq %d, want 4", res.LastSeq)
	}
	other := events.NewID()
	if _, err := j.Append(ctx, other, store.Exact(1), batch("s", 1)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Exact(1) on a new session: err = %v, want ErrConflict", err)
	}
	if res := mustAppend(t, j, other, store.Exact(0), batch("s", 1)); res.LastSeq != 1 {
		t.Errorf("Exact(0) on a new session: last seq %d, want 1", res.LastSeq)
	}
}

// testConflictInBurst submits many appends at once so that they share
// commits; one of them conflicts and must fail alone.
func testConflictInBurst(t *testing.T, j Journal) {
	const n = 64
	sids := make([]uuid.UUID, n)
	pend := make([]*store.Pending, n)
	for i := range pend {
		sids[i] = events.NewID()
		exp := store.NoStream
		if i == n/2 {
			exp = store.Exact(7) // the new session is at 0: conflicts
		}
		pend[i] = j.Submit(sids[i], exp, batch("s", 2))
	}
	for i, p := range pend {
		<-p.Done()
		res, err := p.Wait(t.Context())
		if i == n/2 {
			if !errors.Is(err, store.ErrConflict) {
				t.Errorf("conflicting append: err = %v, want ErrConflict", err)
			}
			continue
		}
		if err != nil || res.LastSeq != 2 {
			t.Errorf("append %d: %+v, %v; want last seq 2", i, res, err)
		}
	}
	if _, err := j.Head(t.Context(), sids[n/2]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("conflicting session exists: %v", err)
	}
	if got := readAll(t, j, 1); len(got) != 2*(n-1) {
		t.Errorf("journal holds %d events, want %d", len(got), 2*(n-1))
	}
}

// testSameSessionRace has many writers race to append at the same
// version: exactly one wins each round.
func testSameSessionRace(t *testing.T, j Journal) {
	sid := events.NewID()
	const writers, rounds = 8, 5
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range writers {
			wg.Go(func() {
				_, err := j.Append(t.Context(), sid, store.Exact(uint64(round)), batch("s", 1))
				switch {
				case err == nil:
					mu.Lock()
					wins++
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d appends at Exact(%d) won, want 1", round, wins, round)
		}
	}
	if info := head(t, j, sid); info.LastSeq != rounds {
		t.Errorf("last seq %d, want %d", info.LastSeq, rounds)
	}
}

func testIdempotent(t *testing.T, j Journal) {
	ctx := t.Context()
	sid := events.NewID()
	mustAppend(t, j, sid, store.NoStream, batch("s", 1))
	evs := batch("s", 3)
	for i := range evs {
		evs[i].ID = events.NewID()
	}
	first := mustAppend(t, j, sid, store.Exact(1), evs)
	before := head(t, j, sid)

	// A retry, even with a stale expectation, returns the original positions.
	again := mustAppend(t, j, sid, store.Exact(1), evs)
	if !again.Duplicate || again.FirstSeq != first.FirstSeq || again.LastSeq != first.LastSeq ||
		again.FirstGPos != first.FirstGPos || again.LastGPos != first.LastGPos {
		t.Fatalf("retry = %+v, want duplicate of %+v", again, first)
	}
	if !reflect.DeepEqual(again.Events, first.Events) {
		t.Errorf("retry events:\n%+v\nwant:\n%+v", again.Events, first.Events)
	}
	if after := head(t, j, sid); after != before {
		t.Errorf("retry changed the head: %+v → %+v", before, after)
	}
	p := j.Submit(sid, store.Any, evs[1:])
	if res, err := p.Wait(ctx); err != nil || !res.Duplicate || res.FirstSeq != 3 || res.LastSeq != 4 {
		t.Errorf("retry of a contiguous tail = %+v, %v; want duplicate seqs 3..4", res, err)
	}

	partial := append([]events.Event{evs[2]}, batch("s", 1)...)
	if _, err := j.Append(ctx, sid, store.Any, partial); !errors.Is(err, store.ErrConflict) {
		t.Errorf("partial overlap: err = %v, want ErrConflict", err)
	}
	reordered := []events.Event{evs[1], evs[0]}
	if _, err := j.Append(ctx, sid, store.Any, reordered); !errors.Is(err, store.ErrConflict) {
		t.Errorf("reordered retry: err = %v, want ErrConflict", err)
	}
	if _, err := j.Append(ctx, events.NewID(), store.Any, evs); !errors.Is(err, store.ErrConflict) {
		t.Errorf("same ids in another session: err = %v, want ErrConflict", err)
	}
	if after := head(t, j, sid); after != before {
		t.Errorf("rejected appends changed the head: %+v → %+v", before, after)
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func testInvalid(t *testing.T, j Journal) {
	ctx := t.Context()
	sid := events.NewID()
	dupID := batch("s", 2)
	dupID[0].ID = events.NewID()
	dupID[1].ID = dupID[0].ID
	for name, c := range map[string]struct {
		sid uuid.UUID
		evs []events.Event
	}{
		"zero session": {uuid.Nil, batch("s", 1)},
		"no events":    {sid, nil},
		"nil payload":  {sid, []events.Event{{Kind: events.KindPingFailed}}},
		"kind mismatch": {sid, []events.Event{{Kind: events.KindPingFailed,
			Payload: &events.SessionStopped{}}}},
		"shared id": {sid, dupID},
	} {
		if _, err := j.Append(ctx, c.sid, store.Any, c.evs); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: Append err = %v, want ErrInvalid", name, err)
		}
		if _, err := j.Submit(c.sid, store.Any, c.evs).Wait(ctx); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: Submit err = %v, want ErrInvalid", name, err)
		}
	}
	// A payload given without Kind takes its payload's kind.
	res := mustAppend(t, j, sid, store.NoStream, []events.Event{{Payload: &events.SessionStopped{Reason: events.ReasonShutdown}}})
	if res.Events[0].Kind != events.KindSessionStopped {
		t.Errorf("kind = %q, want %q", res.Events[0].Kind, events.KindSessionStopped)
	}
}

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
	for name, read := range map[string]func(fn func(events.Event) error) error{
		"ReadSession": func(fn func(events.Event) error) error { return j.ReadSession(t.Context(), sid, 1, fn) },
		"ReadAll":     func(fn func(events.Event) error) error { return j.ReadAll(t.Context(), 1, fn) },
		"Follow":      func(fn func(events.Event) error) error { return j.Follow(t.Context(), 1, fn) },
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
