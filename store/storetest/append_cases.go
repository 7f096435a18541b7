package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

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
