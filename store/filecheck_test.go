package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
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
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m0, _ := readMeta(f, 0)
	flipChecksum := func(page int) {
		t.Helper()
		var b [1]byte
		off := int64(page)*int64(m0.pageSize) + pageHeader + metaSumOffset
		if _, err := f.ReadAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 1
		if _, err := f.WriteAt(b[:], off); err != nil {
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
	flipChecksum(0) // the writable Open rewrote a meta: damage both
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
	// A writer's structure check walks the root bucket's branch too.
	if j, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatalf("a writable Open: %v", err)
	}
	j.Close()
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	m = newestMeta(t, data)
	data = data[:m.pgid*uint64(m.pageSize)]
	root = int(m.root) * int(m.pageSize)

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
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := readMeta(f, 0)
	m1, _ := readMeta(f, int64(m0.pageSize))
	f.Close()
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	used := int64(m.pgid) * int64(m.pageSize)
	if err := os.Truncate(path, used); err != nil {
		t.Fatal(err)
	}
	j, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open of the pages in use: %v", err)
	}
	if info, err := j.Head(t.Context(), sid); err != nil || info.LastSeq != 3 {
		t.Errorf("Head = %+v, %v", info, err)
	}
	j.Close()
	for _, n := range []int64{used - 1, used - int64(m.pageSize), used / 2} {
		if err := os.Truncate(path, n); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, &Options{ReadOnly: true})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("Open of the file cut to %d of its %d bytes in use: %v, want ErrCorrupt, truncated", n, used, err)
		}
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
		{"meta/'s last inline element past its value", func(b []byte) { le.PutUint32(b[metaElem+2*pageElemSize+12:], 4096) },
			"element 2 of its inline page ends"},
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

// metaPage returns a valid bbolt meta page (header and meta, with its
// checksum) for the given fields.
func metaPage(pageSize uint32, root, freelist, pgid, txid uint64) []byte {
	b := make([]byte, pageHeader+metaSumOffset+8)
	m := b[pageHeader:]
	le := binary.LittleEndian
	le.PutUint32(m[0:], boltMagic)
	le.PutUint32(m[4:], boltVersion)
	le.PutUint32(m[8:], pageSize)
	le.PutUint64(m[16:], root)
	le.PutUint64(m[32:], freelist)
	le.PutUint64(m[40:], pgid)
	le.PutUint64(m[48:], txid)
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	le.PutUint64(m[metaSumOffset:], h.Sum64())
	return b
}

// TestSecondMetaSearch: with the first meta page invalid, checkFile finds
// the second where bbolt does, at a power of two from 1 KiB to 16 MiB
// that leaves at least 1 KiB of the file after it, and judges the file by
// it (here: too short for the pages the meta says are in use).
func TestSecondMetaSearch(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name      string
		size, pos int64
		want      error
	}{
		{"at 4 KiB", 64 << 10, 4 << 10, ErrCorrupt},
		{"at 16 MiB", 16<<20 + 4<<10, 16 << 20, ErrCorrupt},
		{"at 32 MiB, past the search", 32<<20 + 4<<10, 32 << 20, ErrNotJournal},
		{"in the last KiB", 3 << 10, 2 << 10, ErrNotJournal},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		// A sparse file: zeros (no valid first meta) but for the meta at pos,
		// which says far more pages are in use than the file holds.
		if err := f.Truncate(c.size); err == nil {
			_, err = f.WriteAt(metaPage(4096, 3, 2, 1<<20, 7), c.pos)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := checkFile(path, time.Second); !errors.Is(err, c.want) {
			t.Errorf("meta %s of a %d-byte file: checkFile = %v, want %v", c.name, c.size, err, c.want)
		}
	}
}

// TestMetasSameTxid: of two valid metas with the same transaction id,
// bbolt reads the first; so does checkFile.
func TestMetasSameTxid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := readMeta(f, 0)
	fi, err := f.Stat()
	if err == nil {
		// The second meta: the first's transaction, but pages past the end.
		_, err = f.WriteAt(metaPage(m0.pageSize, m0.root, m0.freelist, uint64(fi.Size())/uint64(m0.pageSize)+1, m0.txid), int64(m0.pageSize))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFile(path, time.Second); err != nil {
		t.Errorf("checkFile = %v, want the file judged by its first meta", err)
	}
}

