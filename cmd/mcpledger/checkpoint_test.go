package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// saveCheckpoint stores the journal's fold up to gpos before (0: all) as a
// checkpoint, edited by edit when not nil.
func saveCheckpoint(t *testing.T, path string, before uint64, edit func([]byte) []byte) {
	t.Helper()
	j, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	h, _, err := runtime.LoadHistory(t.Context(), storeJournal{j}, before, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := h.Encode()
	if edit != nil {
		data = edit(data)
	}
	if err := j.SaveCheckpoint(h.GPos, data); err != nil {
		t.Fatal(err)
	}
}

// TestReadsFromCheckpoints: the read commands answer the same from
// checkpoints as from the whole journal; verify compares every checkpoint
// with the fold and reports one that differs, and --drop-checkpoints
// removes them.
func TestReadsFromCheckpoints(t *testing.T) {
	f := newRecordedFixture(t)
	commands := [][]string{
		{"sessions", "--json"},
		{"sessions"},
		{"status", "--json"},
		{"tools", "--json"},
		{"approvals", "--json"},
		{"replay", "last", "--json"},
		{"replay", f.stopped.String(), "--json"},
	}
	outputs := func() []string {
		var out []string
		for _, args := range commands {
			r := runCLI(t, append(args, "--journal", f.path)...)
			if r.err != nil || r.stderr != "" {
				t.Fatalf("%v: %v\n%s", args, r.err, r.stderr)
			}
			out = append(out, r.stdout)
		}
		return out
	}
	want := outputs()

	sessions := func() []store.SessionInfo {
		j, err := store.Open(f.path, &store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		ss, err := j.Sessions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}()
	// One checkpoint inside the first session, one between the sessions,
	// one at the end.
	saveCheckpoint(t, f.path, sessions[0].LastGPos-3, nil)
	saveCheckpoint(t, f.path, sessions[1].FirstGPos, nil)
	saveCheckpoint(t, f.path, 0, nil)
	for i, got := range outputs() {
		if got != want[i] {
			t.Errorf("%v from checkpoints:\n%s\nwant (from the whole journal):\n%s", commands[i], got, want[i])
		}
	}
	r := runCLI(t, "verify", "--journal", f.path)
	if r.err != nil || !strings.Contains(r.stdout, ", 3 checkpoints;") {
		t.Fatalf("verify: %v %q", r.err, r.stdout)
	}

	// A checkpoint someone edited: sessions trusts it, verify does not.
	saveCheckpoint(t, f.path, 0, func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte(`"reason":"shutdown"`), []byte(`"reason":"forged"`))
	})
	if r := runCLI(t, "sessions", "--json", "--journal", f.path); !strings.Contains(r.stdout, "forged") {
		t.Fatalf("the edited checkpoint was not read (the test edits nothing?): %s", r.stdout)
	}
	r = runCLI(t, "verify", "--journal", f.path)
	if r.err == nil || !strings.Contains(r.err.Error(), "differs from the fold") || !strings.Contains(r.err.Error(), "--drop-checkpoints") {
		t.Fatalf("verify of an edited checkpoint: %v", r.err)
	}
	if r := runCLI(t, "verify", "--drop-checkpoints", "--journal", f.path); r.err != nil || !strings.Contains(r.stdout, "dropped") {
		t.Fatalf("verify --drop-checkpoints: %v %q", r.err, r.stdout)
	}
	r = runCLI(t, "verify", "--journal", f.path)
	if r.err != nil || !strings.Contains(r.stdout, ", 0 checkpoints;") {
		t.Fatalf("verify after dropping: %v %q", r.err, r.stdout)
	}

	// A checkpoint that does not decode: a warning, and the same answers.
	saveCheckpoint(t, f.path, 0, func([]byte) []byte { return []byte("{") })
	for i, args := range commands {
		r := runCLI(t, append(args, "--journal", f.path)...)
		if r.err != nil || r.stdout != want[i] {
			t.Errorf("%v with a malformed checkpoint: %v\n%s", args, r.err, r.stdout)
		}
		if args[0] != "sessions" {
			continue // the others read from a checkpoint before the last session
		}
		if !strings.Contains(r.stderr, "warning: checkpoint at gpos") || !strings.Contains(r.stderr, "malformed") {
			t.Errorf("%v: no warning about the malformed checkpoint: %q", args, r.stderr)
		}
	}
	if r := runCLI(t, "verify", "--journal", f.path); r.err == nil {
		t.Error("verify passes a malformed checkpoint")
	}
}
