package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// SessionsCommand lists the journal's sessions.
type SessionsCommand struct {
	env *env
}

// sessionRow is one session as `sessions` shows it; the JSON shape of
// `sessions --json` (an array of these).
type sessionRow struct {
	ID        string   `json:"id"`
	Started   string   `json:"started"`
	LastEvent string   `json:"last_event"`
	Events    uint64   `json:"events"`
	Servers   []string `json:"servers"`
	Ended     string   `json:"ended"`            // "stopped" or "running or interrupted"
	Reason    string   `json:"reason,omitempty"` // the session.stopped reason

	first, last int64 // unix ns
}

// Run runs `sessions [--json]`.
func (c *SessionsCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("sessions", "[--json]")
	asJSON := f.Bool("json", false, "print a JSON array")
	if err := f.parse(args); err != nil {
		return err
	}
	j, err := f.openReadOnly()
	if err != nil {
		return err
	}
	defer j.Close()

	list, err := j.Sessions(ctx)
	if err != nil {
		return err
	}
	rows := make([]sessionRow, len(list))
	index := make(map[uuid.UUID]*sessionRow, len(list))
	for i, info := range list {
		rows[i] = sessionRow{ID: info.Session.String(), Events: info.LastSeq, Servers: []string{},
			Ended: "running or interrupted", first: info.FirstTime, last: info.LastTime}
		index[info.Session] = &rows[i]
	}
	// One pass over the journal finds the servers and the endings.
	err = j.ReadAll(ctx, 1, func(e events.Event) error {
		r := index[e.Session]
		if r == nil {
			return nil // a session that started after Sessions was read
		}
		if e.Server != "" && !slices.Contains(r.Servers, e.Server) {
			r.Servers = append(r.Servers, e.Server)
		}
		if p, ok := e.Payload.(*events.SessionStopped); ok {
			r.Ended, r.Reason = "stopped", string(p.Reason)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range rows {
		slices.Sort(rows[i].Servers)
	}

	if *asJSON {
		for i := range rows {
			rows[i].Started = time.Unix(0, rows[i].first).UTC().Format(time.RFC3339Nano)
			rows[i].LastEvent = time.Unix(0, rows[i].last).UTC().Format(time.RFC3339Nano)
		}
		enc := json.NewEncoder(c.env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(c.env.stdout, "no sessions")
		return err
	}
	tw := tabwriter.NewWriter(c.env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTARTED\tLAST EVENT\tEVENTS\tSERVERS\tENDED")
	for _, r := range rows {
		servers := strings.Join(r.Servers, ",")
		if servers == "" {
			servers = "-"
		}
		ended := r.Ended
		if r.Reason != "" {
			ended += " (" + r.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, formatTime(r.first), formatTime(r.last), r.Events, servers, ended)
	}
	return tw.Flush()
}

// formatTime renders unix nanoseconds as UTC RFC 3339 with milliseconds.
func formatTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
