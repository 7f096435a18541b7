package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

func TestVerify(t *testing.T) {
	f := newFixture(t)
	r := runCLI(t, "verify", "--journal", f.path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "OK " + f.path + ": 2 sessions, 7 events, 7 log entries\n"; r.stdout != want {
		t.Errorf("verify printed %q, want %q", r.stdout, want)
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
