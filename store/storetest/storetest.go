// Package storetest is the conformance suite every journal implementation
// in package store must pass (the bbolt [store.Journal] and the in-memory
// [store.MemJournal]), plus helpers for tests that damage journal files.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// Journal is what the suite needs from a journal: the methods shared by
// *store.Journal and *store.MemJournal.
type Journal interface {
	Append(ctx context.Context, session uuid.UUID, exp store.Expect, evs []events.Event) (store.AppendResult, error)
	Submit(session uuid.UUID, exp store.Expect, evs []events.Event) *store.Pending
	Sessions(ctx context.Context) ([]store.SessionInfo, error)
	Head(ctx context.Context, session uuid.UUID) (store.SessionInfo, error)
	ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error
	ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
	Follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
	Verify(ctx context.Context) (store.VerifyReport, error)
	Close() error
}

// Run runs the conformance suite. open must return a new, empty journal
// for each call, and arrange for it to be closed when t ends (Close is
// idempotent, so a test may close it earlier).
func Run(t *testing.T, open func(t *testing.T) Journal) {
	tests := []struct {
		name string
		fn   func(t *testing.T, j Journal)
	}{
		{"RoundTrip", testRoundTrip},
		{"GaplessSeqs", testGaplessSeqs},
		{"GlobalOrder", testGlobalOrder},
		{"Expect", testExpect},
		{"ConflictInBurst", testConflictInBurst},
		{"SameSessionRace", testSameSessionRace},
		{"Idempotent", testIdempotent},
		{"Invalid", testInvalid},
		{"ReadAllFrom", testReadAllFrom},
		{"ReadStopsOnError", testReadStopsOnError},
		{"ReadLarge", testReadLarge},
		{"Follow", testFollow},
		{"Verify", testVerify},
		{"HashChain", testHashChain},
		{"SessionsOrder", testSessionsOrder},
		{"NotFound", testNotFound},
		{"Closed", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// Event returns a realistic event (about 200 bytes encoded) about server:
// a lifecycle transition with a classified error, at time t.
func Event(server string, attempt int, t time.Time) events.Event {
	return events.New(t, server, &events.ServerTransitioned{
		From: events.StateReady, To: events.StateReconnecting, Trigger: "transport_closed",
		Attempt: attempt,
		Error:   &events.ClassifiedError{Class: events.ErrTransportClosed, Message: "read |0: file already closed"},
	})
}

var t0 = time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC)

// batch returns n events about server with increasing times.
func batch(server string, n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = Event(server, i+1, t0.Add(time.Duration(i)*time.Millisecond))
	}
	return evs
}

func mustAppend(t *testing.T, j Journal, sid uuid.UUID, exp store.Expect, evs []events.Event) store.AppendResult {
	t.Helper()
	res, err := j.Append(t.Context(), sid, exp, evs)
	if err != nil {
		t.Fatalf("Append(%s, %s, %d events): %v", sid, exp, len(evs), err)
	}
	return res
}

func readSession(t *testing.T, j Journal, sid uuid.UUID, from uint64) []events.Event {
	t.Helper()
	var out []events.Event
	if err := j.ReadSession(t.Context(), sid, from, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ReadSession(%s, %d): %v", sid, from, err)
	}
	return out
}

func readAll(t *testing.T, j Journal, from uint64) []events.Event {
	t.Helper()
	var out []events.Event
	if err := j.ReadAll(t.Context(), from, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ReadAll(%d): %v", from, err)
	}
	return out
}

func head(t *testing.T, j Journal, sid uuid.UUID) store.SessionInfo {
	t.Helper()
	info, err := j.Head(t.Context(), sid)
	if err != nil {
		t.Fatalf("Head(%s): %v", sid, err)
	}
	return info
}
