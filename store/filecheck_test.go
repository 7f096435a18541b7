package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// TestDamagedFirstMeta: bbolt keeps two meta pages so that a file whose
// first one is damaged opens from the second. Open does too, read-only
// and writable; with both damaged the file is not a journal.
func TestDamagedFirstMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := events.NewID()
	for i := range 3 { // the metas take turns: both hold a commit with events
		if _, err := j.Append(t.Context(), sid, Any, []events.Event{ev("a", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := parseMeta(data)
	flipChecksum := func(page int) {
		t.Helper()
		data[page*int(m0.pageSize)+pageHeader+metaSumOffset] ^= 1
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flipChecksum(0)
	for _, ro := range []bool{true, false} {
		j, err := Open(path, &Options{ReadOnly: ro, NoSync: true})
		if err != nil {
			t.Fatalf("Open(ReadOnly=%v) with the first meta page damaged: %v", ro, err)
		}
		info, err := j.Head(t.Context(), sid)
		if err != nil || info.LastSeq < 2 {
			t.Errorf("Head = %+v, %v; want the session as one of the metas has it", info, err)
		}
		if _, err := j.Verify(t.Context()); err != nil {
			t.Errorf("Verify: %v", err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if data, err = os.ReadFile(path); err != nil { // the writable Open rewrote a meta
		t.Fatal(err)
	}
	flipChecksum(0)
	flipChecksum(1)
	if _, err := Open(path, &Options{ReadOnly: true}); !errors.Is(err, ErrNotJournal) {
		t.Errorf("Open with both meta pages damaged: %v, want ErrNotJournal", err)
	}
}
