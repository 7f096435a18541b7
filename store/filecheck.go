package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
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
	pgid     uint64 // the high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// checkFile validates an existing journal file before bbolt maps it. bbolt
// trusts its meta page: a file shorter than the pages its last commit
// wrote (a truncated copy, a full disk during a copy) is mapped anyway, and
// reading a page past its end faults the process, which no recover can
// catch. So the file's size is checked against both meta pages first: a
// file too short for its newest valid meta is ErrCorrupt, one with no valid
// meta is ErrNotJournal. A missing or empty file passes (bbolt creates it).
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
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
		second := make([]byte, pageHeader+metaSumOffset+8)
		if _, err := f.ReadAt(second, int64(m0.pageSize)); err == nil {
			m1, ok1 = parseMeta(second)
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
	return nil
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
	return boltMeta{pageSize: ps, pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}
