package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"time"
)

// bbolt's on-disk meta page, as bbolt v1.5 writes it (native endianness,
// little endian on the platforms mcpledger supports): a 16-byte page
// header, then magic, version, page size, flags (4 bytes each), the root
// bucket (root page id, sequence), the freelist page id, the high-water
// page id, the transaction id and an FNV-64a checksum of the fields before
// it.
const (
	boltMagic     = 0xED0CDAED
	boltVersion   = 2
	pageHeader    = 16
	metaSumOffset = 56 // bytes of meta before its checksum
)

type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	freelist uint64 // the freelist's first page, or noFreelist
	pgid     uint64 // the high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// bbolt's freelist page: a page header with the freelist flag, count
// page ids (8 bytes each, native endianness) after it, or, when count is
// 0xFFFF, the real count in the first 8 bytes and the ids after them.
const (
	noFreelist       = ^uint64(0) // meta.freelist when the freelist is not stored
	freelistPageFlag = 0x10
	freelistCountMax = 0xFFFF
)

// checkFile validates an existing journal file before bbolt maps it. bbolt
// trusts its meta page: a file shorter than the pages its last commit
// wrote (a truncated copy, a full disk during a copy) is mapped anyway, and
// reading a page past its end faults. So the file's size is checked
// against both meta pages first: a file too short for its newest valid
// meta is ErrCorrupt, one with no valid meta is ErrNotJournal. A missing
// or empty file passes (bbolt creates it).
//
// The freelist (checkFreelist) and the root bucket's page (checkRoot) are
// checked too: a writable bolt.Open reads the freelist and panics, or
// faults, on a damaged one, after it has opened and locked the file, and
// cannot release them; and bbolt copies the top-level buckets by the
// lengths their page gives, however large.
//
// The checks run under a shared lock, as a reader's, so that no writer is
// rewriting those pages meanwhile; they wait up to lockTimeout for one to
// let go, then fail with ErrLocked. The lock is released before bbolt
// takes its own.
func checkFile(path string, lockTimeout time.Duration) error {
	return checkFileFor(path, lockTimeout, false)
}

// checkFileFor is checkFile; for a writer (writable), it then checks the
// structure a writer would write into (checkStructure), and fails with
// ErrDamaged.
func checkFileFor(path string, lockTimeout time.Duration, writable bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close() // releases the lock
	if err := lockShared(f, lockTimeout); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	first := make([]byte, 4096)
	n, err := io.ReadFull(f, first)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	first = first[:n]
	m0, ok0 := parseMeta(first)
	var m1 boltMeta
	ok1 := false
	if ok0 {
		m1, ok1 = readMeta(f, int64(m0.pageSize))
	} else {
		// Without the first meta's page size, bbolt looks for the second
		// meta at every page size from 1 KiB to 16 MiB, and opens the file
		// from it: so does this check.
		for pos := int64(minPageSize); pos <= maxMetaSearch && pos < size-minPageSize && !ok1; pos <<= 1 {
			m1, ok1 = readMeta(f, pos)
		}
	}
	var m boltMeta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return fmt.Errorf("open %s: %w: no valid bbolt meta page in its %d bytes", path, ErrNotJournal, size)
	}
	if need := int64(m.pgid) * int64(m.pageSize); size < need {
		return fmt.Errorf("open %s: %w: the file is %d bytes but its last commit (transaction %d) wrote %d: it was truncated; restore it from a copy, or move it aside to start a new journal",
			path, ErrCorrupt, size, m.txid, need)
	}
	free, err := freePages(f, m)
	if err != nil {
		return fmt.Errorf("open %s: %w: %s (run mcpledger verify on a copy, or move it aside)", path, ErrCorrupt, err)
	}
	if err := checkRoot(f, m); err != nil {
		return fmt.Errorf("open %s: %w: %s (run mcpledger verify on a copy, or move it aside)", path, ErrCorrupt, err)
	}
	if writable {
		if err := checkStructure(f, m, free); err != nil {
			return fmt.Errorf("open %s for writing: %w: %s; nothing was written (run `mcpledger verify --journal %s` for the damage, and `mcpledger salvage %s -o %s.salvaged` to copy what still reads into a new journal)",
				path, ErrDamaged, err, path, path, path)
		}
	}
	return nil
}

// bbolt's branch and leaf pages: a page header, then count elements of 16
// bytes (branch: key offset and size, child page id; leaf: flags, key
// offset, key size, value size; offsets from the element's own start).
const (
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	pageElemSize   = 16
	bucketLeafFlag = 0x01 // a leaf element that is a nested bucket
	bucketHeader   = 16   // a bucket's value: root page id, sequence
)

