package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// findSession resolves a SESSION argument: "last" (the most recently
// started session that supervised servers: see lastSession), a full
// session ID, or a unique prefix of one.
func findSession(ctx context.Context, j ledger, arg string) (store.SessionInfo, error) {
	if arg == "last" {
		list, err := j.Sessions(ctx)
		if err != nil {
			return store.SessionInfo{}, err
		}
		if len(list) == 0 {
			return store.SessionInfo{}, errors.New("the journal has no sessions")
		}
		return lastSession(ctx, j, list)
	}
	if id, err := uuid.Parse(arg); err == nil {
		info, err := j.Head(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return info, fmt.Errorf("no session %s in the journal", id)
		}
		return info, err
	}
	prefix := strings.ToLower(arg)
	if len(prefix) < 4 || strings.Trim(prefix, "0123456789abcdef-") != "" {
		return store.SessionInfo{}, usageErrorf("session %q is not a session ID, a prefix of at least 4 hex digits, or \"last\"", arg)
	}
	list, err := j.Sessions(ctx)
	if err != nil {
		return store.SessionInfo{}, err
	}
	var found []store.SessionInfo
	for _, info := range list {
		if strings.HasPrefix(info.Session.String(), prefix) {
			found = append(found, info)
		}
	}
	switch len(found) {
	case 0:
		return store.SessionInfo{}, fmt.Errorf("no session starts with %q", arg)
	case 1:
		return found[0], nil
	}
	ids := make([]string, len(found))
	for i, info := range found {
		ids[i] = info.Session.String()
	}
	return store.SessionInfo{}, fmt.Errorf("session %q is ambiguous: %s", arg, strings.Join(ids, ", "))
}

// shortID is how text output names a session: the first 13 characters,
// which for a UUIDv7 are its start time in milliseconds.
func shortID(id uuid.UUID) string { return id.String()[:13] }

// agentCommand reports whether a session run by command (session.started's
// Command) supervised an agent's servers: run, serve and demo do; a
// one-shot call, an offline approve or reject and an archive do not. ""
// (a session from before commands were recorded) counts as one.
func agentCommand(command string) bool {
	switch command {
	case "run", "serve", "demo", "":
		return true
	}
	return false
}

// sessionKind is how `sessions` names a session's kind: its command, or
// "run" for a session without one.
func sessionKind(command string) string {
	if command == "" {
		return "run"
	}
	return command
}

// lastSession returns the newest session of list (in start order) that
// supervised an agent's servers, so that an approve or a one-shot call
// made since does not take `last` over; the newest session of any kind
// when there is none. It reads the first event of each session it passes.
func lastSession(ctx context.Context, j ledger, list []store.SessionInfo) (store.SessionInfo, error) {
	for i := len(list) - 1; i >= 0; i-- {
		cmd, err := sessionCommand(ctx, j, list[i].Session)
		if err != nil {
			return store.SessionInfo{}, err
		}
		if agentCommand(cmd) {
			return list[i], nil
		}
	}
	return list[len(list)-1], nil
}

// sessionCommand returns the command that ran a session, from its
// session.started ("" if its first event is not one).
func sessionCommand(ctx context.Context, j ledger, sid uuid.UUID) (string, error) {
	var cmd string
	err := j.ReadSession(ctx, sid, 1, func(e events.Event) error {
		if p, ok := e.Payload.(*events.SessionStarted); ok {
			cmd = p.Command
		}
		return errFirstOnly
	})
	if errors.Is(err, errFirstOnly) {
		err = nil
	}
	return cmd, err
}

var errFirstOnly = errors.New("first event read")
