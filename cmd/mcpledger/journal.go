package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/store"
)

// storeJournal adapts *store.Journal to runtime.Journal: the Manager
// pre-assigns seqs, so every append expects the session to end right
// before its first event.
type storeJournal struct{ j *store.Journal }

var (
	_ runtime.CheckpointJournal = storeJournal{}
	_ replay.CheckpointReader   = storeJournal{}
)

func (s storeJournal) Append(ctx context.Context, sid uuid.UUID, evs []events.Event) error {
	_, err := s.j.Append(ctx, sid, store.Exact(evs[0].Seq-1), evs)
	return err
}

func (s storeJournal) AppendLater(sid uuid.UUID, evs []events.Event) func(context.Context) error {
	p := s.j.Submit(sid, store.Exact(evs[0].Seq-1), evs)
	return func(ctx context.Context) error { _, err := p.Wait(ctx); return err }
}

func (s storeJournal) ReadSession(ctx context.Context, sid uuid.UUID, from uint64, fn func(events.Event) error) error {
	return s.j.ReadSession(ctx, sid, from, fn)
}

func (s storeJournal) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return s.j.ReadAll(ctx, from, fn)
}

func (s storeJournal) Checkpoints(ctx context.Context) ([]projections.Stored, error) {
	cps, err := s.j.Checkpoints(ctx)
	out := make([]projections.Stored, len(cps))
	for i, cp := range cps {
		out[i] = projections.Stored{GPos: cp.GPos, Data: cp.Data, Err: cp.Err, Base: cp.Base}
	}
	return out, err
}

func (s storeJournal) SaveCheckpoint(gpos uint64, data []byte) error {
	return s.j.SaveCheckpoint(gpos, data)
}

// openWritable opens (creating if needed) the journal for a supervising
// command. A journal held by another process is reported with what to do.
func (f *commandFlags) openWritable() (*store.Journal, string, error) {
	path, _, err := f.journalPath()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", err
	}
	j, err := f.env.openJournal(path, nil)
	if errors.Is(err, store.ErrLocked) {
		return nil, "", fmt.Errorf("%w\n(commands like status, tools and call reach a running mcpledger over %s)", err, control.Path(path))
	}
	return j, path, err
}

// control returns a client for the mcpledger process holding the journal,
// or nil when none is running.
func (f *commandFlags) control() *control.Client {
	path, _, err := f.journalPath()
	if err != nil {
		return nil
	}
	c, err := control.Dial(control.Path(path))
	if err != nil {
		return nil
	}
	return c
}

// history returns the fold of j's events before global position before (0:
// all of them), resuming from the newest usable checkpoint. A checkpoint
// passed over for damage is reported on stderr; one of another version
// is rebuilt silently (by the next run).
func (e *env) history(ctx context.Context, j *store.Journal, before uint64) (*projections.History, error) {
	h, _, err := runtime.LoadHistory(ctx, storeJournal{j}, before, func(err error) {
		if !errors.Is(err, projections.ErrHistoryVersion) {
			fmt.Fprintf(e.stderr, "mcpledger: warning: %v; reading the journal from before it instead (mcpledger verify reports it)\n", err)
		}
	})
	return h, err
}