// checkRoot checks the page of the root bucket that meta m names, which
// holds the top-level buckets (meta/, log/, sessions/, index/): that every
// element's key and value lie inside the page, every child page is in
// use, and a small bucket stored inline in its value (a page of its own
// after the bucket header) is a leaf whose elements lie inside that
// value. bbolt copies the value of an inline bucket that is not 8-byte
// aligned as its element says, before anything can check it (a damaged
// length there made it allocate up to 4 GiB), then reads the inline page
// as its header says.
func checkRoot(f *os.File, m boltMeta) error {
	if m.root < 2 || m.root >= m.pgid {
		return fmt.Errorf("the root bucket's page %d is outside the file's %d pages", m.root, m.pgid)
	}
	ps := int64(m.pageSize)
	var hdr [pageHeader]byte
	if _, err := f.ReadAt(hdr[:], int64(m.root)*ps); err != nil {
		return fmt.Errorf("reading the root bucket's page %d: %v", m.root, err)
	}
	le := binary.LittleEndian
	id, flags, count, overflow := le.Uint64(hdr[0:]), le.Uint16(hdr[8:]), int64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
	switch {
	case id != m.root:
		return fmt.Errorf("the root bucket's page %d says it is page %d", m.root, id)
	case flags != branchPageFlag && flags != leafPageFlag:
		return fmt.Errorf("the root bucket's page %d has flags %#x, not a branch or leaf page's", m.root, flags)
	case overflow >= m.pgid-m.root:
		return fmt.Errorf("the root bucket's page %d overflows into %d more pages, past the file's %d", m.root, overflow, m.pgid)
	}
	size := (int64(overflow) + 1) * ps
	if pageHeader+count*pageElemSize > size {
		return fmt.Errorf("the root bucket's page %d has %d elements, more than it holds", m.root, count)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, int64(m.root)*ps); err != nil {
		return fmt.Errorf("reading the root bucket's page %d: %v", m.root, err)
	}
	for i := range count {
		at := pageHeader + i*pageElemSize
		e := b[at : at+pageElemSize]
		var end int64
		if flags == branchPageFlag {
			pos, ksize, child := int64(le.Uint32(e[0:])), int64(le.Uint32(e[4:])), le.Uint64(e[8:])
			if child < 2 || child >= m.pgid {
				return fmt.Errorf("the root bucket's page %d points at page %d, outside the file's %d", m.root, child, m.pgid)
			}
			end = at + pos + ksize
		} else {
			eflags, pos, ksize, vsize := le.Uint32(e[0:]), int64(le.Uint32(e[4:])), int64(le.Uint32(e[8:])), int64(le.Uint32(e[12:]))
			end = at + pos + ksize + vsize
			if end <= size && eflags&bucketLeafFlag != 0 {
				if err := checkBucketValue(b[end-vsize:end], m); err != nil {
					return fmt.Errorf("bucket %q in the root bucket's page %d: %v", b[at+pos:at+pos+min(ksize, 32)], m.root, err)
				}
			}
		}
		if end > size {
			return fmt.Errorf("element %d of the root bucket's page %d ends %d bytes past the page", i, m.root, end-size)
		}
	}
	return nil
}

// checkBucketValue checks a bucket's value, v: its root page is in use, or
// it is inline and its page is a leaf whose elements lie inside v.
func checkBucketValue(v []byte, m boltMeta) error {
	if len(v) < bucketHeader {
		return fmt.Errorf("its value has %d bytes", len(v))
	}
	le := binary.LittleEndian
	if root := le.Uint64(v); root != 0 {
		if root < 2 || root >= m.pgid {
			return fmt.Errorf("its root page %d is outside the file's %d pages", root, m.pgid)
		}
		return nil
	}
	p := v[bucketHeader:]
	if len(p) < pageHeader || le.Uint16(p[8:]) != leafPageFlag {
		return errors.New("its inline page is not a leaf")
	}
	count := int64(le.Uint16(p[10:]))
	if pageHeader+count*pageElemSize > int64(len(p)) {
		return fmt.Errorf("its inline page has %d elements, more than it holds", count)
	}
	for i := range count {
		at := pageHeader + i*pageElemSize
		e := p[at : at+pageElemSize]
		if end := at + int64(le.Uint32(e[4:])) + int64(le.Uint32(e[8:])) + int64(le.Uint32(e[12:])); end > int64(len(p)) {
			return fmt.Errorf("element %d of its inline page ends %d bytes past it", i, end-int64(len(p)))
		}
	}
	return nil
}

