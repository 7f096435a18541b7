package runtimetest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/store"
)

// StoreJournal adapts *store.Journal to runtime.Journal (cmd/mcpledger has
// the same adapter): the Manager pre-assigns seqs, so each append expects
// the session to end right before the first of them.
type StoreJournal struct{ J *store.Journal }

// Append appends evs durably, expecting the session to end at evs[0].Seq-1.
func (s StoreJournal) Append(ctx context.Context, sid uuid.UUID, evs []events.Event) error {
	_, err := s.J.Append(ctx, sid, store.Exact(evs[0].Seq-1), evs)
	return err
}

// AppendLater submits evs and returns the wait for their commit.
func (s StoreJournal) AppendLater(sid uuid.UUID, evs []events.Event) func(context.Context) error {
	p := s.J.Submit(sid, store.Exact(evs[0].Seq-1), evs)
	return func(ctx context.Context) error { _, err := p.Wait(ctx); return err }
}

// LastSeq is the last seq the journal holds of session sid, 0 if none
// (runtime.JournalHead).
func (s StoreJournal) LastSeq(ctx context.Context, sid uuid.UUID) (uint64, error) {
	info, err := s.J.Head(ctx, sid)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return info.LastSeq, err
}

// ReadAll reads every event from global position from.
func (s StoreJournal) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return s.J.ReadAll(ctx, from, fn)
}

// Checkpoints returns the journal's checkpoints.
func (s StoreJournal) Checkpoints(ctx context.Context) ([]projections.Stored, error) {
	cps, err := s.J.Checkpoints(ctx)
	out := make([]projections.Stored, len(cps))
	for i, cp := range cps {
		out[i] = projections.Stored{GPos: cp.GPos, Data: cp.Data, Err: cp.Err, Base: cp.Base}
	}
	return out, err
}

// SaveCheckpoint hands a checkpoint to the journal.
func (s StoreJournal) SaveCheckpoint(gpos uint64, data []byte) error {
	return s.J.SaveCheckpoint(gpos, data)
}

// OpenJournal opens a new journal in a temporary directory, closed when
// the test ends, and returns it with its runtime.Journal adapter.
func OpenJournal(tb testing.TB) (*store.Journal, StoreJournal) {
	tb.Helper()
	j, err := store.Open(filepath.Join(tb.TempDir(), "journal.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { j.Close() })
	return j, StoreJournal{j}
}

// EchoArgs are the arguments of EchoServer's echo tool.
type EchoArgs struct {
	Message string `json:"message"`
}

// EchoServer returns an in-process go-sdk server named name with one tool,
// echo, that answers its message as text.
func EchoServer(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo a message"}, func(ctx context.Context, req *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	return s
}

// SessionEvents returns every event of session sid in j.
func SessionEvents(tb testing.TB, j *store.Journal, sid uuid.UUID) []events.Event {
	tb.Helper()
	var out []events.Event
	if err := j.ReadSession(context.Background(), sid, 1, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}
