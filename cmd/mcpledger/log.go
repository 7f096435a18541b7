package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// LogCommand prints journal events.
type LogCommand struct {
	env *env
}

// Run runs `log [--session ID|last] [--server N] [--kind K] [--follow] [--json]`.
func (c *LogCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("log", "[--session ID|last] [--server N] [--kind K] [--follow] [--json]")
	sessionArg := f.String("session", "", "only the session `ID` (a unique prefix, or last)")
	server := f.String("server", "", "only events about the server `N`")
	kind := f.String("kind", "", "only events of kind `K` (e.g. server.transitioned)")
	follow := f.Bool("follow", false, "after the stored events, print new ones as they are committed, until interrupted")
	asJSON := f.Bool("json", false, "print one JSON object a line")
	if err := f.parse(args); err != nil {
		return err
	}
	if *kind != "" && !events.Kind(*kind).Valid() {
		names := make([]string, 0, len(events.Kinds()))
		for _, k := range events.Kinds() {
			names = append(names, string(k))
		}
		return usageErrorf("log: unknown kind %q; kinds are %s", *kind, strings.Join(names, ", "))
	}
	j, err := f.openReadOnly()
	if err != nil {
		return err
	}
	defer j.Close()

	var session uuid.UUID
	from := uint64(1)
	if *sessionArg != "" {
		info, err := findSession(ctx, j, *sessionArg)
		if err != nil {
			return err
		}
		session, from = info.Session, info.FirstGPos
	}

	w := bufio.NewWriter(c.env.stdout)
	print := func(e events.Event) error {
		if (session != uuid.Nil && e.Session != session) || (*server != "" && e.Server != *server) ||
			(*kind != "" && string(e.Kind) != *kind) {
			return nil
		}
		if *asJSON {
			b, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("event %s/%d: %w", e.Session, e.Seq, err)
			}
			w.Write(b)
			w.WriteByte('\n')
		} else {
			writeEventLine(w, &e)
		}
		if *follow {
			return w.Flush()
		}
		return nil
	}
	switch {
	case *follow:
		err = j.Follow(ctx, from, print)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil // interrupted: the normal end of --follow
		}
	case session != uuid.Nil:
		err = j.ReadSession(ctx, session, 1, print)
	default:
		err = j.ReadAll(ctx, 1, print)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}
