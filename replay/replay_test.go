package replay_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

func golden(t *testing.T, name string) []events.Event {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "journals", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := replay.ReadJSONL(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return evs
}

// load puts sessions into an in-memory journal, as `mcpledger import` does.
func load(t *testing.T, sessions ...[]events.Event) *store.MemJournal {
	t.Helper()
	j := store.NewMem()
	for _, evs := range sessions {
		if _, err := j.Append(context.Background(), evs[0].Session, store.NoStream, evs); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// TestGoldenJournalsVerify replays every recorded session in
// testdata/journals: the current decider must decide exactly what was
// recorded. A schema change that breaks an old journal fails here (decode)
// until an upcaster is added; a decider change fails with the divergence.
func TestGoldenJournalsVerify(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "journals", "*.jsonl"))
	if len(files) < 5 {
		t.Fatalf("only %d golden journals", len(files))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".jsonl"), func(t *testing.T) {
			evs := golden(t, name)
			err := replay.VerifyEvents(evs)
			if !strings.HasPrefix(name, "bad-") {
				if err != nil {
					t.Fatal(err)
				}
				// The same, read back through a journal.
				j := load(t, evs)
				if err := replay.Verify(context.Background(), j, evs[0].Session); err != nil {
					t.Fatal(err)
				}
				return
			}
			var me *replay.MismatchError
			if !errors.As(err, &me) || !errors.Is(err, replay.ErrNondeterminism) {
				t.Fatalf("want a MismatchError, got %v", err)
			}
			want := replay.MismatchKind(strings.SplitN(strings.TrimPrefix(name, "bad-"), "-", 2)[0])
			if me.Kind != want {
				t.Errorf("mismatch kind %s, want %s: %v", me.Kind, want, err)
			}
			if !strings.Contains(err.Error(), "timer.scheduled") && !strings.Contains(err.Error(), "session.stopped") {
				t.Errorf("error does not name the decisions: %v", err)
			}
		})
	}
}

func TestAtAndWhy(t *testing.T) {
	evs := golden(t, "approvals.jsonl")
	j := load(t, evs)
	ctx := context.Background()
	sid := evs[0].Session
	// Right after the config was observed: gh pending, nothing callable.
	var cfgSeq, readySeq uint64
	for _, e := range evs {
		if e.Kind == events.KindConfigObserved && cfgSeq == 0 {
			cfgSeq = e.Seq
		}
		if p, ok := e.Payload.(*events.ServerTransitioned); ok && e.Server == "gh" && p.To == events.StateReady && readySeq == 0 {
			readySeq = e.Seq
		}
	}
	// The config's decisions follow it; take the last of them.
	snap, err := replay.At(ctx, j, sid, cfgSeq+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Catalog.Tools) != 0 {
		t.Errorf("tools right after config: %+v", snap.Catalog.Tools)
	}
	why, err := replay.Why(ctx, j, sid, "mcp__gh__echo", cfgSeq+6)
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, r := range why.Reasons {
		text += r.Text + "\n"
	}
	if why.Available || why.Server != "gh" || !strings.Contains(text, "pending approval") {
		t.Errorf("why before approval: %+v\n%s", why, text)
	}
	why, err = replay.Why(ctx, j, sid, "mcp__gh__echo", readySeq)
	if err != nil || !why.Available {
		t.Fatalf("why when ready: %v %+v", err, why)
	}
	// At the end: gh was re-pended by the args edit.
	why, _ = replay.Why(ctx, j, sid, "mcp__gh__echo", 0)
	if why.Available || !strings.Contains(why.Reasons[len(why.Reasons)-1].Text, "changed: env:MCPTEST_NAME") {
		t.Errorf("why at the end: %+v", why)
	}
	if _, err := replay.At(ctx, j, sid, 100000); !errors.Is(err, replay.ErrNoSuchEvent) {
		t.Errorf("At past the end: %v", err)
	}
	if _, err := replay.At(ctx, j, uuid.New(), 1); err == nil {
		t.Errorf("At of an unknown session: %v", err)
	}
	// Status at the end agrees with what the session ended with.
	snap, _ = replay.At(ctx, j, sid, 0)
	for _, s := range snap.Status.Servers {
		if s.State != events.StateStopped {
			t.Errorf("%s at the end: %s", s.Name, s.State)
		}
	}
}
