package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

var t0 = time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC)

// fixture is a journal with two sessions: an older one that stopped, and
// a newer one still running.
type fixture struct {
	path          string
	stopped, live uuid.UUID
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	f := fixture{path: filepath.Join(t.TempDir(), "journal.db"), stopped: events.NewID()}
	time.Sleep(2 * time.Millisecond) // distinct UUIDv7 start times
	f.live = events.NewID()
	j, err := store.Open(f.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	appendAll(t, j, f.stopped,
		events.New(at(0), "", &events.SessionStarted{Seed: 7, Build: "test", Version: "v0.0.0"}),
		events.New(at(1), "github", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "admitted", Attempt: 1}),
		events.New(at(2), "fs", &events.PingFailed{Attempt: 1, Consecutive: 1, Error: "deadline exceeded"}),
		events.New(at(3), "github", &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting,
			Trigger: "transport_closed", Attempt: 2, Error: &events.ClassifiedError{Class: events.ErrTransportClosed, Message: "EOF"}}),
		events.New(at(4), "", &events.SessionStopped{Reason: events.ReasonShutdown}),
	)
	appendAll(t, j, f.live,
		events.New(at(10), "", &events.SessionStarted{Seed: 8, Build: "test", Version: "v0.0.0"}),
		events.New(at(11), "github", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "admitted", Attempt: 1}),
	)
	return f
}

func appendAll(t *testing.T, j *store.Journal, sid uuid.UUID, evs ...events.Event) {
	t.Helper()
	if _, err := j.Append(context.Background(), sid, store.Any, evs); err != nil {
		t.Fatal(err)
	}
}

// result is what one run of the CLI printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// runCLI runs the command line args through run, with stdin empty.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return result{out.String(), errOut.String(), err}
}

// runEnv runs args with only the environment variables in vars.
func runEnv(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return vars[k] }, openJournal: store.Open}
	err := e.run(t.Context(), args)
	return result{out.String(), errOut.String(), err}
}

func mustCreate(t *testing.T, path string) *store.Journal {
	t.Helper()
	j, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
