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

// TestCheckFileBucketValues: checkFile checks each top-level bucket's
// value in the root bucket's leaf page: a bucket's root page must be in
// use; an inline bucket's page must be a leaf whose elements lie inside
// the value; an element must end inside the page, and may end right at
// its end.
func TestCheckFileBucketValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]events.Event, 60) // enough that log/ has pages of its own
	for i := range evs {
		evs[i] = ev("a", i)
	}
	if _, err := j.Append(t.Context(), events.NewID(), NoStream, evs); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := newestMeta(t, data)
	data = data[:m.pgid*uint64(m.pageSize)]
	le := binary.LittleEndian
	root, size := int(m.root)*int(m.pageSize), int(m.pageSize)
	if flags := le.Uint16(data[root+8:]); flags != leafPageFlag {
		t.Fatalf("the root bucket's page has flags %#x, want a leaf", flags)
	}
	// The root page's elements by key: where the element and its value are.
	type elem struct{ at, value, vsize int }
	elems := map[string]elem{}
	count := int(le.Uint16(data[root+10:]))
	for i := range count {
		at := root + pageHeader + i*pageElemSize
		pos, ksize, vsize := int(le.Uint32(data[at+4:])), int(le.Uint32(data[at+8:])), int(le.Uint32(data[at+12:]))
		elems[string(data[at+pos:at+pos+ksize])] = elem{at, at + pos + ksize, vsize}
	}
	logE, metaE, last := elems["log"], elems["meta"], elems["sessions"]
	if le.Uint64(data[logE.value:]) == 0 || le.Uint64(data[metaE.value:]) != 0 || le.Uint64(data[last.value:]) != 0 || last.at != root+pageHeader+(count-1)*pageElemSize {
		t.Fatal("want log/ in pages of its own, meta/ and sessions/ inline, and sessions/ last in the root page")
	}
	metaPage := metaE.value + bucketHeader // meta/'s inline page
	metaElem := metaPage + pageHeader      // its first element
	inlineEnd := pageHeader + int(le.Uint32(data[metaElem+4:])) + int(le.Uint32(data[metaElem+8:])) + 4096 - (metaE.vsize - bucketHeader)
	pastPage := last.value - root // with a value as long as a page
	for _, c := range []struct {
		name   string
		damage func(b []byte)
		want   string // "" for none
	}{
		{"log/'s root page past the end", func(b []byte) { le.PutUint64(b[logE.value:], m.pgid) },
			fmt.Sprintf(`bucket "log" in the root bucket's page %d: its root page %d is outside the file's %d pages`, m.root, m.pgid, m.pgid)},
		{"log/'s root page a meta page", func(b []byte) { le.PutUint64(b[logE.value:], 1) }, "its root page 1 is outside"},
		{"log/'s value short", func(b []byte) { le.PutUint32(b[logE.at+12:], 8) }, "its value has 8 bytes"},
		{"meta/'s inline page a branch", func(b []byte) { le.PutUint16(b[metaPage+8:], branchPageFlag) },
			`bucket "meta" in the root bucket's page ` + fmt.Sprint(m.root) + ": its inline page is not a leaf"},
		{"meta/'s inline page too many elements", func(b []byte) { le.PutUint16(b[metaPage+10:], 1000) }, "its inline page has 1000 elements, more than it holds"},
		{"meta/'s inline element past its value", func(b []byte) { le.PutUint32(b[metaElem+12:], 4096) },
			fmt.Sprintf("element 0 of its inline page ends %d bytes past it", inlineEnd)},
		{"the last element ends at the end of the page", func(b []byte) { le.PutUint32(b[last.at+12:], uint32(root+size-last.value)) }, ""},
		{"the last element ends at the end of the page, its inline page a branch", func(b []byte) {
			le.PutUint32(b[last.at+12:], uint32(root+size-last.value))
			le.PutUint16(b[last.value+bucketHeader+8:], branchPageFlag)
		}, `bucket "sessions"`},
		{"the last element past the page", func(b []byte) { le.PutUint32(b[last.at+12:], uint32(size)) },
			fmt.Sprintf("element %d of the root bucket's page %d ends %d bytes past the page", count-1, m.root, pastPage)},
	} {
		b := bytes.Clone(data)
		c.damage(b)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		err := checkFile(path, time.Second)
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: checkFile = %v, want %q", c.name, err, c.want)
		}
	}
}
