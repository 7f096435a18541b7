package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// foldOf is the journal's fold (approvals, tool cache, launches) as Start
// reads it.
func foldOf(t *testing.T, path string) (approvals, cache string) {
	t.Helper()
	j, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	h, _, err := runtime.LoadHistory(t.Context(), storeJournal{j}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(h.Approvals.List())
	c, _ := json.Marshal(h.Cache.Entries())
	return string(a), string(c)
}

// TestArchiveCommand: archive moves the sessions that ended before the
// cutoff into a sealed journal that every read command reads, keeps what
// is still in force live, and verify checks the archive against the
// record of it.
func TestArchiveCommand(t *testing.T) {
	// Three sessions 90, 60 and 30 days old (and a day); the first decided
	// an approval.
	path := runtimetest.History(t, 3, 200)
	dir := filepath.Dir(path)
	wantApprovals, wantCache := foldOf(t, path)
	if !strings.Contains(wantApprovals, "alice") {
		t.Fatalf("the fixture's approval is missing: %s", wantApprovals)
	}
	before := runCLI(t, "sessions", "--json", "--journal", path)
	var old []sessionRow
	if err := json.Unmarshal([]byte(before.stdout), &old); err != nil || len(old) != 3 {
		t.Fatalf("sessions before: %v %s", err, before.stdout)
	}

	r := runCLI(t, "archive", "--older-than", "45d", "--journal", path, "--json")
	if r.err != nil {
		t.Fatalf("archive: %v\n%s", r.err, r.stderr)
	}
	var rep archiveReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sessions) != 2 || rep.Sessions[0] != old[0].ID && rep.Sessions[1] != old[0].ID || rep.Kept != 1 ||
		rep.BytesAfter <= 0 || rep.EventsPerS <= 0 || rep.From != 1 || rep.Through != rep.Events {
		t.Fatalf("report %+v", rep)
	}
	if filepath.Dir(rep.Archive) != dir {
		t.Errorf("archive at %s, want beside the journal", rep.Archive)
	}

	// The live journal: the newest session and the archive's own.
	var live []sessionRow
	r = runCLI(t, "sessions", "--json", "--journal", path)
	if err := json.Unmarshal([]byte(r.stdout), &live); err != nil || len(live) != 2 || live[0].ID != old[2].ID {
		t.Fatalf("live sessions: %v %s", err, r.stdout)
	}
	if a, c := foldOf(t, path); a != wantApprovals || c != wantCache {
		t.Errorf("archiving lost what is in force:\napprovals %s\nwant      %s\ncache %s\nwant  %s", a, wantApprovals, c, wantCache)
	}
	r = runCLI(t, "verify", "--journal", path)
	if r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("archive %s: 2 sessions, records 1..%d, verified", rep.Archive, rep.Through)) {
		t.Fatalf("verify live: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, "replay", "last", "--json", "--journal", path); r.err != nil || !strings.Contains(r.stdout, "alice") {
		t.Errorf("replay last after archiving: %v; the approval decided 90 days ago is not in force: %s", r.err, r.stdout)
	}

	// The archive: an ordinary journal for every read command.
	r = runCLI(t, "sessions", "--json", "--journal", rep.Archive)
	var archived []sessionRow
	if err := json.Unmarshal([]byte(r.stdout), &archived); err != nil || len(archived) != 2 || archived[0].ID != old[0].ID ||
		!reflect.DeepEqual(archived, old[:2]) {
		t.Fatalf("archive sessions: %v\n%s\nwant %+v", err, r.stdout, old[:2])
	}
	for _, args := range [][]string{
		{"verify"}, {"replay", old[0].ID, "--verify"}, {"why", "mcp__crashy__echo", "--session", old[1].ID},
		{"export", old[1].ID}, {"log", "--session", old[0].ID},
	} {
		if r := runCLI(t, append(args, "--journal", rep.Archive)...); r.err != nil {
			t.Errorf("%v on the archive: %v", args, r.err)
		}
	}
	if r := runCLI(t, "run", "--once", "--journal", rep.Archive); r.err == nil || !strings.Contains(r.err.Error(), "sealed archive") {
		t.Errorf("run on the archive: %v", r.err)
	}

	// Nothing more to archive.
	r = runCLI(t, "archive", "--older-than", "45d", "--journal", path)
	if r.err != nil || !strings.HasPrefix(r.stdout, "nothing to archive") {
		t.Errorf("archive again: %v %q", r.err, r.stdout)
	}

	// A missing archive is said, not fatal; a changed one fails verify.
	moved := rep.Archive + ".moved"
	if err := os.Rename(rep.Archive, moved); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "verify", "--journal", path)
	if r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("warning: archive %s (2 sessions, records 1..%d) is missing", rep.Archive, rep.Through)) {
		t.Errorf("verify without the archive: %v\n%s", r.err, r.stdout)
	}
	data, err := os.ReadFile(moved)
	if err != nil {
		t.Fatal(err)
	}
	tampered := rep.Archive
	if err := os.WriteFile(tampered, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(tampered, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Drop the last archived record of the second session: the archive is
	// still a sound journal of its own (the head is rewritten to match),
	// but not the one the live journal recorded.
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("sealed"), []byte("someone else's archive"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if r := runCLI(t, "verify", "--journal", path); r.err != nil {
		t.Errorf("an archive with a changed meta note still verifies: %v", r.err)
	}
	db, _ = bolt.Open(tampered, 0o600, nil)
	_ = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("log"))
		k, v := b.Cursor().Last()
		v = bytes.Clone(v)
		v[len(v)-1] ^= 1
		return b.Put(bytes.Clone(k), v)
	})
	db.Close()
	if r := runCLI(t, "verify", "--journal", path); r.err == nil || !strings.Contains(r.err.Error(), "archive") {
		t.Errorf("verify with a changed archive: %v", r.err)
	}
}

