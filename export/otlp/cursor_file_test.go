package otlp_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/export/otlp"
)

// TestFileCursor: no file is no position; a saved position reads back
// (and replaces the last, leaving no temporary file); a file that does not
// hold a position is refused with what to do, never read as one.
func TestFileCursor(t *testing.T) {
	dir := t.TempDir()
	c := otlp.FileCursor{Path: filepath.Join(dir, "ship.cursor")}
	if p, ok, err := c.Load(t.Context()); ok || err != nil || p != (otlp.Position{}) {
		t.Fatalf("Load of no file = %+v, %v, %v", p, ok, err)
	}
	id := uuid.MustParse("01a20252-0000-7000-8000-000000000007")
	for _, p := range []otlp.Position{{GPos: 7, From: 3}, {GPos: 9, From: 10, ID: id}} {
		if err := c.Save(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := c.Load(t.Context()); !ok || err != nil || got != p {
			t.Errorf("Load after Save(%+v) = %+v, %v, %v", p, got, ok, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files beside the cursor, want it alone", len(entries))
	}
	for _, bad := range []string{"", "nonsense", `{"gpos":2,"from":0}`, `{"gpos":2,"from":4}`} {
		if err := os.WriteFile(c.Path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.Load(t.Context()); ok || !errors.Is(err, otlp.ErrConfig) {
			t.Errorf("Load of %q: ok %v, %v; want ErrConfig", bad, ok, err)
		}
	}
	// A file named by mistake (a journal, say) is refused in a short
	// message that does not only say to delete it.
	if err := os.WriteFile(c.Path, bytes.Repeat([]byte{0, 'x'}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Load(t.Context()); !errors.Is(err, otlp.ErrConfig) || len(err.Error()) > 600 || !strings.Contains(err.Error(), "if not, name the file") {
		t.Errorf("Load of a large file that is not a cursor: %d characters: %.300v", len(err.Error()), err)
	}
	if err := (otlp.FileCursor{Path: filepath.Join(dir, "missing", "c")}).Save(t.Context(), otlp.Position{GPos: 1, From: 2}); err == nil {
		t.Error("Save into a missing folder succeeded")
	}
}
