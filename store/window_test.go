package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// TestRetryWindow: a retry is recognised while its events are among the
// journal's last RetryWindow events, including after a reopen; beyond, an
// append with old IDs and Exact fails on the version, not as a retry.
func TestRetryWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sid, other := events.NewID(), events.NewID()
	first, err := j.Append(ctx, sid, NoStream, []events.Event{ev("a", 1), ev("a", 2)})
	if err != nil {
		t.Fatal(err)
	}
	filler := func(n int) {
		for n > 0 {
			evs := make([]events.Event, min(n, 1000))
			for i := range evs {
				evs[i] = ev("b", i)
			}
			if _, err := j.Append(ctx, other, Any, evs); err != nil {
				t.Fatal(err)
			}
			n -= len(evs)
		}
	}
	filler(RetryWindow - 2)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if j, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close() }()
	res, err := j.Append(ctx, sid, Exact(0), first.Events)
	if err != nil || !res.Duplicate || res.FirstGPos != 1 {
		t.Fatalf("retry at the edge of the window = %+v, %v", res, err)
	}
	filler(1) // the window now starts at event 2
	for _, when := range []string{"", " after a reopen"} {
		if when != "" {
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if j, err = Open(path, &Options{NoSync: true}); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := j.Append(ctx, sid, Any, first.Events[1:]); err != nil || !res.Duplicate || res.FirstSeq != 2 {
			t.Fatalf("retry of event 2, inside the window%s = %+v, %v", when, res, err)
		}
		if _, err := j.Append(ctx, sid, Any, first.Events); !errors.Is(err, ErrConflict) {
			t.Fatalf("retry of events 1 and 2, only 2 in the window%s: %v, want ErrConflict", when, err)
		}
		if _, err := j.Append(ctx, sid, Exact(0), first.Events[:1]); !errors.Is(err, ErrConflict) {
			t.Fatalf("retry of event 1, beyond the window, with Exact(0)%s: %v, want ErrConflict", when, err)
		}
	}
	// With Any, an event older than the window is appended again.
	if res, err := j.Append(ctx, sid, Any, first.Events[:1]); err != nil || res.Duplicate || res.FirstSeq != 3 {
		t.Fatalf("retry of event 1, beyond the window, with Any = %+v, %v", res, err)
	}
	// The window goes on sliding, one event per event appended; event 1's
	// new copy is in it.
	filler(2)
	if res, err := j.Append(ctx, sid, Any, first.Events[:1]); err != nil || !res.Duplicate || res.FirstSeq != 3 {
		t.Fatalf("retry of event 1's second copy = %+v, %v; want a duplicate of seq 3", res, err)
	}
}
