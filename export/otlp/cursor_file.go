package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// FileCursor keeps a [Position] in a small file of its own: the cursor of
// a shipper that reads a journal another process holds for writing
// (`mcpledger ship` beside `run`), which cannot write that journal. The
// file is replaced atomically (written, synced, renamed, its folder
// synced), so a kill leaves the old position or the new one.
type FileCursor struct {
	Path string
}

type fileCursor struct {
	GPos uint64 `json:"gpos"`
	From uint64 `json:"from"`
	// ID is the event at GPos (a file written before it was kept has
	// none, and is not checked: Position.ID).
	ID uuid.UUID `json:"id,omitzero"`
}

// Load reads the file; ok is false when it does not exist.
func (c FileCursor) Load(context.Context) (Position, bool, error) {
	b, err := os.ReadFile(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, err
	}
	var f fileCursor
	if err := json.Unmarshal(b, &f); err != nil || f.From == 0 || f.From > f.GPos+1 {
		return Position{}, false, fmt.Errorf("%w: cursor file %s does not hold a position (%q): if it is a ship's cursor, delete it to ship the journal again from its start; if not, name the file the ship keeps its cursor in", ErrConfig, c.Path, head(b))
	}
	return Position{GPos: f.GPos, From: f.From, ID: f.ID}, true, nil
}

// head is the start of b, enough to recognize a file by in an error
// (one named by mistake may be large: a journal).
func head(b []byte) string {
	const n = 32
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// Save replaces the file with p.
func (c FileCursor) Save(_ context.Context, p Position) error {
	b, _ := json.Marshal(fileCursor{GPos: p.GPos, From: p.From, ID: p.ID})
	tmp := c.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.Path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(c.Path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
