package main

import (
	"context"
	"fmt"

	"github.com/mcpledger/mcpledger/replay"
)

// VerifyCommand checks the journal's integrity.
type VerifyCommand struct {
	env *env
}

// Run runs `verify`: it prints OK with counts, or fails naming the first
// bad record.
func (c *VerifyCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("verify", "")
	if err := f.parse(args); err != nil {
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
	_, err = fmt.Fprintf(c.env.stdout, "OK %s: %d sessions, %d events, %d log entries; every session replays\n",
		j.Path(), rep.Sessions, rep.Events, rep.LogEntries)
	return err
}
