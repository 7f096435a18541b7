package replay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// reader is a replay.Reader over events in memory that ends each read with
// err (after the events).
type reader struct {
	evs          []events.Event
	sessErr, all error
}

func (r reader) ReadSession(_ context.Context, _ uuid.UUID, _ uint64, fn func(events.Event) error) error {
	for _, e := range r.evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	return r.sessErr
}

func (r reader) ReadAll(_ context.Context, _ uint64, fn func(events.Event) error) error {
	for _, e := range r.evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	return r.all
}

// A reader that holds no event of the session, and says nothing more, has
// an empty session: nothing to replay, verify or explain.
func TestAnEmptySession(t *testing.T) {
	ctx := context.Background()
	r := reader{}
	sid := uuid.New()
	if evs, err := replay.Session(ctx, r, sid); !errors.Is(err, replay.ErrEmptySession) || len(evs) != 0 {
		t.Errorf("Session = %d events, %v; want ErrEmptySession", len(evs), err)
	}
	if _, err := replay.At(ctx, r, sid, 0); !errors.Is(err, replay.ErrEmptySession) {
		t.Errorf("At = %v, want ErrEmptySession", err)
	}
	if err := replay.Verify(ctx, r, sid); !errors.Is(err, replay.ErrEmptySession) {
		t.Errorf("Verify = %v, want ErrEmptySession", err)
	}
	if _, err := replay.Why(ctx, r, sid, "mcp__gh__echo", 0); !errors.Is(err, replay.ErrEmptySession) {
		t.Errorf("Why = %v, want ErrEmptySession", err)
	}
}

// The journal's read errors come back as they are, with the events read
// before them.
func TestReadErrorsAreReturned(t *testing.T) {
	ctx := context.Background()
	evs := golden(t, "crash-loop.jsonl")
	sid := evs[0].Session
	broken := errors.New("disk on fire")
	got, err := replay.Session(ctx, reader{evs: evs[:3], sessErr: broken}, sid)
	if !errors.Is(err, broken) || len(got) != 3 {
		t.Errorf("Session = %d events, %v; want 3 and the read error", len(got), err)
	}
	last := uint64(len(evs))
	if snap, err := replay.At(ctx, reader{evs: evs, all: broken}, sid, last); !errors.Is(err, broken) || snap != nil {
		t.Errorf("At the last event with a failing global read = %v, %v; want the read error", snap, err)
	}
	// At stops the global read after the event asked for, before the
	// failure.
	if snap, err := replay.At(ctx, reader{evs: evs, all: broken}, sid, last-1); err != nil || snap.Seq != last-1 {
		t.Errorf("At seq %d, the global read failing after the last event = %v, %v", last-1, snap, err)
	}
}

// SeqAt finds the last event at or before a time: events at the same
// instant (an input and its decisions) all count.
func TestSeqAt(t *testing.T) {
	evs := golden(t, "crash-loop.jsonl")
	// Seqs 2 to 7 share a time (config.observed and its decisions), seqs
	// 8 and 9 a later one.
	if evs[1].Time != evs[6].Time || evs[7].Time <= evs[6].Time || evs[8].Time != evs[7].Time || evs[9].Time <= evs[8].Time {
		t.Fatalf("crash-loop.jsonl: seqs 2..10 not at the times the test expects")
	}
	for _, c := range []struct {
		name string
		at   int64
		seq  uint64
	}{
		{"the first event's time", evs[0].Time, 1},
		{"an input's time", evs[1].Time, 7},
		{"just before the next event", evs[7].Time - 1, 7},
		{"the next input's time, which its decision shares", evs[7].Time, 9},
		{"the last event's time", evs[len(evs)-1].Time, uint64(len(evs))},
		{"after the last event", evs[len(evs)-1].Time + 1e9, uint64(len(evs))},
	} {
		if got, err := replay.SeqAt(evs, c.at); err != nil || got != c.seq {
			t.Errorf("SeqAt(%s) = %d, %v; want %d", c.name, got, err, c.seq)
		}
	}
	if got, err := replay.SeqAt(evs, evs[0].Time-1); !errors.Is(err, replay.ErrNoSuchEvent) {
		t.Errorf("SeqAt before the first event = %d, %v; want ErrNoSuchEvent", got, err)
	}
	if got, err := replay.SeqAt(nil, evs[0].Time); !errors.Is(err, replay.ErrNoSuchEvent) {
		t.Errorf("SeqAt of no events = %d, %v; want ErrNoSuchEvent", got, err)
	}
}