// checkFreelist checks the freelist page that meta m names, as bbolt
// will read it: its page header (id, type, count and overflow, all inside
// the pages m uses) and the page ids it lists, which must be distinct
// pages in use other than the metas, the root bucket's page and the
// freelist's own (bbolt would hand them out to be overwritten). A file
// whose freelist is not stored (bbolt rebuilds it by walking the tree)
// passes.
func checkFreelist(f *os.File, m boltMeta) error {
	_, err := freePages(f, m)
	return err
}

// freePages is checkFreelist, returning the free page ids, sorted.
func freePages(f *os.File, m boltMeta) ([]uint64, error) {
	if m.freelist == noFreelist {
		return nil, nil
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return nil, fmt.Errorf("the freelist page %d is outside the file's %d pages", m.freelist, m.pgid)
	}
	ps := int64(m.pageSize)
	var hdr [pageHeader + 8]byte
	if _, err := f.ReadAt(hdr[:], int64(m.freelist)*ps); err != nil {
		return nil, fmt.Errorf("reading the freelist page %d: %v", m.freelist, err)
	}
	le := binary.LittleEndian
	id, flags, count, overflow := le.Uint64(hdr[0:]), le.Uint16(hdr[8:]), uint64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
	switch {
	case id != m.freelist:
		return nil, fmt.Errorf("the freelist page %d says it is page %d", m.freelist, id)
	case flags != freelistPageFlag:
		return nil, fmt.Errorf("the freelist page %d has flags %#x, not a freelist's", m.freelist, flags)
	case overflow >= m.pgid-m.freelist:
		return nil, fmt.Errorf("the freelist page %d overflows into %d more pages, past the file's %d", m.freelist, overflow, m.pgid)
	}
	skip := int64(0)
	if count == freelistCountMax {
		count, skip = le.Uint64(hdr[pageHeader:]), 8
	}
	room := uint64((int64(overflow)+1)*ps-pageHeader-skip) / 8
	if count > room {
		return nil, fmt.Errorf("the freelist page %d lists %d pages, more than its %d pages hold", m.freelist, count, overflow+1)
	}
	if count == 0 {
		return nil, nil
	}
	b := make([]byte, count*8)
	if _, err := f.ReadAt(b, int64(m.freelist)*ps+pageHeader+skip); err != nil {
		return nil, fmt.Errorf("reading the freelist page %d: %v", m.freelist, err)
	}
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = le.Uint64(b[8*i:])
	}
	slices.Sort(ids)
	for i, id := range ids {
		switch {
		case id < 2 || id >= m.pgid:
			return nil, fmt.Errorf("the freelist lists page %d, outside the file's pages 2 to %d", id, m.pgid-1)
		case i > 0 && id == ids[i-1]:
			return nil, fmt.Errorf("the freelist lists page %d twice", id)
		case id == m.root:
			return nil, fmt.Errorf("the freelist lists page %d, the root bucket's", id)
		case id >= m.freelist && id <= m.freelist+overflow:
			return nil, fmt.Errorf("the freelist lists page %d, its own", id)
		}
	}
	return ids, nil
}

// lockShared takes a shared flock on f, waiting up to timeout for a
// writer to let go (ErrLocked), polling as bbolt does: every 50 ms, and
// giving up once a further wait would pass the timeout.
func lockShared(f *os.File, timeout time.Duration) error {
	const retry = 50 * time.Millisecond
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err // nil once the lock is taken
		}
		if time.Since(start) > timeout-retry {
			return ErrLocked
		}
		time.Sleep(retry)
	}
}

// Where bbolt looks for the second meta page when the first is invalid:
// at each power of two from minPageSize to maxMetaSearch bytes.
const (
	minPageSize   = 1024
	maxMetaSearch = 1024 << 14
)

// readMeta reads the meta page at offset off of f, and reports whether it
// is valid (parseMeta).
func readMeta(f *os.File, off int64) (boltMeta, bool) {
	b := make([]byte, pageHeader+metaSumOffset+8)
	if _, err := f.ReadAt(b, off); err != nil {
		return boltMeta{}, false
	}
	return parseMeta(b)
}

// parseMeta reads a meta page at the start of b, and reports whether it is
// valid (magic, version, checksum).
func parseMeta(b []byte) (boltMeta, bool) {
	if len(b) < pageHeader+metaSumOffset+8 {
		return boltMeta{}, false
	}
	m := b[pageHeader:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	if h.Sum64() != le.Uint64(m[metaSumOffset:]) {
		return boltMeta{}, false
	}
	ps := le.Uint32(m[8:])
	if ps < 512 || ps > 1<<20 {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: ps, root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}
