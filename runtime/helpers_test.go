package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// storeJournal adapts *store.Journal to runtime.Journal (cmd/mcpledger has
// the same adapter): the Manager pre-assigns seqs, so each append expects
// the session to end right before the first of them.
type storeJournal struct{ j *store.Journal }

func (s storeJournal) Append(ctx context.Context, sid uuid.UUID, evs []events.Event) error {
	_, err := s.j.Append(ctx, sid, store.Exact(evs[0].Seq-1), evs)
	return err
}

func (s storeJournal) AppendLater(sid uuid.UUID, evs []events.Event) func(context.Context) error {
	p := s.j.Submit(sid, store.Exact(evs[0].Seq-1), evs)
	return func(ctx context.Context) error { _, err := p.Wait(ctx); return err }
}

func (s storeJournal) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return s.j.ReadAll(ctx, from, fn)
}

func openJournal(t testing.TB) (*store.Journal, storeJournal) {
	t.Helper()
	j, err := store.Open(filepath.Join(t.TempDir(), "journal.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, storeJournal{j}
}

// sessionEvents returns every event of session sid.
func sessionEvents(t testing.TB, j *store.Journal, sid uuid.UUID) []events.Event {
	t.Helper()
	var out []events.Event
	if err := j.ReadSession(context.Background(), sid, 1, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func kinds(evs []events.Event, server string) []string {
	var out []string
	for _, e := range evs {
		if server != "" && e.Server != server {
			continue
		}
		s := string(e.Kind)
		if p, ok := e.Payload.(*events.ServerTransitioned); ok {
			s += ":" + string(p.To)
		}
		out = append(out, s)
	}
	return out
}

// dumpEvents renders evs one per line, payloads included, for a failing
// test's message.
func dumpEvents(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %d %s %s %+v\n", e.Seq, e.Server, e.Kind, e.Payload)
	}
	return b.String()
}

// inOrder reports whether want occurs in got as a subsequence (other
// events, such as a call finishing, may come between).
func inOrder(got []string, want ...string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
