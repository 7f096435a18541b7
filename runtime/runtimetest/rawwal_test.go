package runtimetest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"
)

// TestRawWAL checks the single-sync floor: every record is written once,
// in sequence, with its length and checksum, concurrent commits share
// syncs, and a lone caller's records take one commit each.
func TestRawWAL(t *testing.T) {
	r := OpenRawWAL(t)
	for range 3 {
		if err := r.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if r.commits != 3 {
		t.Fatalf("3 sequential commits took %d commits", r.commits)
	}
	commitConcurrently(t, r)
	const n = 3 + workers*each
	if r.commits >= n {
		t.Errorf("%d concurrent commits took %d syncs: none shared", workers*each, r.commits-3)
	}
	log := make([]byte, r.wal.off+walHeader) // and the zeros after the last record
	if _, err := r.wal.f.ReadAt(log, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	var seq uint64
	for len(log) >= walHeader {
		s, size := binary.BigEndian.Uint64(log), binary.BigEndian.Uint32(log[8:])
		if s == 0 {
			break // the end of the log: never written
		}
		if s != seq+1 {
			t.Fatalf("record %d follows %d", s, seq)
		}
		val := log[walHeader : walHeader+int(size)]
		if !bytes.Equal(val, r.val) {
			t.Fatalf("record %d: value %q", s, val)
		}
		if sum := binary.BigEndian.Uint32(log[walHeader+int(size):]); sum != crc32.Checksum(val, castagnoli) {
			t.Fatalf("record %d: checksum %08x", s, sum)
		}
		seq, log = s, log[walHeader+int(size)+4:]
	}
	if seq != n {
		t.Fatalf("%d records in the log, want %d", seq, n)
	}
	t.Logf("%d concurrent commits in %d syncs", workers*each, r.commits-3)
}
