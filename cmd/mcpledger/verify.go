package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/replay"
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
	j, err := f.openReadOnly()
	if err != nil {
		return err
	}
	defer j.Close()
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
	for _, s := range sessions {
		if err := replay.Verify(ctx, j, s.Session); err != nil {
			return fmt.Errorf("journal %s: session %s does not replay: %w", j.Path(), s.Session, err)
		}
	}
	checked, err := verifyCheckpoints(ctx, j)
	if err != nil {
		return fmt.Errorf("journal %s: %w\n(checkpoints are derived from the events, which are intact; drop them with: mcpledger verify --drop-checkpoints)", j.Path(), err)
	}
	_, err = fmt.Fprintf(c.env.stdout, "OK %s: %d sessions, %d events, %d log entries, %d checkpoints; every session replays\n",
		j.Path(), rep.Sessions, rep.Events, rep.LogEntries, checked)
	return err
}

// verifyCheckpoints folds the journal from its start and compares the
// fold with every stored checkpoint at its position. A checkpoint of
// another version of the fold is skipped (the next run replaces it); a
// damaged one, or one that differs from the fold, is an error. It
// returns how many checkpoints matched.
func verifyCheckpoints(ctx context.Context, j *store.Journal) (int, error) {
	cps, err := j.Checkpoints(ctx)
	if err != nil || len(cps) == 0 {
		return 0, err
	}
	for _, cp := range cps {
		if cp.Err != nil {
			return 0, cp.Err
		}
	}
	h := projections.NewHistory()
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
		return check()
	})
	return matched, err
}
