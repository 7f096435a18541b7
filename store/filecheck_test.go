package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

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

// newestMeta returns the meta page bbolt opens the file data from.
func newestMeta(t *testing.T, data []byte) boltMeta {
	t.Helper()
	m0, ok0 := parseMeta(data)
	m1, ok1 := parseMeta(data[m0.pageSize:])
	if !ok0 || !ok1 {
		t.Fatal("a meta page is damaged")
	}
	if m1.txid > m0.txid {
		return m1
	}
	return m0
}

// TestCheckFileRootBranch: a journal file whose root bucket page is a
// branch page (other top-level buckets beside the journal's fill more
// than a page) passes checkFile and opens; one whose branch element
// points at a page outside the file, or whose key runs past the page,
// does not.
func TestCheckFileRootBranch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), events.NewID(), NoStream, []events.Event{ev("a", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range 300 {
			if _, err := tx.CreateBucket(fmt.Appendf(nil, "other-%03d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := newestMeta(t, data)
	data = data[:m.pgid*uint64(m.pageSize)] // the pages in use
	le := binary.LittleEndian
	root := int(m.root) * int(m.pageSize)
	if flags := le.Uint16(data[root+8:]); flags != branchPageFlag {
		t.Fatalf("the root bucket's page has flags %#x, want a branch page", flags)
	}
	if err := checkFile(path, time.Second); err != nil {
		t.Fatalf("checkFile: %v", err)
	}
	j, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := j.Verify(t.Context()); err != nil {
		t.Errorf("Verify: %v", err)
	}
	j.Close()

	elem := root + pageHeader // the first branch element: key offset, key size, child page
	for _, c := range []struct {
		name   string
		damage func(b []byte)
		want   string
	}{
		{"child past the end", func(b []byte) { le.PutUint64(b[elem+8:], m.pgid) }, "outside the file"},
		{"child a meta page", func(b []byte) { le.PutUint64(b[elem+8:], 1) }, "outside the file"},
		{"key past the page", func(b []byte) { le.PutUint32(b[elem+4:], m.pageSize) }, "past the page"},
	} {
		b := bytes.Clone(data)
		c.damage(b)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := checkFile(path, time.Second); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: checkFile = %v, want ErrCorrupt, %q", c.name, err, c.want)
		}
	}
}

// TestOpenTruncated: a file shorter than the pages its last commit wrote
// (a truncated copy) is refused as corrupt before bbolt maps it; one that
// ends right after them opens.
func TestOpenTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := events.NewID()
	for i := range 3 {
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
	m := newestMeta(t, data)
	used := int(m.pgid) * int(m.pageSize)
	for _, n := range []int{used - 1, used - int(m.pageSize), used / 2} {
		if err := os.WriteFile(path, data[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, &Options{ReadOnly: true})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("Open of the file cut to %d of its %d bytes in use: %v, want ErrCorrupt, truncated", n, used, err)
		}
	}
	if err := os.WriteFile(path, data[:used], 0o600); err != nil {
		t.Fatal(err)
	}
	j, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open of the pages in use: %v", err)
	}
	defer j.Close()
	if info, err := j.Head(t.Context(), sid); err != nil || info.LastSeq != 3 {
		t.Errorf("Head = %+v, %v", info, err)
	}
}
