package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/store"
)

// findSession resolves a SESSION argument: "last" (the most recently
// started session), a full session ID, or a unique prefix of one.
func findSession(ctx context.Context, j *store.Journal, arg string) (store.SessionInfo, error) {
	if arg == "last" {
		list, err := j.Sessions(ctx)
		if err != nil {
			return store.SessionInfo{}, err
		}
		if len(list) == 0 {
			return store.SessionInfo{}, errors.New("the journal has no sessions")
		}
		return list[len(list)-1], nil
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
