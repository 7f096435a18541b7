package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// recordedFixture is a journal holding two sessions recorded from real
// runs (testdata/journals): sound, and replayable.
type recordedFixture struct {
	path    string
	stopped uuid.UUID
}

func newRecordedFixture(t *testing.T) recordedFixture {
	t.Helper()
	f := recordedFixture{path: filepath.Join(t.TempDir(), "journal.db")}
	j := mustCreate(t, f.path)
	defer j.Close()
	for _, name := range []string{"crash-loop.jsonl", "approvals.jsonl"} {
		fh, err := os.Open(filepath.Join("..", "..", "testdata", "journals", name))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := replay.ReadJSONL(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, j, evs[0].Session, evs...)
		if f.stopped == uuid.Nil {
			f.stopped = evs[0].Session
		}
	}
	return f
}

func TestVerify(t *testing.T) {
	f := newRecordedFixture(t)
	r := runCLI(t, "verify", "--journal", f.path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.HasPrefix(r.stdout, "OK "+f.path+": 2 sessions, ") || !strings.HasSuffix(r.stdout, "every session replays\n") {
		t.Errorf("verify printed %q", r.stdout)
	}

	// A journal whose records are sound but whose decisions no input
	// caused (hand-made) does not replay, and verify says where.
	hand := newFixture(t)
	r = runCLI(t, "verify", "--journal", hand.path)
	if r.err == nil || !strings.Contains(r.err.Error(), "does not replay") || !strings.Contains(r.err.Error(), "no recorded input causes it") {
		t.Errorf("verify of a journal that does not replay: %v", r.err)
	}

	bad := filepath.Join(t.TempDir(), "damaged.db")
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	storetest.FlipRecordByte(t, bad, f.stopped, 3)
	r = runCLI(t, "verify", "--journal", bad)
	if r.err == nil || exitCode(r.err) == 0 {
		t.Fatalf("verify of a damaged journal succeeded: %q", r.stdout)
	}
	var ce *store.CorruptError
	if !errors.As(r.err, &ce) || ce.Session != f.stopped || ce.Seq != 3 {
		t.Errorf("verify blamed %+v, want session %s seq 3", ce, f.stopped)
	}
	for _, want := range []string{bad, "session " + f.stopped.String(), "seq 3", "CRC mismatch"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q does not name %q", r.err, want)
		}
	}
	t.Logf("mcpledger: %v", r.err)
}
