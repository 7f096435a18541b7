package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// TestCursorDurable: a saved cursor is read back after the journal is
// closed and opened again (SaveCursor commits on its own), the latest save
// wins, and cursors of different names are independent.
func TestCursorDurable(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	j := mustOpen(t, path, nil)
	if _, err := j.Cursor(ctx, "otlp"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Cursor of a new journal: %v, want ErrNotFound", err)
	}
	if _, err := j.Append(ctx, events.NewID(), store.NoStream, evs(5)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCursor(ctx, "otlp", store.Cursor{GPos: 3, From: 2}); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCursor(ctx, "otlp", store.Cursor{GPos: 5, From: 4}); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCursor(ctx, "other", store.Cursor{GPos: 0, From: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Cursor(ctx, "otl"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Cursor of an unsaved name: %v, want ErrNotFound", err)
	}
	j.Close()

	j = mustOpen(t, path, &store.Options{ReadOnly: true})
	defer j.Close()
	for name, want := range map[string]store.Cursor{"otlp": {GPos: 5, From: 4}, "other": {GPos: 0, From: 1}} {
		c, err := j.Cursor(ctx, name)
		if err != nil || c != want {
			t.Errorf("Cursor(%q) after reopening = %+v, %v; want %+v", name, c, err, want)
		}
	}
}

// TestCursorRefused: what SaveCursor refuses, at the edges of what it
// takes, and that a refused save leaves the stored cursor as it was.
func TestCursorRefused(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	j := mustOpen(t, path, noSync())
	if _, err := j.Append(ctx, events.NewID(), store.NoStream, evs(4)); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", store.MaxCursorName)
	for _, ok := range []struct {
		name string
		c    store.Cursor
	}{
		{long, store.Cursor{GPos: 4, From: 5}}, // From one past GPos, at the log's end
		{"a", store.Cursor{GPos: 4, From: 1}},
		{"b", store.Cursor{GPos: 0, From: 1}},
	} {
		if err := j.SaveCursor(ctx, ok.name, ok.c); err != nil {
			t.Errorf("SaveCursor(%d-byte name, %+v): %v", len(ok.name), ok.c, err)
		}
	}
	for _, bad := range []struct {
		name string
		c    store.Cursor
	}{
		{"", store.Cursor{GPos: 1, From: 1}},
		{long + "n", store.Cursor{GPos: 1, From: 1}},
		{"a", store.Cursor{GPos: 2, From: 0}},
		{"a", store.Cursor{GPos: 2, From: 4}},
		{"a", store.Cursor{GPos: 5, From: 5}}, // past the log's end
	} {
		if err := j.SaveCursor(ctx, bad.name, bad.c); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SaveCursor(%q, %+v): %v, want ErrInvalid", bad.name, bad.c, err)
		}
	}
	if err := j.SaveCursor(ctx, "a", store.Cursor{GPos: 2, From: 4}); err == nil || !strings.Contains(err.Error(), "outside 1 to 3") {
		t.Errorf("SaveCursor with From past GPos+1: %v; want it to give the range, 1 to 3", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := j.SaveCursor(cancelled, "a", store.Cursor{GPos: 2, From: 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("SaveCursor with a cancelled context: %v", err)
	}
	if c, err := j.Cursor(ctx, "a"); err != nil || c != (store.Cursor{GPos: 4, From: 1}) {
		t.Errorf("after refused saves Cursor = %+v, %v; want the last accepted one", c, err)
	}
	j.Close()
	if err := j.SaveCursor(ctx, "a", store.Cursor{GPos: 1, From: 1}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("SaveCursor after Close: %v, want ErrClosed", err)
	}
	if _, err := j.Cursor(ctx, "a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Cursor after Close: %v, want ErrClosed", err)
	}
	ro := mustOpen(t, path, &store.Options{ReadOnly: true})
	defer ro.Close()
	if err := ro.SaveCursor(ctx, "a", store.Cursor{GPos: 1, From: 1}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("SaveCursor on a read-only journal: %v, want ErrReadOnly", err)
	}
}

// TestCursorDamaged: stored bytes that fail their checksum, have the
// wrong length, or name a position outside the log are reported as
// ErrCursorDamaged, never returned as a position.
func TestCursorDamaged(t *testing.T) {
	seal := func(gpos, from uint64) []byte {
		v := make([]byte, 20)
		binary.BigEndian.PutUint64(v[4:], gpos)
		binary.BigEndian.PutUint64(v[12:], from)
		binary.BigEndian.PutUint32(v, crc32.Checksum(v[4:], crc32.MakeTable(crc32.Castagnoli)))
		return v
	}
	flipped := seal(2, 3)
	flipped[19] ^= 1
	for name, v := range map[string][]byte{
		"fine":        seal(3, 2),
		"at the end":  seal(3, 4),
		"flipped":     flipped,
		"short":       seal(2, 3)[:19],
		"long":        append(seal(2, 3), 0),
		"past end":    seal(4, 4),
		"from zero":   seal(2, 0),
		"from beyond": seal(2, 4),
	} {
		t.Run(name, func(t *testing.T) {
			path := tempPath(t)
			j := mustOpen(t, path, noSync())
			if _, err := j.Append(t.Context(), events.NewID(), store.NoStream, evs(3)); err != nil {
				t.Fatal(err)
			}
			j.Close()
			putRaw(t, path, "cursors", "c", v)
			j = mustOpen(t, path, &store.Options{ReadOnly: true})
			defer j.Close()
			c, err := j.Cursor(t.Context(), "c")
			switch name {
			case "fine", "at the end":
				if want := (store.Cursor{GPos: 3, From: binary.BigEndian.Uint64(v[12:])}); err != nil || c != want {
					t.Errorf("Cursor = %+v, %v; want %+v", c, err, want)
				}
			default:
				if !errors.Is(err, store.ErrCursorDamaged) {
					t.Errorf("Cursor = %+v, %v; want ErrCursorDamaged", c, err)
				}
			}
		})
	}
}

// putRaw writes key = value into bucket of the bbolt file at path,
// creating the bucket: a stand-in for damage.
func putRaw(t *testing.T, path, bucket, key string, value []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), value)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestArchiveKeepsCursors: the live journal an archive rewrites keeps the
// cursors (gpos survive an archive), so its consumers neither deliver the
// kept records again nor skip any.
func TestArchiveKeepsCursors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	archiveJournal(t, path, 3, 10)
	j := mustOpen(t, path, noSync())
	if err := j.SaveCursor(t.Context(), "otlp", store.Cursor{GPos: 25, From: 21}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if _, err := store.Archive(t.Context(), path, filepath.Join(dir, "a1.db"), 10, []byte("base"), archiveMark(events.NewID()), nil); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, path, &store.Options{ReadOnly: true})
	defer j.Close()
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c != (store.Cursor{GPos: 25, From: 21}) {
		t.Errorf("Cursor after Archive = %+v, %v", c, err)
	}
}

// TestReaderCursor: a Reader gives the cursor the file holds, through
// the writer while one serves it and from the file after, and reports a
// missing or damaged one with the same sentinels as Journal.Cursor.
func TestReaderCursor(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	if _, err := j.Append(t.Context(), events.NewID(), store.NoStream, evs(3)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCursor(t.Context(), "otlp", store.Cursor{GPos: 2, From: 1}); err != nil {
		t.Fatal(err)
	}
	s := serve(j)
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: s.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check := func(how string) {
		t.Helper()
		if c, err := r.Cursor(t.Context(), "otlp"); err != nil || c != (store.Cursor{GPos: 2, From: 1}) {
			t.Errorf("%s: Cursor = %+v, %v", how, c, err)
		}
		if _, err := r.Cursor(t.Context(), "other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: Cursor of an unsaved name: %v, want ErrNotFound", how, err)
		}
	}
	check("through the writer")
	s.stop()
	j.Close()
	check("from the file")

	putRaw(t, path, "cursors", "otlp", []byte("not a cursor"))
	j = mustOpen(t, path, noSync())
	defer j.Close()
	s = serve(j)
	defer s.stop()
	r2, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Remote: s.remote})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.Cursor(t.Context(), "otlp"); !errors.Is(err, store.ErrCursorDamaged) {
		t.Errorf("through the writer, a damaged cursor: %v, want ErrCursorDamaged", err)
	}
}