// checkRoot on a file of three pages whose last is the root bucket's: a
// root page past the pages in use is refused; a leaf page whose
// elements fill it exactly passes.
func TestCheckRootPage(t *testing.T) {
	const ps = 4096
	page := make([]byte, ps)
	le := binary.LittleEndian
	le.PutUint64(page[0:], 2)
	le.PutUint16(page[8:], leafPageFlag)
	le.PutUint16(page[10:], (ps-pageHeader)/pageElemSize) // empty elements, up to the end
	f, err := os.Create(filepath.Join(t.TempDir(), "pages"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(page, 2*ps); err != nil {
		t.Fatal(err)
	}
	if err := checkRoot(f, boltMeta{pageSize: ps, root: 2, pgid: 3}); err != nil {
		t.Errorf("a full root page: %v", err)
	}
	for _, root := range []uint64{1, 3} {
		if err := checkRoot(f, boltMeta{pageSize: ps, root: root, pgid: 3}); err == nil || !strings.Contains(err.Error(), "outside the file's 3 pages") {
			t.Errorf("root page %d of 3: %v, want it outside the file", root, err)
		}
	}
	le.PutUint16(page[10:], (ps-pageHeader)/pageElemSize+1)
	if _, err := f.WriteAt(page, 2*ps); err != nil {
		t.Fatal(err)
	}
	if err := checkRoot(f, boltMeta{pageSize: ps, root: 2, pgid: 3}); err == nil || !strings.Contains(err.Error(), "more than it holds") {
		t.Errorf("a root page of one element too many: %v", err)
	}

	// Page 2, the first after the metas, may be in use: as a branch's
	// child, or a bucket's root.
	for _, flags := range []uint16{branchPageFlag, leafPageFlag} {
		page := make([]byte, ps)
		le.PutUint64(page[0:], 3)
		le.PutUint16(page[8:], flags)
		le.PutUint16(page[10:], 1)
		e := page[pageHeader:]
		if flags == branchPageFlag {
			le.PutUint32(e[0:], pageElemSize) // the key right after the element
			le.PutUint32(e[4:], 3)
			le.PutUint64(e[8:], 2) // the child
		} else {
			le.PutUint32(e[0:], bucketLeafFlag)
			le.PutUint32(e[4:], pageElemSize)
			le.PutUint32(e[8:], 3)
			le.PutUint32(e[12:], bucketHeader)
			le.PutUint64(page[pageHeader+pageElemSize+3:], 2) // the bucket's root page
		}
		copy(page[pageHeader+pageElemSize:], "abc")
		if _, err := f.WriteAt(page, 3*ps); err != nil {
			t.Fatal(err)
		}
		if err := checkRoot(f, boltMeta{pageSize: ps, root: 3, pgid: 4}); err != nil {
			t.Errorf("a root page (flags %#x) that points at page 2: %v", flags, err)
		}
	}
}

// checkFreelist on a synthetic freelist page 2 (root page 3): it holds as
// many page ids as fit in its pages, one more is refused, with the count
// in the page header or, past 0xFFFF, in the first 8 bytes after it; the
// ids must be pages in use.
func TestCheckFreelistPage(t *testing.T) {
	const ps = 4096
	le := binary.LittleEndian
	path := filepath.Join(t.TempDir(), "pages")
	check := func(overflow uint32, big bool, count int, pgid uint64) error {
		t.Helper()
		page := make([]byte, (int(overflow)+1)*ps)
		le.PutUint64(page[0:], 2)
		le.PutUint16(page[8:], freelistPageFlag)
		le.PutUint32(page[12:], overflow)
		ids := page[pageHeader:]
		if big {
			le.PutUint16(page[10:], freelistCountMax)
			le.PutUint64(ids, uint64(count))
			ids = ids[8:]
		} else {
			le.PutUint16(page[10:], uint16(count))
		}
		for i := 0; i < count && 8*i+8 <= len(ids); i++ {
			le.PutUint64(ids[8*i:], uint64(4+i)) // pages 4, 5, …
		}
		if err := os.WriteFile(path, append(make([]byte, 2*ps), page...), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return checkFreelist(f, boltMeta{pageSize: ps, root: 3, freelist: 2, pgid: pgid})
	}
	room := (ps - pageHeader) / 8 // ids in one page
	for _, c := range []struct {
		name     string
		overflow uint32
		big      bool
		count    int
		pgid     uint64
		want     string // "" for none
	}{
		{"a full page", 0, false, room, 4 + uint64(room), ""},
		{"one id more than a page holds", 0, false, room + 1, 5 + uint64(room), "lists 511 pages, more than its 1 pages hold"},
		{"a full page, counted after the header", 0, true, room - 1, 3 + uint64(room), ""},
		{"one more, counted after the header", 0, true, room, 4 + uint64(room), "lists 510 pages, more than its 1 pages hold"},
		{"two full pages", 1, false, room + ps/8, 4 + uint64(room+ps/8), ""},
		{"one more than two pages hold", 1, false, room + ps/8 + 1, 5 + uint64(room+ps/8), "more than its 2 pages hold"},
		{"an id past the end", 0, false, 10, 13, "lists page 13, outside the file's pages 2 to 12"},
		{"the freelist at the end", 0, false, 1, 2, "the freelist page 2 is outside the file's 2 pages"},
	} {
		err := check(c.overflow, c.big, c.count, c.pgid)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: checkFreelist = %v, want %q", c.name, err, c.want)
		}
	}
}

// parseMeta takes page sizes from 512 bytes to 1 MiB, and refuses bytes
// too short to hold a meta.
func TestParseMeta(t *testing.T) {
	for _, c := range []struct {
		pageSize uint32
		ok       bool
	}{{511, false}, {512, true}, {4096, true}, {1 << 20, true}, {1<<20 + 1, false}} {
		if _, ok := parseMeta(metaPage(c.pageSize, 3, 2, 4, 1)); ok != c.ok {
			t.Errorf("page size %d: parseMeta ok = %v, want %v", c.pageSize, ok, c.ok)
		}
	}
	b := metaPage(4096, 3, 2, 4, 1)
	for _, n := range []int{len(b) - 1, pageHeader + 8} { // the magic and version, not the rest
		if _, ok := parseMeta(b[:n]); ok {
			t.Errorf("parseMeta took %d of a meta's %d bytes", n, len(b))
		}
	}
}
