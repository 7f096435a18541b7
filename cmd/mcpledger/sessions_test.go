package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSessions(t *testing.T) {
	f := newFixture(t)
	r := runCLI(t, "sessions", "--journal", f.path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 sessions, got:\n%s", r.stdout)
	}
	for i, want := range []struct{ id, fields string }{
		{f.stopped.String(), "2025-05-07T14:02:00.000Z  2025-05-07T14:02:04.000Z       5  fs,github  stopped (shutdown)"},
		{f.live.String(), "2025-05-07T14:02:10.000Z  2025-05-07T14:02:11.000Z       2  github     running or interrupted"},
	} {
		if line := lines[i+1]; !strings.HasPrefix(line, want.id) || !strings.HasSuffix(line, want.fields) {
			t.Errorf("line %d = %q, want %s … %s", i+1, line, want.id, want.fields)
		}
	}

	r = runCLI(t, "sessions", "--json", "--journal", f.path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("sessions --json is not a JSON array: %v\n%s", err, r.stdout)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	first := rows[0]
	if first["id"] != f.stopped.String() || first["started"] != "2025-05-07T14:02:00Z" || first["events"] != 5.0 ||
		first["ended"] != "stopped" || first["reason"] != "shutdown" || len(first["servers"].([]any)) != 2 {
		t.Errorf("first row = %v", first)
	}
	if second := rows[1]; second["ended"] != "running or interrupted" || second["reason"] != nil {
		t.Errorf("second row = %v", second)
	}
}

func TestSessionsEmpty(t *testing.T) {
	f := newFixture(t)
	path := f.path + ".empty"
	j := mustCreate(t, path)
	j.Close()
	r := runCLI(t, "sessions", "--journal", path)
	if r.err != nil || r.stdout != "no sessions\n" {
		t.Errorf("sessions of an empty journal: %q, %v", r.stdout, r.err)
	}
	r = runCLI(t, "sessions", "--json", "--journal", path)
	if r.err != nil || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("sessions --json of an empty journal: %q, %v", r.stdout, r.err)
	}
}
