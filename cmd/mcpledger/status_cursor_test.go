package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// TestStatusShipCursor: status --cursor FILE shows how far the export a
// `ship --cursor FILE` keeps in FILE is behind the journal (a real ship
// to an OTLP/HTTP receiver that acknowledges, a real journal): up to date
// after the ship, the events appended since and the oldest's time after
// a new session, up to date again after the next ship; in the text and
// in --json, beside the journal's own cursor (which that ship never
// moved). A file that is missing, is not a cursor, cannot be read, or is
// another journal's is a one-line error that says what to do.
func TestStatusShipCursor(t *testing.T) {
	dir := t.TempDir()
	jp := filepath.Join(dir, "journal.db")
	cur := filepath.Join(dir, "ship.cursor")
	session := func(at time.Time, n int) []events.Event {
		evs := []events.Event{events.New(at, "", &events.SessionStarted{Seed: 1})}
		for i := range n - 2 {
			evs = append(evs, events.New(at.Add(time.Duration(i+1)*time.Millisecond), "good",
				&events.CallDecided{CallID: fmt.Sprint("d", i), Tool: "rm", Decision: events.CallDeny, By: "policy", Policy: "never"}))
		}
		evs = append(evs, events.New(at.Add(time.Second), "", &events.SessionStopped{Reason: events.ReasonShutdown}))
		for i := range evs {
			evs[i].ID = events.NewID()
		}
		return evs
	}
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	j := mustCreate(t, jp)
	appendAll(t, j, events.NewID(), session(t0, 5)...)
	j.Close()

	rcv := newMetricsReceiver(t)
	ship := func() {
		t.Helper()
		if r := runCLI(t, "ship", "--journal", jp, "--otlp-endpoint", rcv.URL, "--cursor", cur); r.err != nil {
			t.Fatalf("ship --cursor: %v\n%s", r.err, r.stderr)
		}
	}
	type lags struct {
		Export     *exportLag `json:"export"`
		ExportFile *exportLag `json:"export_file"`
	}
	status := func(want string, wantLag exportLag) {
		t.Helper()
		r := runCLI(t, "status", "--journal", jp, "--cursor", cur)
		if r.err != nil || !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "export (OTLP):") {
			t.Errorf("status --cursor: %v; want a line %q and none of the journal's own cursor:\n%s%s", r.err, want, r.stdout, r.stderr)
		}
		r = runCLI(t, "status", "--json", "--journal", jp, "--cursor", cur)
		var got lags
		if err := json.Unmarshal([]byte(r.stdout), &got); r.err != nil || err != nil {
			t.Fatalf("status --json --cursor: %v, %v\n%s", r.err, err, r.stdout)
		}
		if got.Export != nil || got.ExportFile == nil || *got.ExportFile != wantLag {
			t.Errorf("status --json --cursor: export %+v, export_file %+v; want none and %+v", got.Export, got.ExportFile, wantLag)
		}
	}

	ship()
	status(fmt.Sprintf("export (OTLP, ship --cursor %s): up to date (every event through gpos 5 acknowledged)\n", cur),
		exportLag{CursorFile: cur, CursorGPos: 5})

	t1 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	j, err := store.Open(jp, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, events.NewID(), session(t1, 3)...)
	j.Close()
	status(fmt.Sprintf("export (OTLP, ship --cursor %s): 3 events behind, the oldest from %s (1h0", cur, formatTime(t1.UnixNano())),
		exportLag{CursorFile: cur, CursorGPos: 5, Events: 3, Oldest: t1.UTC().Format(time.RFC3339Nano)})
	ship()
	status("up to date (every event through gpos 8 acknowledged)", exportLag{CursorFile: cur, CursorGPos: 8})
	if r := runCLI(t, "status", "--journal", jp); r.err != nil || strings.Contains(r.stdout, "export (OTLP") {
		t.Errorf("status without --cursor: %v; want no export line (the journal's cursor never moved):\n%s", r.err, r.stdout)
	}

	other := filepath.Join(dir, "other.cursor")
	if err := os.WriteFile(other, []byte(`{"gpos":99,"from":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another journal's cursor within this one's range: the ID of the
	// event at its position is not this journal's.
	within := filepath.Join(dir, "within.cursor")
	if err := os.WriteFile(within, []byte(`{"gpos":3,"from":4,"id":"01a20252-0000-7000-8000-000000000999"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.cursor"), "mcpledger ship --cursor " + filepath.Join(dir, "missing.cursor") + " writes it"},
		{jp, "does not hold a position"},
		{dir, "cannot be read"},
		{other, "it is another journal's; pass the --journal its ship reads"},
		{within, "holds another event than the one its ship acknowledged: it is another journal's"},
	} {
		r := runCLI(t, "status", "--journal", jp, "--cursor", tc.path)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || strings.Contains(r.err.Error(), "\n") || len(r.err.Error()) > 400 || r.stdout != "" {
			t.Errorf("status --cursor %s: %v; want one line saying %q, and nothing on stdout:\n%s", tc.path, r.err, tc.want, r.stdout)
		}
	}
}
