package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/replay"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// VerifyCommand checks the journal's integrity.
type VerifyCommand struct {
	env *env
}

// Run runs `verify`: it prints OK with counts, or fails naming the first
// bad record.
func (c *VerifyCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("verify", "[--drop-checkpoints]")
	drop := f.Bool("drop-checkpoints", false, "delete the journal's checkpoints (derived data; the next run folds the journal and saves new ones)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *drop {
		j, _, err := f.openWritable()
		if err != nil {
			return err
		}
		defer j.Close()
		if err := j.DropCheckpoints(); err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.env.stdout, "dropped the checkpoints of %s\n", j.Path())
		return err
	}
	j, err := f.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer j.Close()
	prog := c.env.progress("verifying "+j.Path()+": digests and indexes", progressAfter)
	defer prog.end()
	rep, err := j.Verify(ctx)
	if err != nil {
		return fmt.Errorf("journal %s is damaged (%d sessions and %d events checked before): %w",
			j.Path(), rep.Sessions, rep.Events, err)
	}
	// Then replay every session: the decider must still decide what was
	// recorded.
	sessions, err := j.Sessions(ctx)
	if err != nil {
		return err
	}
	for i, s := range sessions {
		prog.set(fmt.Sprintf("verifying %s: replaying session %d of %d", j.Path(), i+1, len(sessions)))
		if err := replay.Verify(ctx, j, s.Session); err != nil {
			return fmt.Errorf("journal %s: session %s does not replay: %w", j.Path(), s.Session, err)
		}
	}
	prog.set("verifying " + j.Path() + ": checkpoints and archives")
	checked, archives, err := verifyCheckpoints(ctx, j)
	if err != nil {
		return fmt.Errorf("journal %s: %w\n(checkpoints are derived from the events, which are intact; drop them with: mcpledger verify --drop-checkpoints)", j.Path(), err)
	}
	var notes []string
	for _, a := range archives {
		note, err := c.env.verifyArchive(ctx, j, a)
		if err != nil {
			return fmt.Errorf("journal %s: archive %s: %w", j.Path(), a.File, err)
		}
		notes = append(notes, note)
	}
	prog.end()
	_, err = fmt.Fprintf(c.env.stdout, "OK %s: %d sessions, %d events, %d log entries, %d checkpoints; every session replays\n",
		j.Path(), rep.Sessions, rep.Events, rep.LogEntries, checked)
	for _, n := range notes {
		fmt.Fprintln(c.env.stdout, n)
	}
	return err
}

// verifyCheckpoints folds the journal from its start (from its base
// state, after an archive) and compares the fold with every stored
// checkpoint at its position. A checkpoint of another version of the fold
// is skipped (the next run replaces it); a damaged one, or one that
// differs from the fold, is an error. It returns how many checkpoints
// matched, and the archives the journal records.
func verifyCheckpoints(ctx context.Context, j ledger) (int, []*events.JournalArchived, error) {
	cps, err := j.Checkpoints(ctx)
	if err != nil {
		return 0, nil, err
	}
	for _, cp := range cps {
		if cp.Err != nil {
			return 0, nil, cp.Err
		}
	}
	h := projections.NewHistory()
	if len(cps) > 0 && cps[0].Base {
		// The fold of the archived records: checked against the archive.
		if h, err = projections.DecodeBase(cps[0].Data); err != nil {
			return 0, nil, fmt.Errorf("the journal's base state: %w", err)
		}
		cps = cps[1:]
	}
	var archives []*events.JournalArchived
	matched, next := 0, 0
	check := func() error {
		for next < len(cps) && cps[next].GPos == h.GPos {
			cp := cps[next]
			next++
			if _, err := projections.DecodeHistory(cp.Data); errors.Is(err, projections.ErrHistoryVersion) {
				continue
			}
			if got := h.Encode(); !bytes.Equal(got, cp.Data) {
				return fmt.Errorf("%w: the checkpoint at gpos %d differs from the fold of the events up to it", store.ErrCheckpointDamaged, cp.GPos)
			}
			matched++
		}
		return nil
	}
	err = j.ReadAll(ctx, 1, func(e events.Event) error {
		h.Apply(e)
		if a, ok := e.Payload.(*events.JournalArchived); ok {
			archives = append(archives, a)
		}
		return check()
	})
	return matched, archives, err
}

// verifyArchive checks an archive the journal records: that it verifies,
// holds exactly the records and sessions the journal.archived event
// names (by digest and hash-chain heads), and, for the newest, that its
// fold is the live journal's base state. A missing archive is not an
// error (the live journal does not need it), but said.
func (e *env) verifyArchive(ctx context.Context, live ledger, a *events.JournalArchived) (string, error) {
	path := a.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(live.Path()), path)
	}
	aj, err := e.openJournal(path, &store.Options{ReadOnly: true})
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("warning: archive %s (%d sessions, records %d..%d) is missing: restore it from a backup to read or check them; the live journal does not need it",
			path, len(a.Sessions), a.From, a.Through), nil
	}
	if err != nil {
		return "", err
	}
	defer aj.Close()
	if _, err := aj.Verify(ctx); err != nil {
		return "", err
	}
	d, err := aj.Digest(ctx, a.From, a.Through)
	if err != nil {
		return "", err
	}
	if hex.EncodeToString(d[:]) != a.Digest {
		return "", fmt.Errorf("its records %d..%d do not hash to the digest the journal recorded: the archive was changed", a.From, a.Through)
	}
	heads, err := aj.Sessions(ctx)
	if err != nil {
		return "", err
	}
	if len(heads) != len(a.Sessions) {
		return "", fmt.Errorf("it holds %d sessions, the journal recorded %d", len(heads), len(a.Sessions))
	}
	for i, s := range a.Sessions {
		if heads[i].Session.String() != s.Session || heads[i].LastSeq != s.Events || hex.EncodeToString(heads[i].Head[:]) != s.Head {
			return "", fmt.Errorf("session %s differs from what the journal recorded", s.Session)
		}
	}
	if a.Through == live.Base() {
		h, _, err := rt.LoadHistory(ctx, storeJournal{aj}, 0, nil)
		if err != nil {
			return "", err
		}
		cps, err := live.Checkpoints(ctx)
		if err != nil || len(cps) == 0 || !cps[0].Base || !projections.BaseIs(cps[0].Data, h) {
			return "", fmt.Errorf("the live journal's base state is not the fold of the archive (%v)", err)
		}
	}
	return fmt.Sprintf("archive %s: %d sessions, records %d..%d, verified", path, len(a.Sessions), a.From, a.Through), nil
}
