package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

// withCheckpoints is a journal that keeps the given checkpoints, and
// records where ReadAll started.
type withCheckpoints struct {
	*store.MemJournal
	cps  []projections.Stored
	err  error
	from []uint64
}

func (w *withCheckpoints) Checkpoints(context.Context) ([]projections.Stored, error) {
	return w.cps, w.err
}

func (w *withCheckpoints) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	w.from = append(w.from, from)
	return w.MemJournal.ReadAll(ctx, from, fn)
}

// TestAtFromCheckpoints: At resumes from the newest usable checkpoint
// below the session's first event, and answers exactly what a fold from
// the journal's start answers, at every event of both sessions.
func TestAtFromCheckpoints(t *testing.T) {
	j, crash, pin := interleaved(t)
	ctx := context.Background()
	// A checkpoint after every event; those at odd positions damaged.
	var cps []projections.Stored
	h := projections.NewHistory()
	if err := j.ReadAll(ctx, 1, func(e events.Event) error {
		h.Apply(e)
		cp := projections.Stored{GPos: e.GPos, Data: h.Encode()}
		if e.GPos%2 == 1 {
			cp = projections.Stored{GPos: e.GPos, Err: errors.New("damaged")}
		}
		cps = append(cps, cp)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w := &withCheckpoints{MemJournal: j, cps: cps}
	for _, evs := range [][]events.Event{crash, pin} {
		sid := evs[0].Session
		first, err := replay.At(ctx, w, sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantFrom := first.GPos - 1 // the newest checkpoint below, at an even position, plus one
		if wantFrom%2 == 1 {
			wantFrom--
		}
		wantFrom++
		for seq := uint64(1); seq <= uint64(len(evs)); seq++ {
			w.from = nil
			got, err := replay.At(ctx, w, sid, seq)
			if err != nil {
				t.Fatal(err)
			}
			want, err := replay.At(ctx, j, sid, seq)
			if err != nil {
				t.Fatal(err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) || !reflect.DeepEqual(got.State, want.State) {
				t.Fatalf("session %s seq %d from checkpoints:\n%s\nwant:\n%s", sid, seq, gj, wj)
			}
			if len(w.from) != 1 || w.from[0] != wantFrom {
				t.Fatalf("session %s seq %d: ReadAll from %v, want from %d (first event at gpos %d)", sid, seq, w.from, wantFrom, first.GPos)
			}
		}
	}
	w.err = errors.New("checkpoints unreadable")
	if _, err := replay.At(ctx, w, pin[0].Session, 0); !errors.Is(err, w.err) {
		t.Errorf("At with unreadable checkpoints: %v", err)
	}
}
