package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// structBase is a journal whose log/ is three levels deep (a root branch,
// branches, leaves), built once per test binary, with the facts the
// damage cases need.
var structBase structFacts

type structFacts struct {
	once sync.Once
	err  error
	data []byte
	m    boltMeta
	// logRoot is log/'s root page; mids are the branch pages under it,
	// in key order; free is a page on the freelist.
	logRoot uint64
	mids    []uint64
	free    uint64
	logSeq  uint64
}

func structFile(t *testing.T) []byte {
	t.Helper()
	b := &structBase
	b.once.Do(func() { b.err = buildStructBase(t.TempDir()) })
	if b.err != nil {
		t.Fatalf("building the journal: %v", b.err)
	}
	return bytes.Clone(b.data)
}

func buildStructBase(dir string) error {
	b := &structBase
	path := filepath.Join(dir, "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		return err
	}
	sids := [3][16]byte{events.NewID(), events.NewID(), events.NewID()}
	for round := range 90 {
		evs := make([]events.Event, 100)
		for i := range evs {
			evs[i] = ev("s", round*100+i)
		}
		if _, err := j.Append(context.Background(), sids[round%3], Any, evs); err != nil {
			j.Close()
			return err
		}
	}
	if err := j.Close(); err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	err = db.View(func(tx *bolt.Tx) error {
		lb := tx.Bucket(bucketLog)
		b.logRoot, b.logSeq = uint64(lb.Root()), lb.Sequence()
		return nil
	})
	db.Close()
	if err != nil {
		return err
	}
	if b.data, err = os.ReadFile(path); err != nil {
		return err
	}
	m0, _ := parseMeta(b.data)
	m1, _ := parseMeta(b.data[m0.pageSize:])
	b.m = m0
	if m1.txid > m0.txid {
		b.m = m1
	}
	b.data = b.data[:b.m.pgid*uint64(b.m.pageSize)]
	root := b.page(b.logRoot)
	if root.flags != branchPageFlag {
		return fmt.Errorf("log/'s root page %d is not a branch", b.logRoot)
	}
	for i := range root.count {
		_, child := root.branchElem(i)
		if b.page(child).flags != branchPageFlag {
			return fmt.Errorf("log/ is two levels deep, want three")
		}
		b.mids = append(b.mids, child)
	}
	if len(b.mids) < 3 {
		return fmt.Errorf("log/'s root has %d children, want 3 or more", len(b.mids))
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	free, err := freePages(f, b.m)
	if err != nil || len(free) == 0 {
		return fmt.Errorf("no free page (%v)", err)
	}
	b.free = free[0]
	return nil
}

// page parses page id of the base file.
func (b *structFacts) page(id uint64) *rawPage {
	ps := uint64(b.m.pageSize)
	p := b.data[id*ps : (id+1)*ps]
	le := binary.LittleEndian
	return &rawPage{id: id, flags: le.Uint16(p[8:]), count: int(le.Uint16(p[10:])), b: p}
}

// TestCheckStructure damages log/'s branch pages, and the log's end, one
// way at a time: checkStructure must name each, a writable Open must
// refuse the file with ErrDamaged (an ErrCorrupt) without changing a
// byte of it, and a read-only Open must still open it.
func TestCheckStructure(t *testing.T) {
	data := structFile(t)
	b := &structBase
	le, be := binary.LittleEndian, binary.BigEndian
	ps := int(b.m.pageSize)
	off := func(id uint64) int { return int(id) * ps }
	// elem returns the offset of element i of page id, and of its key.
	elem := func(d []byte, id uint64, i int) (int, int) {
		at := off(id) + pageHeader + i*pageElemSize
		return at, at + int(le.Uint32(d[at:]))
	}
	count := func(d []byte, id uint64) int { return int(le.Uint16(d[off(id)+10:])) }
	setKey := func(d []byte, id uint64, i int, k uint64) {
		_, kat := elem(d, id, i)
		be.PutUint64(d[kat:], k)
	}
	setChild := func(d []byte, id uint64, i int, child uint64) {
		at, _ := elem(d, id, i)
		le.PutUint64(d[at+8:], child)
	}
	child := func(d []byte, id uint64, i int) uint64 {
		at, _ := elem(d, id, i)
		return le.Uint64(d[at+8:])
	}
	mid, first, last := b.mids[1], b.mids[0], b.mids[len(b.mids)-1]
	lastLeaf := child(data, last, count(data, last)-1)
	// lastPos is the key offset of the rightmost leaf's element 1.
	lastPos := int(le.Uint32(data[off(lastLeaf)+pageHeader+pageElemSize+4:]))
	// rootLog returns the offset of log/'s value in the root page.
	rootLog := func(d []byte) int {
		p := &rawPage{id: b.m.root, count: int(le.Uint16(d[off(b.m.root)+10:])), flags: leafPageFlag, b: d[off(b.m.root) : off(b.m.root)+ps]}
		for i := range p.count {
			at := pageHeader + i*pageElemSize
			pos, ksize := at+int(le.Uint32(p.b[at+4:])), int(le.Uint32(p.b[at+8:]))
			if string(p.b[pos:pos+ksize]) == "log" {
				return off(b.m.root) + pos + ksize
			}
		}
		t.Fatal("no log bucket in the root page")
		return 0
	}
	for _, c := range []struct {
		name   string
		damage func(d []byte)
		want   string
	}{
		{"keys out of order", func(d []byte) {
			_, k2 := elem(d, b.logRoot, 2)
			setKey(d, b.logRoot, 1, be.Uint64(d[k2:])+1)
		}, fmt.Sprintf("page %d (bucket log) has its keys out of order at element 2", b.logRoot)},
		{"the last key past the log's end", func(d []byte) { setKey(d, last, count(d, last)-1, b.logSeq+1) }, fmt.Sprintf("page %d (bucket log) holds key %d, outside the log's positions 1 to %d", last, b.logSeq+1, b.logSeq)},
		{"a zero key", func(d []byte) { setKey(d, first, 0, 0) }, "holds key 0, outside the log's positions"},
		{"a key below its parent's range", func(d []byte) { setKey(d, mid, 0, 1); setKey(d, mid, 1, 2) }, fmt.Sprintf("page %d (bucket log) holds key 0000000000000002 outside the range its parent gives it", mid)},
		{"a key above its parent's range", func(d []byte) {
			_, hi := elem(d, b.logRoot, 2)
			setKey(d, mid, count(d, mid)-1, be.Uint64(d[hi:]))
		}, fmt.Sprintf("page %d (bucket log) holds key", mid)},
		{"a key of 7 bytes", func(d []byte) {
			at, _ := elem(d, mid, 3)
			le.PutUint32(d[at+4:], 7)
		}, fmt.Sprintf("page %d (bucket log) has a key of 7 bytes at element 3, not 8", mid)},
		{"a child past the pages in use", func(d []byte) { setChild(d, mid, 2, b.m.pgid) }, fmt.Sprintf("branch page %d (bucket log) points at page %d, outside the file's pages 2 to %d", mid, b.m.pgid, b.m.pgid-1)},
		{"a child on a meta page", func(d []byte) { setChild(d, mid, 2, 1) }, "points at page 1, outside the file's pages"},
		{"a free child", func(d []byte) { setChild(d, mid, 2, b.free) }, fmt.Sprintf("points at page %d, which is free or used twice", b.free)},
		{"a child used twice", func(d []byte) { setChild(d, mid, 2, child(d, mid, 1)) }, "which is free or used twice"},
		{"a page with another id", func(d []byte) { le.PutUint64(d[off(mid):], mid+1) }, fmt.Sprintf("page %d (bucket log) says it is page %d", mid, mid+1)},
		{"a page of no type", func(d []byte) { le.PutUint16(d[off(mid)+8:], 0x40) }, fmt.Sprintf("page %d (bucket log) has flags 0x40", mid)},
		{"a leaf among branches", func(d []byte) { le.PutUint16(d[off(mid)+8:], leafPageFlag) }, fmt.Sprintf("page %d (bucket log) is a leaf among branches", mid)},
		{"a branch among leaves", func(d []byte) { le.PutUint16(d[off(first)+8:], leafPageFlag) }, fmt.Sprintf("page %d (bucket log) is a branch among leaves", last)},
		{"an empty branch", func(d []byte) { le.PutUint16(d[off(mid)+10:], 0) }, fmt.Sprintf("branch page %d (bucket log) is empty", mid)},
		{"more elements than the page holds", func(d []byte) { le.PutUint16(d[off(mid)+10:], 0xFFFF) }, "elements, more than it holds"},
		{"an overflow past the file", func(d []byte) { le.PutUint32(d[off(mid)+12:], uint32(b.m.pgid)) }, fmt.Sprintf("page %d (bucket log) overflows into %d more pages", mid, b.m.pgid)},
		{"a key past the page", func(d []byte) {
			at, _ := elem(d, mid, 3)
			le.PutUint32(d[at:], uint32(ps))
		}, fmt.Sprintf("element 3 of page %d (bucket log) ends %d bytes past the page", mid, pageHeader+3*pageElemSize+8)},
		{"300 elements", func(d []byte) { le.PutUint16(d[off(mid)+10:], 300) }, fmt.Sprintf("page %d (bucket log) has 300 elements, more than it holds", mid)},
		{"the leftmost child past the pages in use", func(d []byte) { setChild(d, b.logRoot, 0, b.m.pgid) },
			fmt.Sprintf("bucket log points at page %d, outside the file's pages 2 to %d", b.m.pgid, b.m.pgid-1)},
		{"the leftmost child on page 2", func(d []byte) { setChild(d, b.logRoot, 0, 2) }, "(bucket log) is a branch among leaves"},
		{"the log's root free", func(d []byte) {
			le.PutUint64(d[rootLog(d):], b.free)
		}, fmt.Sprintf("bucket log's root page %d is free or used twice", b.free)},
		{"the log's sequence past its last record", func(d []byte) {
			le.PutUint64(d[rootLog(d)+8:], b.logSeq+5)
		}, fmt.Sprintf("ends at key %d, not at its sequence %d", b.logSeq, b.logSeq+5)},
		{"a child on page 2", func(d []byte) { setChild(d, mid, 2, 2) }, "is free or used twice"},
		{"an overflow to the end of the file", func(d []byte) { le.PutUint32(d[off(mid)+12:], uint32(b.m.pgid-mid)) }, fmt.Sprintf("page %d (bucket log) overflows into %d more pages", mid, b.m.pgid-mid)},
		{"as many elements as the page holds", func(d []byte) { le.PutUint16(d[off(mid)+10:], uint16((ps-pageHeader)/pageElemSize)) }, fmt.Sprintf("of page %d (bucket log) ends", mid)},
		{"two equal keys", func(d []byte) {
			_, k := elem(d, mid, 3)
			setKey(d, mid, 4, be.Uint64(d[k:]))
		}, fmt.Sprintf("page %d (bucket log) has its keys out of order at element 4", mid)},
		{"an element that ends where the page ends", func(d []byte) {
			at, k := elem(d, mid, count(d, mid)-1)
			copy(d[off(mid)+ps-8:], d[k:k+8])
			le.PutUint32(d[at:], uint32(off(mid)+ps-8-at))
		}, ""},
		{"a branch's first key above its first child's keys", func(d []byte) {
			_, k1 := elem(d, b.logRoot, 1)
			setKey(d, b.logRoot, 0, be.Uint64(d[k1:])-1)
		}, ""},
		{"a first key below its parent's", func(d []byte) {
			_, lo := elem(d, b.logRoot, 1)
			setKey(d, mid, 1, be.Uint64(d[lo:]))
			setKey(d, mid, 0, be.Uint64(d[lo:])-1)
		}, ""},
		{"a value past the rightmost leaf", func(d []byte) {
			le.PutUint32(d[off(lastLeaf)+pageHeader+pageElemSize+12:], uint32(ps))
		}, fmt.Sprintf("element 1 of page %d (bucket log) ends %d bytes past the page", lastLeaf, pageHeader+pageElemSize+lastPos+8)},
		{"the rightmost leaf's keys out of order", func(d []byte) {
			leaf := child(d, last, count(d, last)-1)
			at := off(leaf) + pageHeader + pageElemSize
			be.PutUint64(d[at+int(le.Uint32(d[at+4:])):], 1)
		}, "has its keys out of order at element 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := bytes.Clone(data)
			c.damage(d)
			path := filepath.Join(t.TempDir(), "j.db")
			if err := os.WriteFile(path, d, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := Open(path, &Options{LockTimeout: 200 * time.Millisecond})
			if c.want == "" { // not damage: bbolt reads it as it did
				if err != nil {
					t.Fatalf("a writable Open: %v", err)
				}
				j.Close()
				return
			}
			if err == nil {
				j.Close()
				t.Fatalf("a writable Open opened the damaged file")
			}
			if !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "mcpledger salvage "+path+" -o "+path+".salvaged") {
				t.Errorf("Open = %v\nwant ErrDamaged, %q, and the salvage command", err, c.want)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, d) {
				t.Error("the refused Open changed the file")
			}
			if strings.Contains(c.name, "root") || strings.Contains(c.name, "sequence") {
				return // bbolt reads these at a read-only Open too
			}
			j, err = Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("a read-only Open: %v", err)
			}
			j.Close()
		})
	}
	path := filepath.Join(t.TempDir(), "j.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("a writable Open of the intact file: %v", err)
	}
	j.Close()
}

