package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/store"
)

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		inStderr string
		inStdout string
	}{
		{nil, 2, "usage: mcpledger [--journal PATH] COMMAND", ""},
		{[]string{"frobnicate"}, 2, "usage: mcpledger [--journal PATH] COMMAND", ""},
		{[]string{"log", "--bogus"}, 2, "usage: mcpledger log", ""},
		{[]string{"log", "stray"}, 2, "usage: mcpledger log", ""},
		{[]string{"log", "--kind", "nope"}, 2, "", ""},
		{[]string{"log", "-h"}, 0, "", "usage: mcpledger log"},
		{[]string{"help", "sessions"}, 0, "", "usage: mcpledger sessions"},
	} {
		r := runCLI(t, c.args...)
		if code := codeOf(r.err); code != c.code {
			t.Errorf("%q: exit %d (%v), want %d", c.args, code, r.err, c.code)
		}
		if !strings.Contains(r.stderr, c.inStderr) || !strings.Contains(r.stdout, c.inStdout) {
			t.Errorf("%q: stderr lacks %q or stdout lacks %q:\n%s\n%s", c.args, c.inStderr, c.inStdout, r.stderr, r.stdout)
		}
	}
	if r := runCLI(t, "log", "--bogus"); r.err == nil || r.err.Error() != "log: unknown flag: --bogus" {
		t.Errorf("log --bogus: %v, want log: unknown flag: --bogus", r.err)
	}
	r := runCLI(t, "help")
	if r.err != nil || !strings.Contains(r.stdout, "log [--session ID|last]") || !strings.Contains(r.stdout, "serve --stdio") {
		t.Errorf("help: %v\n%s", r.err, r.stdout)
	}
}

func codeOf(err error) int {
	if err == nil {
		return 0
	}
	return exitCode(err)
}

func TestJournalPath(t *testing.T) {
	f := newFixture(t)
	home := t.TempDir()
	for _, c := range []struct {
		name string
		vars map[string]string
		args []string
		want string // in the error, or "" for success
	}{
		{"flag", nil, []string{"--journal", f.path}, ""},
		{"env", map[string]string{"MCPLEDGER_JOURNAL": f.path}, nil, ""},
		{"flag beats env", map[string]string{"MCPLEDGER_JOURNAL": "/nonexistent/j.db"}, []string{"--journal", f.path}, ""},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/nonexistent/state", "HOME": home},
			nil, "no journal at /nonexistent/state/mcpledger/journal.db (from $XDG_STATE_HOME); pass --journal PATH or set MCPLEDGER_JOURNAL"},
		{"relative xdg is ignored", map[string]string{"XDG_STATE_HOME": "rel", "HOME": home},
			nil, "no journal at " + filepath.Join(home, ".local/state/mcpledger/journal.db") + " (from the default)"},
		{"missing flag path", nil, []string{"--journal", "/nonexistent/j.db"}, "no journal at /nonexistent/j.db (from --journal)"},
	} {
		for _, cmd := range []string{"sessions", "log"} {
			r := runEnv(t, c.vars, append([]string{cmd}, c.args...)...)
			switch {
			case c.want == "" && r.err != nil:
				t.Errorf("%s, %s: %v", c.name, cmd, r.err)
			case c.want != "" && (r.err == nil || !strings.Contains(r.err.Error(), c.want)):
				t.Errorf("%s, %s: err = %v, want it to contain %q", c.name, cmd, r.err, c.want)
			}
		}
	}
}

// TestReadBesideAWriter opens the fixture for writing and serves its reads,
// as `mcpledger run` does: read commands answer as they do offline.
func TestReadBesideAWriter(t *testing.T) {
	f := newFixture(t)
	offline := runCLI(t, "sessions", "--journal", f.path)
	j, err := store.Open(f.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	srv, err := control.Serve(control.Path(f.path), control.Options{
		Reads: readsOf(j)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := runCLI(t, "sessions", "--journal", f.path)
	if r.err != nil || r.stdout != offline.stdout || offline.err != nil {
		t.Errorf("sessions beside a writer: %v\n%s\nwant (%v)\n%s", r.err, r.stdout, offline.err, offline.stdout)
	}
	// A second writer is refused within its lock timeout.
	start := time.Now()
	r = runCLI(t, "verify", "--drop-checkpoints", "--journal", f.path)
	if !errors.Is(r.err, store.ErrLocked) {
		t.Errorf("verify --drop-checkpoints beside a writer: %v", r.err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("gave up after %v", d)
	}
}
