package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// countingJournal counts the events ReadAll delivers and records the
// positions of the checkpoints it is handed.
type countingJournal struct {
	storeJournal
	mu    sync.Mutex
	read  int
	saved []uint64
}

func (c *countingJournal) SaveCheckpoint(gpos uint64, data []byte) error {
	c.mu.Lock()
	c.saved = append(c.saved, gpos)
	c.mu.Unlock()
	return c.storeJournal.SaveCheckpoint(gpos, data)
}

func (c *countingJournal) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return c.storeJournal.ReadAll(ctx, from, func(e events.Event) error {
		c.mu.Lock()
		c.read++
		c.mu.Unlock()
		return fn(e)
	})
}

func (c *countingJournal) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.read
	c.read = 0
	return n
}

// plainJournal hides the journal's checkpoints.
type plainJournal struct{ runtime.Journal }

func runSession(t *testing.T, j runtime.Journal, every int) *runtime.Manager {
	t.Helper()
	m, err := runtime.New(j, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}, CheckpointEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CallTool(t.Context(), "mcp__mem__echo", map[string]any{"message": "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStartResumesFromCheckpoint: a session that ends past CheckpointEvery
// events saves a checkpoint of the journal's fold; the next Start folds
// only the events after it, and gets the same history as a fold of the
// whole journal.
func TestStartResumesFromCheckpoint(t *testing.T) {
	j, adapter := openJournal(t)
	cj := &countingJournal{storeJournal: adapter}
	ctx := t.Context()

	runSession(t, cj, -1) // never checkpoints
	if cps, _ := j.Checkpoints(ctx); len(cps) != 0 {
		t.Fatalf("CheckpointEvery -1 saved %d checkpoints", len(cps))
	}
	cj.reads()
	runSession(t, cj, 1_000_000) // too few events to checkpoint
	first := cj.reads()
	if first == 0 {
		t.Fatal("Start read nothing of the first session")
	}
	if cps, _ := j.Checkpoints(ctx); len(cps) != 0 {
		t.Fatalf("a session short of CheckpointEvery saved %d checkpoints", len(cps))
	}
	m := runSession(t, cj, 1)
	cj.reads()
	saved := cj.saved
	// One checkpoint saved at Start (the fold of the first two sessions),
	// one at Close, which the journal writes with its next commit or, as
	// here, when it closes.
	path := j.Path()
	j.Close()
	j, err := store.Open(path, &store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	adapter = storeJournal{J: j}
	cj = &countingJournal{storeJournal: adapter}
	// With CheckpointEvery 1: one at Start (the fold of the first two
	// sessions), some as the session went (how many depends on how its
	// commits batched), one at Close; the store keeps the newest
	// MaxCheckpoints of them.
	last, err := j.Head(ctx, m.Session())
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) < 2 || saved[0] != last.FirstGPos-1 || saved[len(saved)-1] != last.LastGPos {
		t.Fatalf("checkpoints handed over at gpos %v, want from %d (before the session) to %d (the journal's end)",
			saved, last.FirstGPos-1, last.LastGPos)
	}
	// A checkpoint rides the next commit; one handed over before it is
	// replaced by the next. So the store holds some of those handed over,
	// in order, at most MaxCheckpoints, the last among them.
	cps, err := j.Checkpoints(ctx)
	if err != nil || len(cps) == 0 || len(cps) > store.MaxCheckpoints || !isSubsequence(gposOf(cps), saved) ||
		cps[len(cps)-1].GPos != last.LastGPos {
		t.Fatalf("the store keeps checkpoints at gpos %v, want at most %d of those handed over (%v), the last at %d (%v)",
			gposOf(cps), store.MaxCheckpoints, saved, last.LastGPos, err)
	}

	// The next Start folds nothing (the checkpoint covers everything).
	m4, err := runtime.New(cj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m4.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cj.reads(); n != 0 {
		t.Errorf("Start after a checkpoint at the journal's end read %d events, want 0", n)
	}
	m4.Close()

	// The fold from the checkpoint equals the fold of everything.
	fromCP, tail, err := runtime.LoadHistory(ctx, adapter, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, all, err := runtime.LoadHistory(ctx, plainJournal{adapter}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tail >= all || !bytes.Equal(fromCP.Encode(), whole.Encode()) {
		t.Errorf("from the checkpoint (%d events folded) != the whole fold (%d):\n%s\n%s", tail, all, fromCP.Encode(), whole.Encode())
	}
	if ss := whole.Sessions(); len(ss) != 4 || !ss[3].Stopped {
		t.Errorf("sessions = %+v, want 4, all stopped", ss)
	}
	// before: the fold up to a session's first event comes from a
	// checkpoint below it.
	firstOfLast := whole.Sessions()[3].FirstGPos
	upTo, _, err := runtime.LoadHistory(ctx, adapter, firstOfLast, nil)
	if err != nil || upTo.GPos != firstOfLast-1 || len(upTo.Sessions()) != 3 {
		t.Errorf("LoadHistory(before %d) = gpos %d, %d sessions, %v", firstOfLast, upTo.GPos, len(upTo.Sessions()), err)
	}
}

// TestStartWarnsOfUnusableCheckpoint: a checkpoint that cannot be decoded
// is passed over with a warning, and Start folds the whole journal.
func TestStartWarnsOfUnusableCheckpoint(t *testing.T) {
	j, adapter := openJournal(t)
	cj := &countingJournal{storeJournal: adapter}
	ctx := t.Context()
	runSession(t, cj, -1)
	sessions, _ := j.Sessions(ctx)
	if err := j.SaveCheckpoint(sessions[0].LastGPos, []byte("not a checkpoint")); err != nil {
		t.Fatal(err)
	}
	runSession(t, cj, -1) // its first commit writes the bad checkpoint
	cj.reads()
	var logs bytes.Buffer
	m, _ := runtime.New(cj, &runtime.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), CheckpointEvery: -1})
	if _, err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if n, total := cj.reads(), sessions[0].LastGPos; uint64(n) <= total {
		t.Errorf("Start read %d events, want the whole journal (more than %d)", n, total)
	}
	if !strings.Contains(logs.String(), "checkpoint unusable") || !strings.Contains(logs.String(), "malformed history checkpoint") {
		t.Errorf("no warning about the checkpoint:\n%s", logs.String())
	}
}

// TestInterruptedSessionAfterCheckpoint: a session killed after a
// checkpoint that covers part of it is still closed as interrupted, from
// all of its events.
func TestInterruptedSessionAfterCheckpoint(t *testing.T) {
	_, a1 := openJournal(t)
	m1, _ := runtime.New(a1, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}})
	if _, err := m1.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	j2, a2 := openJournal(t)
	old := sessionEvents(t, a1.J, m1.Session())
	m1.Close()
	half := len(old) / 2
	if _, err := j2.Append(t.Context(), m1.Session(), store.NoStream, old[:half]); err != nil {
		t.Fatal(err)
	}
	h, _, err := runtime.LoadHistory(t.Context(), a2, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j2.SaveCheckpoint(h.GPos, h.Encode()); err != nil {
		t.Fatal(err)
	}
	if _, err := j2.Append(t.Context(), m1.Session(), store.Exact(uint64(half)), old[half:]); err != nil {
		t.Fatal(err)
	}
	if cps, _ := j2.Checkpoints(t.Context()); len(cps) != 1 || cps[0].GPos != uint64(half) {
		t.Fatalf("checkpoints %+v, want one in the middle of the session", cps)
	}
	m2, _ := runtime.New(a2, nil)
	if _, err := m2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	closed := sessionEvents(t, j2, m1.Session())
	tail := kinds(closed[len(old):], "")
	if len(tail) < 3 || tail[0] != "stop.requested" || tail[len(tail)-1] != "session.stopped" {
		t.Fatalf("the interrupted session was closed with %v", tail)
	}
}

// TestCheckpointsDuringSession: a long session saves checkpoints as it
// goes (every CheckpointEvery events), written by later commits, so a
// kill -9 leaves the next Start a short fold.
func TestCheckpointsDuringSession(t *testing.T) {
	j, adapter := openJournal(t)
	ctx := t.Context()
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}, CheckpointEvery: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var cps []store.Checkpoint
	for i := 0; i < 200 && len(cps) < 2; i++ {
		if _, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "hi"}); err != nil {
			t.Fatal(err)
		}
		if cps, err = j.Checkpoints(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(cps) < 2 {
		t.Fatalf("after 200 calls, %d checkpoints", len(cps))
	}
	head, err := j.Head(ctx, m.Session())
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if cp.GPos < head.FirstGPos || cp.GPos > head.LastGPos {
			t.Errorf("checkpoint at %d, outside the session (%d..%d)", cp.GPos, head.FirstGPos, head.LastGPos)
		}
	}
	// Each is the fold of the journal up to it.
	for _, cp := range cps {
		h, _, err := runtime.LoadHistory(ctx, plainJournal{adapter}, cp.GPos+1, nil)
		if err != nil || !bytes.Equal(h.Encode(), cp.Data) {
			t.Errorf("checkpoint at %d differs from the fold up to it (%v)", cp.GPos, err)
		}
	}
}

// isSubsequence reports whether sub is s with some elements left out.
func isSubsequence(sub, s []uint64) bool {
	for _, v := range s {
		if len(sub) > 0 && sub[0] == v {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

func gposOf(cps []store.Checkpoint) []uint64 {
	var out []uint64
	for _, cp := range cps {
		out = append(out, cp.GPos)
	}
	return out
}