// TestCheckStructureRootBranch: in a file whose root bucket's page is a
// branch (more top-level buckets than fill a page), the check reaches the
// buckets of its last leaf too.
func TestCheckStructureRootBranch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // sessions/ on a page of its own
		if _, err := j.Append(t.Context(), events.NewID(), NoStream, []events.Event{ev("a", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var sessions uint64
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range 300 {
			if _, err := tx.CreateBucket(fmt.Appendf(nil, "other-%03d", i)); err != nil {
				return err
			}
		}
		sessions = uint64(tx.Bucket(bucketSessions).Root())
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || sessions == 0 {
		t.Fatalf("%v (sessions/ at page %d)", err, sessions)
	}
	j, err = Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("a writable Open of the intact file: %v", err)
	}
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := newestMeta(t, data)
	if binary.LittleEndian.Uint16(data[m.root*uint64(m.pageSize)+8:]) != branchPageFlag {
		t.Fatal("the root bucket's page is not a branch")
	}
	binary.LittleEndian.PutUint16(data[sessions*uint64(m.pageSize)+8:], 0x40)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err = Open(path, &Options{NoSync: true})
	if err == nil {
		j.Close()
	}
	if want := fmt.Sprintf("page %d (bucket sessions) has flags 0x40", sessions); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), want) {
		t.Errorf("a writable Open with sessions/ damaged: %v, want %q", err, want)
	}
}