// TestArchiveBadInput: a cutoff that is not a duration, an archive
// directory that cannot be written, a journal held by another process:
// each refused with what to do, the journal unchanged.
func TestArchiveBadInput(t *testing.T) {
	path := runtimetest.History(t, 3, 200)
	sessions := func() string { return runCLI(t, "sessions", "--journal", path).stdout }
	want := sessions()
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--older-than", "soon"}, `"soon": not a duration (use 30d, 2w, 12h or 90m)`},
		{[]string{"--older-than", "-3d"}, "must be positive"},
		{[]string{}, "--older-than is required"},
	} {
		r := runCLI(t, append(append([]string{"archive"}, c.args...), "--journal", path)...)
		if r.err == nil || exitCode(r.err) != 2 || !strings.Contains(r.err.Error(), c.msg) {
			t.Errorf("archive %v: %v, want a usage error saying %q", c.args, r.err, c.msg)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "archive", "--older-than", "45d", "--to", filepath.Join(file, "sub"), "--journal", path)
	if r.err == nil || !strings.Contains(r.err.Error(), "--to DIR") {
		t.Errorf("archive into a file: %v", r.err)
	}
	holder := mustCreate(t, path)
	r = runCLI(t, "archive", "--older-than", "45d", "--journal", path)
	if r.err == nil || !strings.Contains(r.err.Error(), "holds it") || !strings.Contains(r.err.Error(), "run --retain") {
		t.Errorf("archive while held: %v", r.err)
	}
	holder.Close()
	if got := sessions(); got != want {
		t.Errorf("a refused archive changed the journal:\n%s\nwant\n%s", got, want)
	}
	// A config with one (disabled) server: with none, run --once exits 5.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cfg := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"off": {"command": "x", "disabled": true}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "run", "--once", "--retain", "45d", "--journal", path, "--mcp-config", cfg, "--workspace", filepath.Dir(cfg))
	if r.err != nil || !strings.Contains(r.stderr, "archived 2 sessions") {
		t.Errorf("run --retain: %v\n%s", r.err, r.stderr)
	}
	if r := runCLI(t, "run", "--once", "--retain", "x", "--journal", path); r.err == nil || exitCode(r.err) != 2 {
		t.Errorf("run --retain x: %v", r.err)
	}
}
