package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// SessionsCommand lists the journal's sessions.
type SessionsCommand struct {
	env *env
}

// sessionRow is one session as `sessions` shows it; the JSON shape of
// `sessions --json` (an array of these).
type sessionRow struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"` // the command that ran it: run, serve, demo, call, approve, reject, reconnect, archive
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
	j, err := f.openReadOnly(ctx)
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
	// The servers and endings come from the journal's fold: the newest
	// checkpoint and the events after it.
	h, err := c.env.history(ctx, j, 0)
	if err != nil {
		return err
	}
	for _, s := range h.Sessions() {
		id, err := uuid.Parse(s.Session)
		r := index[id]
		if err != nil || r == nil {
			continue // a session that started after Sessions was read
		}
		r.Servers = append(r.Servers, s.Servers...)
		r.Kind = sessionKind(s.Command)
		if s.Stopped {
			r.Ended, r.Reason = "stopped", string(s.Reason)
		}
	}
	if *asJSON {
		for i := range rows {
			rows[i].Started = time.Unix(0, rows[i].first).UTC().Format(time.RFC3339Nano)
			rows[i].LastEvent = time.Unix(0, rows[i].last).UTC().Format(time.RFC3339Nano)
		}
		return writeJSON(c.env.stdout, rows, true)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(c.env.stdout, "no sessions")
		return err
	}
	t := newTable([]string{"SESSION", "KIND", "STARTED", "LAST EVENT", "EVENTS", "SERVERS", "ENDED"}, "EVENTS")
	for _, r := range rows {
		servers := strings.Join(r.Servers, ",")
		if servers == "" {
			servers = "-"
		}
		ended := r.Ended
		if r.Reason != "" {
			ended += " (" + r.Reason + ")"
		}
		t.add(r.ID, dash(r.Kind), formatTime(r.first), formatTime(r.last), strconv.FormatUint(r.Events, 10), servers, ended)
	}
	return t.write(c.env.stdout)
}

// formatTime renders unix nanoseconds as UTC RFC 3339 with milliseconds.
func formatTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