// TestCheckStructureRootFree: the root bucket's page on the freelist
// (which checkFreelist refuses before) is reported.
func TestCheckStructureRootFree(t *testing.T) {
	data := structFile(t)
	b := &structBase
	path := filepath.Join(t.TempDir(), "j.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := fmt.Sprintf("page %d (the root bucket) is free or used twice", b.m.root)
	if err := checkStructure(f, b.m, []uint64{b.m.root}); err == nil || err.Error() != want {
		t.Errorf("checkStructure = %v, want %q", err, want)
	}
	if err := checkStructure(f, b.m, nil); err != nil {
		t.Errorf("checkStructure of the intact file: %v", err)
	}
}

// TestErrDamaged: ErrDamaged is an ErrCorrupt, and not every ErrCorrupt
// is ErrDamaged.
func TestErrDamaged(t *testing.T) {
	if !errors.Is(ErrDamaged, ErrCorrupt) || errors.Is(ErrCorrupt, ErrDamaged) || errors.Is(ErrDamaged, ErrNotJournal) {
		t.Error("ErrDamaged must be an ErrCorrupt, and only that")
	}
	if ErrDamaged.Error() != "store: journal structure is damaged" {
		t.Errorf("ErrDamaged says %q", ErrDamaged)
	}
}

// TestWriterRefusesFuzzFindings: the fuzz findings whose appends failed
// (or exhausted memory) on pages no read depends on (RELIABILITY.md,
// known bug 1) are refused by a writable Open, before any commit.
func TestWriterRefusesFuzzFindings(t *testing.T) {
	for _, name := range []string{"append-fault-branch-key", "oom-append-damaged-log-leaf", "oom-append-log-bucket-flag", "verify-misses-branch-key"} {
		path := filepath.Join(t.TempDir(), "j.db")
		data := gunzipFinding(t, filepath.Join("testdata", "journalfuzz", name+".db.gz"))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := Open(path, &Options{NoSync: true, LockTimeout: 200 * time.Millisecond})
		if err == nil {
			j.Close()
		}
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: a writable Open: %v, want ErrDamaged", name, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
			t.Errorf("%s: the refused Open changed the file", name)
		}
	}
}

func gunzipFinding(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
