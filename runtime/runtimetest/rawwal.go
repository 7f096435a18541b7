package runtimetest

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The floor of a journal that syncs once per commit, for the benchmarks:
// what would move Audit's floor (BENCHMARKS.md, "Gateway"). bbolt syncs
// twice per commit, the data pages and then the meta page that points to
// them; a write-ahead log appends its records, each with its checksum,
// and syncs once, and a reader that finds a torn or unsynced tail cuts
// the log at the first record whose checksum fails.
//
// The floor writes such records, as one write and one fdatasync per
// commit, into a file written whole and synced when it is opened: a log
// that recycles its segments overwrites blocks that are already
// allocated, so a sync flushes the data alone, with no file system
// metadata (a file that grows, or blocks reserved by fallocate and not
// yet written, would make each sync commit metadata too). It is a floor,
// not a journal: a store built this way would also index its records
// (bbolt with its syncs taken off the caller's path), and replay its log
// after a crash.

// walSize is the floor's log file; it wraps to its start when full.
const walSize = 16 << 20

// walHeader is a record's header: its sequence, its length, and the
// CRC-32C of its value after it.
const walHeader = 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rawWAL is the floor's log.
type rawWAL struct {
	f   *os.File
	off int64
	buf []byte
	val []byte
}

// OpenRawWAL opens the single-sync floor in a temporary directory, closed
// when the benchmark ends; its records and group commit are RawCommits'.
func OpenRawWAL(b testing.TB) *RawCommits {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw.wal"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	zero := make([]byte, 1<<20)
	for off := int64(0); off < walSize; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	w := &rawWAL{f: f, val: rawRecord()}
	return &RawCommits{store: w.store, wal: w, val: w.val}
}

// store appends records first..first+n-1 in one write and syncs once.
func (w *rawWAL) store(first uint64, n int) error {
	w.buf = w.buf[:0]
	for i := range uint64(n) {
		w.buf = binary.BigEndian.AppendUint64(w.buf, first+i)
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(w.val)))
		w.buf = append(w.buf, w.val...)
		w.buf = binary.BigEndian.AppendUint32(w.buf, crc32.Checksum(w.val, castagnoli))
	}
	if w.off+int64(len(w.buf)) > walSize {
		w.off = 0
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return err
	}
	w.off += int64(len(w.buf))
	return syscall.Fdatasync(int(w.f.Fd()))
}
