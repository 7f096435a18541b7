package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

// ledger is what the read commands need of a journal: *store.Reader,
// which reads it beside a running writer, or *store.Journal.
type ledger interface {
	replay.Reader
	Path() string
	Base() uint64
	Sessions(ctx context.Context) ([]store.SessionInfo, error)
	Head(ctx context.Context, session uuid.UUID) (store.SessionInfo, error)
	Follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
	Checkpoints(ctx context.Context) ([]store.Checkpoint, error)
	Cursor(ctx context.Context, name string) (store.Cursor, error)
	Verify(ctx context.Context) (store.VerifyReport, error)
	Close() error
}

var (
	_ ledger = (*store.Reader)(nil)
	_ ledger = (*store.Journal)(nil)
)

// readJournal adapts a ledger to what runtime and replay read through:
// runtime.LoadHistory and replay's checkpoint reads. It appends nothing.
type readJournal struct{ l ledger }

var (
	_ runtime.CheckpointJournal = readJournal{}
	_ replay.CheckpointReader   = readJournal{}
)

func (s readJournal) Append(context.Context, uuid.UUID, []events.Event) error {
	return store.ErrReadOnly
}

func (s readJournal) AppendLater(uuid.UUID, []events.Event) func(context.Context) error {
	return func(context.Context) error { return store.ErrReadOnly }
}

func (s readJournal) ReadSession(ctx context.Context, sid uuid.UUID, from uint64, fn func(events.Event) error) error {
	return s.l.ReadSession(ctx, sid, from, fn)
}

func (s readJournal) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return s.l.ReadAll(ctx, from, fn)
}

func (s readJournal) Checkpoints(ctx context.Context) ([]projections.Stored, error) {
	cps, err := s.l.Checkpoints(ctx)
	out := make([]projections.Stored, len(cps))
	for i, cp := range cps {
		out[i] = projections.Stored{GPos: cp.GPos, Data: cp.Data, Err: cp.Err, Base: cp.Base}
	}
	return out, err
}

func (s readJournal) SaveCheckpoint(uint64, []byte) error { return store.ErrReadOnly }

// storeJournal adapts *store.Journal to runtime.Journal: the Manager
// pre-assigns seqs, so every append expects the session to end right
// before its first event.
type storeJournal struct{ j *store.Journal }

var (
	_ runtime.CheckpointJournal = storeJournal{}
	_ runtime.JournalHead       = storeJournal{}
)

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

// LastSeq lets the Manager settle, after a failed append, what the
// journal holds of its session (runtime.JournalHead).
func (s storeJournal) LastSeq(ctx context.Context, sid uuid.UUID) (uint64, error) {
	return lastSeq(ctx, s.j, sid)
}

// lastSeq is the last seq j holds of session sid, 0 if none.
func lastSeq(ctx context.Context, j *store.Journal, sid uuid.UUID) (uint64, error) {
	info, err := j.Head(ctx, sid)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return info.LastSeq, err
}

func (s storeJournal) Checkpoints(ctx context.Context) ([]projections.Stored, error) {
	return readJournal{s.j}.Checkpoints(ctx)
}

func (s storeJournal) SaveCheckpoint(gpos uint64, data []byte) error {
	return s.j.SaveCheckpoint(gpos, data)
}

// writer is a journal this process holds for writing, and the control
// socket through which it answers the reads of other commands (and,
// once SetManager is called, their ops on servers).
type writer struct {
	*store.Journal
	srv *control.Server // nil if the socket could not be served
}

// Close stops serving the socket (ending reads in progress: their readers
// go on from the file), then closes the journal.
func (w *writer) Close() error {
	if w.srv != nil {
		_ = w.srv.Close()
	}
	return w.Journal.Close()
}

// SetManager makes m answer the control socket's ops on servers.
func (w *writer) SetManager(m *runtime.Manager) {
	if w.srv != nil {
		w.srv.SetManager(m)
	}
}

// openWritable opens (creating if needed) the journal for a command that
// writes, and serves the reads of other commands on its control socket
// for as long as it holds it. A journal held by another process is
// reported with its holder and what to do.
func (f *commandFlags) openWritable() (*writer, string, error) {
	path, _, err := f.journalPath()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", err
	}
	j, err := f.env.openJournal(path, nil)
	if errors.Is(err, store.ErrLocked) {
		return nil, "", fmt.Errorf("%w\n(another mcpledger writes it: read commands work beside it; status, tools and call reach a running run or serve over %s; stop it to do this)", err, control.Path(path))
	}
	if err != nil {
		return nil, "", err
	}
	w := &writer{Journal: j}
	srv, err := control.Serve(control.Path(path), control.Options{
		Reads: readsOf(j),
	})
	if err != nil {
		fmt.Fprintln(f.env.stderr, "mcpledger: warning:", err, "(other commands cannot read the journal while this one runs)")
	} else {
		w.srv = srv
	}
	return w, path, nil
}

// openReadOnly opens the journal for reading, beside a process that
// writes it or not (store.Reader). A missing file is an error that says
// where it looked and how to point elsewhere.
func (f *commandFlags) openReadOnly(ctx context.Context) (ledger, error) {
	path, from, err := f.journalPath()
	if err != nil {
		return nil, err
	}
	r, err := store.OpenReader(ctx, path, readerOptions(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no journal at %s (from %s); pass --journal PATH or set MCPLEDGER_JOURNAL", path, from)
	}
	if err == nil && store.Writing(path) {
		f.env.lowerPriority(readerNice) // the agent's runtime comes first
	}
	return r, err
}

// readsOf answers the control socket's read op on j (store.ServeRead).
func readsOf(j *store.Journal) func(ctx context.Context, req []byte, w io.Writer) error {
	return func(ctx context.Context, req []byte, w io.Writer) error { return store.ServeRead(ctx, j, req, w) }
}

// readerOptions are a store.Reader's of the journal at path: it reads
// through the control socket of the process that holds the journal.
func readerOptions(path string) *store.ReaderOptions {
	sock := control.Path(path)
	return &store.ReaderOptions{
		Remote: func(ctx context.Context, req []byte) (io.ReadCloser, error) { return control.Read(ctx, sock, req) },
	}
}

// control returns a client for the mcpledger process holding the journal
// and supervising servers, or nil when none is running.
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
func (e *env) history(ctx context.Context, j ledger, before uint64) (*projections.History, error) {
	h, _, err := runtime.LoadHistory(ctx, readJournal{j}, before, func(err error) {
		if !errors.Is(err, projections.ErrHistoryVersion) {
			fmt.Fprintf(e.stderr, "mcpledger: warning: %v; reading the journal from before it instead (mcpledger verify reports it)\n", err)
		}
	})
	return h, err
}
